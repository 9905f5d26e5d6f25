/**
 * The examples that take MONGODB_URI, given a `mongodb+srv://` one (the connection string Atlas gives): each run as a
 * child process against the SRV test environment (local DNS responder, preloaded into the child, and two mongos
 * behind a SOCKS5 proxy). Such a client has no host and no pool until its DNS records are in, after connect()
 * returned: what an example reads of `client.hosts` or `client.pools` at the start is empty.
 */
import { expect } from 'chai';
import { SrvEnvironment, srvHost, srvRecords, TEST1 } from '../support/srv-environment';
import { lastJsonLine, runExample, startExample, type ExampleOptions } from './run-example';

describe('examples given a mongodb+srv MONGODB_URI', function () {
  this.timeout(30_000);
  const environment = new SrvEnvironment({ srv: { [TEST1]: srvRecords(27017, 27018) } });
  let options: ExampleOptions;
  before(async function () {
    await environment.start();
    options = {
      env: { MONGODB_URI: `mongodb+srv://test1.test.build.10gen.cc/?${environment.query}`, RXCMAP_TEST_DNS_SERVERS: environment.responder.server },
      preload: ['spec/support/dns-servers-preload.ts'],
    };
  });
  after(async function () {
    await environment.stop();
  });

  it('demo.ts runs its load and its clear on the pool of a selected server, and exits 0', async function () {
    const { code, stdout, stderr } = await runExample('demo.ts', ['--duration', '1', '--workers', '50'], 20_000, options);
    expect(code, stderr).to.equal(0);
    const summary = lastJsonLine(stdout) as { pings: number; otherErrors: number; connectionsCreated: number; clear: { readyAgainAtMS: number | null } | null };
    expect(summary.pings).to.be.above(0);
    expect(summary.otherErrors).to.equal(0);
    expect(summary.connectionsCreated).to.be.above(0);
    expect(summary.clear?.readyAgainAtMS, 'the cleared pool readied again by its monitor').to.be.a('number');
  });

  it('tracing.ts counts the connections its pools created, as many as it traced establishments', async function () {
    const { code, stdout, stderr } = await runExample('tracing.ts', ['--operations', '4', '--concurrency', '2'], 20_000, options);
    expect(code, stderr).to.equal(0);
    const summary = lastJsonLine(stdout) as { failedOperations: number; connectionsCreated: number; spans: { establish: number } };
    expect(summary.failedOperations).to.equal(0);
    expect(summary.spans.establish).to.be.above(0);
    expect(summary.connectionsCreated).to.equal(summary.spans.establish);
  });

  it('prometheus.ts serves the metrics of both pools the SRV records gave, each under its own pool name', async function () {
    const example = startExample('prometheus.ts', ['--seconds', '1', '--pool-name', 'orders'], options);
    const url = await example.waitForLine(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/, 15_000);
    // The first ping found the hosts; the load runs for a second.
    let names = new Set<string>();
    let text = '';
    for (let i = 0; i < 40 && names.size < 2; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      text = await (await fetch(url)).text();
      names = new Set([...text.matchAll(/^db_client_connection_max\{db_client_connection_pool_name="([^"]+)"/gm)].map((m) => m[1]));
    }
    expect([...names].sort()).to.deep.equal([`orders/${srvHost(27017)}`, `orders/${srvHost(27018)}`]);
    // The commands' durations too (instrumentCommands follows the client's commands, whichever pool runs them).
    expect(text).to.match(/^db_client_operation_duration_count\{[^}]*server_address="localhost\.test\.build\.10gen\.cc"/m);
    const { code, stderr } = await example.exited(15_000);
    expect(code, stderr).to.equal(0);
  });
});
