/**
 * The default connection factory: establishes a {@link Connection} over TCP (socket connect, then the hello
 * handshake) as a cancellable Observable.
 *
 * Source: CMAP spec, "Establishing a Connection"; handshake spec, "Connection handshake".
 */
import * as net from 'node:net';
import { Observable } from 'rxjs';
import { InvalidOptionError, MongoNetworkError, MongoNetworkTimeoutError } from '../errors';
import type { ConnectionFactory } from '../pool/commands';
import type { ConnectionDescriptor } from '../pool/state';
import { Connection } from './connection';
import { clientMetadata, handshakeCommand } from './handshake';

/** How connections are established. Durations in ms. */
export interface ConnectionOptions {
  /** Sent in the handshake as `client.application.name` (at most 128 bytes). */
  appName?: string;
  /** Time allowed for socket connect plus handshake, in ms; 0 = no limit. Default 10000. */
  connectTimeoutMS?: number;
  /** Default time allowed for each reply once established, in ms; 0 = no limit. Default 0. */
  socketTimeoutMS?: number;
}

/** Where to connect: a host and port, or a Unix domain socket path (as host, with no port). */
export interface Endpoint {
  host: string;
  port?: number;
}

/**
 * A factory of real connections to `endpoint`. Each establishment opens a socket, performs the handshake and emits
 * the established {@link Connection}; unsubscribing (or the descriptor's signal aborting) before that destroys the
 * socket. Fails with {@link MongoNetworkError} (connect error, socket closed), {@link MongoNetworkTimeoutError}
 * (connectTimeoutMS elapsed) or the handshake's server error.
 *
 * @throws {InvalidOptionError} for an invalid connectTimeoutMS, socketTimeoutMS or appName.
 */
export function connectionFactory(options: ConnectionOptions & Endpoint): ConnectionFactory<Connection> {
  const connectTimeoutMS = nonNegative('connectTimeoutMS', options.connectTimeoutMS ?? 10_000);
  const socketTimeoutMS = nonNegative('socketTimeoutMS', options.socketTimeoutMS ?? 0);
  const handshake = handshakeCommand(clientMetadata(options.appName));
  const endpoint: Endpoint = { host: options.host, port: options.port };
  return (descriptor) => establish(endpoint, descriptor, handshake, connectTimeoutMS, socketTimeoutMS);
}

function establish(
  endpoint: Endpoint,
  descriptor: ConnectionDescriptor,
  handshake: Record<string, unknown>,
  connectTimeoutMS: number,
  socketTimeoutMS: number,
): Observable<Connection> {
  return new Observable<Connection>((subscriber) => {
    const { address } = descriptor;
    const socket =
      endpoint.port === undefined
        ? net.connect({ path: endpoint.host })
        : net.connect({ host: endpoint.host, port: endpoint.port });
    socket.setNoDelay(true);
    let delivered = false;
    const timer =
      connectTimeoutMS > 0
        ? setTimeout(() => {
            subscriber.error(new MongoNetworkTimeoutError(address, `connecting to ${address} timed out after ${connectTimeoutMS} ms`));
          }, connectTimeoutMS)
        : undefined;
    const onError = (error: Error): void =>
      subscriber.error(new MongoNetworkError(address, `connecting to ${address} failed: ${error.message}`, { cause: error }));
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      const connection = new Connection(socket, { ...descriptor, socketTimeoutMS });
      connection.command('admin', handshake).then(
        (reply) => {
          connection.applyHandshake(reply);
          delivered = true;
          subscriber.next(connection);
          subscriber.complete();
        },
        (error: Error) => subscriber.error(error),
      );
    });
    return () => {
      if (timer !== undefined) clearTimeout(timer);
      if (!delivered) socket.destroy();
    };
  });
}

function nonNegative(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new InvalidOptionError(name, value, 'a number of ms >= 0 (0 means no limit)');
  }
  return value;
}
