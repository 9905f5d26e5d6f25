/**
 * Preloaded (`node -r`) into an example run as a child process: points Node's resolver at the DNS servers of
 * `RXCMAP_TEST_DNS_SERVERS` (comma-separated `host:port`), the test's own DNS responder, so a `mongodb+srv://` URI
 * of the tests' records resolves in that process as it does in the spec's.
 */
import * as dns from 'node:dns';

const servers = process.env.RXCMAP_TEST_DNS_SERVERS;
if (servers !== undefined && servers !== '') dns.setServers(servers.split(','));
