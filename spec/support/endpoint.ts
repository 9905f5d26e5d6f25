/**
 * The endpoint integration tests run against: the server named by MONGODB_URI when it is set, else a fresh embedded
 * endpoint. `embedded` is set only in the second case, for assertions on server-side state.
 */
import { EmbeddedServer, parseConnectionString } from '../../lib';

export interface TestEndpoint {
  readonly address: string;
  readonly embedded: EmbeddedServer | undefined;
  stop(): Promise<void>;
}

export async function startTestEndpoint(): Promise<TestEndpoint> {
  const uri = process.env.MONGODB_URI;
  if (uri) {
    return { address: parseConnectionString(uri).hosts[0], embedded: undefined, stop: async () => undefined };
  }
  const server = await new EmbeddedServer().start();
  return { address: server.address, embedded: server, stop: () => server.stop() };
}

/** Polls `condition` every 5 ms until it holds or `timeoutMS` passes; resolves to whether it held. */
export async function eventually(condition: () => boolean, timeoutMS = 2000): Promise<boolean> {
  const deadline = Date.now() + timeoutMS;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}
