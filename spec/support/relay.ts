/**
 * A stand-in for a server's listening socket: it forwards every connection it accepts to the server, byte for byte,
 * on a Unix domain socket path or on a port of 127.0.0.1. Closing it plays the server shutting down (its port refuses
 * connects, its socket file is removed), with or without the connections already open.
 */
import * as net from 'node:net';

/** A running relay (see {@link startRelay}). */
export interface Relay {
  /** Where clients connect: the Unix domain socket path, or `127.0.0.1:<port>`. */
  readonly address: string;
  /**
   * Stops listening: a connect is refused from now on (ECONNREFUSED; ENOENT for a socket path, whose file is removed).
   * The connections already relayed stay open.
   */
  stopListening(): void;
  /** Stops listening and destroys every relayed connection, both sides; resolves once the listener has closed. */
  close(): Promise<void>;
}

/**
 * Starts a relay to `target` (`host:port`, an IPv6 host without brackets after the last `:`), listening on
 * `socketPath` when given, else on a free port of 127.0.0.1.
 */
export async function startRelay(target: string, socketPath?: string): Promise<Relay> {
  const at = target.lastIndexOf(':');
  const [host, port] = [target.slice(0, at), Number(target.slice(at + 1))];
  const relayed = new Set<net.Socket>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(port, host);
    relayed.add(inbound).add(outbound);
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((resolve) => (socketPath === undefined ? server.listen(0, '127.0.0.1', resolve) : server.listen(socketPath, resolve)));
  const address = socketPath ?? `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    address,
    stopListening: () => void server.close(),
    close: () =>
      new Promise<void>((resolve) => {
        // The callback waits for every connection to end: each one is destroyed first.
        server.close(() => resolve());
        for (const socket of relayed) socket.destroy();
      }),
  };
}
