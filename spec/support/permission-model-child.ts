/**
 * Run by spec/connection/permission-model.spec.ts in a child process under Node's permission model, with file reads
 * allowed only under the repository (as a hardened deployment allows only the application's directory) and no file
 * writes, native addons, child processes or workers. Prints one JSON line: what each public path did there.
 * `PERMISSION_DENIED_FILE` is a readable file outside the repository (a CA file the process may not read).
 */
import { ConnectionPool, connectionFactory, MongoCredentials } from '../../lib';
import { awsCredentials } from '../../lib/auth/aws';
import { readTokenFile } from '../../lib/auth/token-file';
import { ClientMetadata } from '../../lib/connection/handshake';
import { compressorUnavailable } from '../../lib/connection/op-compressed';
import { openLogSink } from '../../lib/logging/log-sink';
import { startTestEndpoint } from './endpoint';

const messageOf = (f: () => unknown): string | undefined => {
  try {
    f();
    return undefined;
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
};

async function main(): Promise<void> {
  const denied = process.env.PERMISSION_DENIED_FILE!;
  const result: Record<string, unknown> = {};
  result.metadata = messageOf(() => (result.env = new ClientMetadata().document.env ?? null));
  const endpoint = await startTestEndpoint();
  try {
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions, waitQueueTimeoutMS: 10_000 });
    pool.ready();
    try {
      const connection = await pool.checkOut();
      result.ping = (await connection.command('admin', { ping: 1 })).ok;
      pool.checkIn(connection);
    } catch (error) {
      result.ping = `${(error as Error).name}: ${(error as Error).message}`;
    } finally {
      await pool.close();
    }
  } finally {
    await endpoint.stop();
  }
  result.tlsCAFile = messageOf(() => connectionFactory({ host: 'localhost', port: 27017, tls: true, tlsCAFile: denied }));
  result.snappy = compressorUnavailable('snappy') ?? null;
  result.tokenFile = await readTokenFile(denied, 'OIDC_TOKEN_FILE', (why, cause) => new Error(`${why} [${cause?.message}]`)).catch((error: Error) => error.message);
  // The AWS SDK's chain (installed here) reads the web identity token file (and the shared config files) itself.
  for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE']) delete process.env[name];
  process.env.AWS_WEB_IDENTITY_TOKEN_FILE = denied;
  process.env.AWS_ROLE_ARN = 'arn:aws:iam::000000000000:role/permission-model';
  result.awsSdk = await awsCredentials(new MongoCredentials({ mechanism: 'MONGODB-AWS' })).then(
    () => 'resolved',
    (error: Error) => ({ message: error.message, cause: (error.cause as Error | undefined)?.message }),
  );
  const warnings: string[] = [];
  process.on('warning', (w) => warnings.push(w.message));
  const sink = openLogSink(`${denied}.log`);
  await new Promise((resolve) => setImmediate(resolve));
  result.logWarnings = warnings;
  await sink.close?.();
  console.log(JSON.stringify(result));
}

main().catch((error) => {
  console.log(JSON.stringify({ crashed: String((error as Error)?.stack ?? error) }));
});
