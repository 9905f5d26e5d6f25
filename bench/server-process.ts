/**
 * Runs the embedded endpoint in its own process for the benchmarks, so that the server's work does not share a
 * thread with the pools being measured. Prints its address as one JSON line, then serves until killed.
 */
import { EmbeddedServer } from '../lib/testing';

void new EmbeddedServer().start().then((server) => {
  process.stdout.write(`${JSON.stringify({ address: server.address })}\n`);
  process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)));
});
