/**
 * A byte-level TCP fault proxy for tests: it forwards the bytes between a client and a server unchanged, and on a
 * given connection cuts, stalls or trickles them at a given byte offset of either direction. It reads no protocol, so
 * it plays the network and the OS under a connection (a reset, a FIN, a peer gone silent, a slow link), where the
 * wire proxy (wire-proxy.ts) plays a server that speaks badly.
 */
import * as net from 'node:net';

/** What happens once `afterBytes` bytes went through in the `direction` given. */
export interface TcpFault {
  /** `down`: server to client (a reply); `up`: client to server (a request). */
  readonly direction: 'down' | 'up';
  /** The bytes of that direction forwarded before the fault (0: none). */
  readonly afterBytes: number;
  /**
   * `rst`: the client's socket is reset (ECONNRESET on its side); `fin`: it is ended (the client reads EOF), the
   * server's side destroyed; `stall`: nothing more is forwarded in either direction, and nothing is closed (a peer
   * gone without a FIN).
   */
  readonly kind: 'rst' | 'fin' | 'stall';
}

export interface TcpFaultProxy {
  /** `127.0.0.1:<port>`: where clients connect. */
  readonly address: string;
  readonly port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** The connections whose client has neither closed nor ended (sent a FIN on) its socket. */
  openSockets(): number;
  /** The fault for the proxied connection number `n` (from 1, in accept order); undefined: forward everything. */
  fault: ((n: number) => TcpFault | undefined) | undefined;
  /** Server-to-client bytes written one at a time, each in its own write, `trickleMS` apart (0: no trickling). */
  trickleMS: number;
  /** When true, every byte in either direction is dropped, on every connection, and nothing is closed: a network gone silent. */
  blackhole: boolean;
  /** When true, the proxy stops reading from clients (their writes back up), until set false again. */
  paused: boolean;
  /** Bytes forwarded so far, per direction, over every connection. */
  readonly bytes: { up: number; down: number };
  /** Resets (RST) the client side of every open connection, or ends it (FIN) with `fin`. */
  cutAll(kind: 'rst' | 'fin'): void;
  /** Makes `paused` take effect on the connections already open. */
  applyPause(): void;
  stop(): Promise<void>;
}

export async function startTcpFaultProxy(target: string): Promise<TcpFaultProxy> {
  const [host, port] = target.split(':');
  const clients = new Set<net.Socket>();
  const all = new Set<net.Socket>();
  let accepted = 0;
  const proxy = {
    fault: undefined,
    trickleMS: 0,
    blackhole: false,
    paused: false,
    bytes: { up: 0, down: 0 },
  } as unknown as TcpFaultProxy & { fault: TcpFaultProxy['fault'] };
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const n = ++accepted;
    const fault = proxy.fault?.(n);
    const upstream = net.connect({ host, port: Number(port) });
    clients.add(client);
    all.add(client).add(upstream);
    if (proxy.paused) client.pause();
    let done = false;
    const seen = { up: 0, down: 0 };
    let trickle: Promise<void> = Promise.resolve();
    const apply = (kind: TcpFault['kind']): void => {
      done = true;
      if (kind === 'stall') return;
      if (kind === 'rst') client.resetAndDestroy();
      else client.end();
      upstream.destroy();
    };
    const forward = (direction: 'up' | 'down', chunk: Buffer): void => {
      if (done || proxy.blackhole) return;
      const to = direction === 'up' ? upstream : client;
      let part = chunk;
      if (fault !== undefined && fault.direction === direction) {
        const room = fault.afterBytes - seen[direction];
        if (room < chunk.length) part = chunk.subarray(0, Math.max(0, room));
      }
      seen[direction] += part.length;
      proxy.bytes[direction] += part.length;
      if (direction === 'down' && proxy.trickleMS > 0) {
        for (const byte of part) {
          trickle = trickle.then(() => new Promise((resolve) => setTimeout(resolve, proxy.trickleMS))).then(() => {
            if (!client.destroyed) client.write(Buffer.of(byte));
          });
        }
      } else if (part.length > 0) to.write(part);
      if (part.length < chunk.length || (fault?.direction === direction && seen[direction] >= fault.afterBytes)) {
        const kind = fault!.kind;
        // The bytes before the fault are written first, and given a moment to arrive: a reset right behind data still
        // unread reads as a FIN on Linux.
        void trickle.then(() => (direction === 'down' ? new Promise<void>((r) => client.write('', () => r())) : undefined)).then(() => setTimeout(() => apply(kind), 1));
      }
    };
    if (fault !== undefined && fault.afterBytes === 0 && fault.direction === 'up') apply(fault.kind);
    client.on('data', (chunk: Buffer) => forward('up', chunk));
    upstream.on('data', (chunk: Buffer) => forward('down', chunk));
    upstream.once('connect', () => {
      if (fault !== undefined && fault.afterBytes === 0 && fault.direction === 'down' && !done) apply(fault.kind);
    });
    const close = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('end', () => {
      clients.delete(client);
      if (!done) upstream.end();
    });
    upstream.on('end', () => {
      if (!done) void trickle.then(() => client.end());
    });
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', () => {
      clients.delete(client);
      all.delete(client);
      if (!done) upstream.destroy();
    });
    upstream.on('close', () => all.delete(upstream));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const listening = (server.address() as net.AddressInfo).port;
  return Object.assign(proxy, {
    address: `127.0.0.1:${listening}`,
    port: listening,
    accepted: () => accepted,
    openSockets: () => clients.size,
    cutAll: (kind: 'rst' | 'fin') => {
      for (const c of clients) kind === 'rst' ? c.resetAndDestroy() : c.end();
    },
    applyPause: () => {
      for (const c of clients) proxy.paused ? c.pause() : c.resume();
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of all) s.destroy();
        server.close(() => resolve());
      }),
  });
}
