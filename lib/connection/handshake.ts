/**
 * The initial handshake: the legacy hello command (with `helloOk`) that opens every connection, and the client
 * metadata it carries.
 *
 * Source: handshake spec, "Connection handshake", "Hello Command" (client.application/driver/os/platform).
 */
import * as os from 'node:os';
import type { Document } from 'bson';
import { DRIVER_INFO } from '../version';
import { InvalidOptionError } from '../errors';

/** The spec's limit on the size of `client.application.name`, in bytes. */
export const MAX_APP_NAME_BYTES = 128;

/**
 * The `client` document of the handshake.
 *
 * @throws {InvalidOptionError} (option `appName`) when appName is not a string of at most 128 bytes (UTF-8).
 */
export function clientMetadata(appName?: string): Document {
  const metadata: Document = {};
  if (appName !== undefined) {
    if (typeof appName !== 'string' || Buffer.byteLength(appName, 'utf8') > MAX_APP_NAME_BYTES) {
      throw new InvalidOptionError('appName', appName, `a string of at most ${MAX_APP_NAME_BYTES} bytes`);
    }
    metadata.application = { name: appName };
  }
  metadata.driver = { name: DRIVER_INFO.name, version: DRIVER_INFO.version };
  metadata.os = { type: os.type(), name: process.platform, architecture: process.arch, version: os.release() };
  metadata.platform = `Node.js ${process.version}, ${os.endianness()}`;
  return metadata;
}

/**
 * The first command on a connection: legacy hello (`isMaster`) with `helloOk: true`, the backpressure version, and
 * the client metadata. Sent over OP_MSG to `admin`.
 */
export function handshakeCommand(metadata: Document): Document {
  return { isMaster: 1, helloOk: true, backpressure: '2', client: metadata };
}
