/**
 * The initial handshake: the command that opens every connection (legacy hello with `helloOk`, or `hello` in
 * load-balanced mode), with the client metadata, offered compressors and mechanism negotiation it carries.
 *
 * Source: handshake spec, "Connection handshake", "Hello Command"; auth spec, "Mechanism Negotiation via Handshake";
 * OP_COMPRESSED spec (compression negotiation); load balancer spec ("loadBalanced" in the handshake).
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

/** What goes into the handshake besides the metadata. */
export interface HandshakeParts {
  /** The `client` document ({@link clientMetadata}). */
  readonly metadata: Document;
  /** Compressors to offer, in order of preference. */
  readonly compressors?: readonly string[];
  /** `<source>.<username>` when the auth mechanism must be negotiated. */
  readonly saslSupportedMechs?: string;
  /** Load-balanced mode: send `hello` with `loadBalanced: true`. */
  readonly loadBalanced?: boolean;
}

/**
 * The first command on a connection, sent over OP_MSG to `admin`: legacy hello (`isMaster`) with `helloOk: true`,
 * or `hello` with `loadBalanced: true` in load-balanced mode; always the backpressure version `"2"`.
 */
export function handshakeCommand(parts: HandshakeParts): Document {
  const command: Document = parts.loadBalanced ? { hello: 1, loadBalanced: true } : { isMaster: 1, helloOk: true };
  command.backpressure = '2';
  command.client = parts.metadata;
  if (parts.compressors && parts.compressors.length > 0) command.compression = [...parts.compressors];
  if (parts.saslSupportedMechs !== undefined) command.saslSupportedMechs = parts.saslSupportedMechs;
  return command;
}
