/**
 * A byte-level TCP fault proxy for tests: it forwards the bytes between a client and a server unchanged, and on a
 * given connection cuts, stalls or trickles them at a given byte offset of either direction. It reads no protocol, so
 * it plays the network and the OS under a connection (a reset, a FIN, a peer gone silent, a slow link), where the
 * wire proxy (wire-proxy.ts) plays a server that speaks badly.
 *
 * It can also play a long link (a cluster in another region): a fixed one-way delay per direction, jitter on top of it
 * (bytes still arrive in order, as over TCP), a bandwidth cap per direction, and a connect delay (the TCP handshake's
 * round trip, which a proxy on loopback would otherwise hide: the client's first bytes are held that long).
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
  /**
   * A network partition: while true, nothing moves in either direction on any connection, new ones included, and
   * nothing is closed; the bytes wait in the sockets' buffers, as TCP keeps retransmitting them, and arrive in order
   * once it is set false (a partition that heals). Set it with {@link partition}.
   */
  readonly partitioned: boolean;
  /**
   * The link's shape, read as each chunk arrives (0 everywhere: bytes go through at once). `delayMS`: one-way delay per
   * direction; `jitterMS`: up to that much more per chunk (uniform, from `random`), never reordering; `bytesPerSecond`:
   * a cap per direction and connection (0: none), bytes sent in slices of at most 1460 bytes; `connectDelayMS`: how
   * long a connection's first client bytes are held, on top of the up delay: the TCP handshake's round trip, as far as
   * the whole establishment's time goes (the client's socket connects at once on loopback, so the cost lands on its
   * first request; a TLS handshake through the proxy pays its round trips for real).
   */
  link: {
    delayMS: { up: number; down: number };
    jitterMS: number;
    bytesPerSecond: { up: number; down: number };
    connectDelayMS: number;
    random: () => number;
  };
  /** Bytes forwarded so far, per direction, over every connection. */
  readonly bytes: { up: number; down: number };
  /** Resets (RST) the client side of every open connection, or ends it (FIN) with `fin`. */
  cutAll(kind: 'rst' | 'fin'): void;
  /** Makes `paused` take effect on the connections already open. */
  applyPause(): void;
  /** Starts (true) or heals (false) a partition: see {@link partitioned}. */
  partition(on: boolean): void;
  /**
   * A server shut down: stops listening, so a connect is refused (ECONNREFUSED), and ends (FIN) every connection open.
   * Resolves once the port refuses connections.
   */
  shutDown(): Promise<void>;
  /** The server back (after {@link shutDown}): listens again on the same port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startTcpFaultProxy(target: string): Promise<TcpFaultProxy> {
  const [host, port] = target.split(':');
  const clients = new Set<net.Socket>();
  const all = new Set<net.Socket>();
  const pairs = new Set<readonly [net.Socket, net.Socket]>();
  let accepted = 0;
  const proxy = {
    fault: undefined,
    trickleMS: 0,
    blackhole: false,
    paused: false,
    partitioned: false,
    bytes: { up: 0, down: 0 },
    link: { delayMS: { up: 0, down: 0 }, jitterMS: 0, bytesPerSecond: { up: 0, down: 0 }, connectDelayMS: 0, random: Math.random },
  } as unknown as TcpFaultProxy & { fault: TcpFaultProxy['fault'] };
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const n = ++accepted;
    const fault = proxy.fault?.(n);
    const upstream = net.connect({ host, port: Number(port) });
    clients.add(client);
    all.add(client).add(upstream);
    if (proxy.paused || proxy.partitioned) client.pause();
    if (proxy.partitioned) upstream.pause();
    const pair = [client, upstream] as const;
    pairs.add(pair);
    let done = false;
    const seen = { up: 0, down: 0 };
    let trickle: Promise<void> = Promise.resolve();
    /** Per direction: when the link's last byte (scheduled so far) is delivered, on performance.now()'s clock. */
    const linkFree = { up: proxy.link.connectDelayMS > 0 ? performance.now() + proxy.link.connectDelayMS + proxy.link.delayMS.up : 0, down: 0 };
    const pending = { up: 0, down: 0 };
    /** Delivers `part` as the link's shape says: after the delay and jitter, in order, paced by the bandwidth cap. */
    const shaped = (direction: 'up' | 'down', part: Buffer, write: (slice: Buffer) => void): void => {
      const { delayMS, jitterMS, bytesPerSecond, random } = proxy.link;
      const rate = bytesPerSecond[direction];
      const arrives = performance.now() + delayMS[direction] + jitterMS * random();
      let at = Math.max(arrives, linkFree[direction]);
      const sliceBytes = rate > 0 ? 1460 : part.length;
      for (let offset = 0; offset < part.length; offset += sliceBytes) {
        const slice = part.subarray(offset, offset + sliceBytes);
        if (rate > 0) at += (slice.length * 1000) / rate;
        pending[direction]++;
        setTimeout(() => {
          pending[direction]--;
          if (!done) write(slice);
        }, Math.max(0, at - performance.now()));
      }
      linkFree[direction] = at;
    };
    const isShaped = (direction: 'up' | 'down'): boolean => {
      const l = proxy.link;
      return l.delayMS[direction] > 0 || l.jitterMS > 0 || l.bytesPerSecond[direction] > 0 || (direction === 'up' && linkFree.up > performance.now());
    };
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
      } else if (part.length > 0 && isShaped(direction)) {
        shaped(direction, part, (slice) => {
          if (!to.destroyed) to.write(slice);
        });
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
      const afterLink = (): void => {
        if (pending.up > 0) setTimeout(afterLink, 1);
        else if (!done) upstream.end();
      };
      if (!done) afterLink();
    });
    upstream.on('end', () => {
      // A FIN follows the bytes before it, the link's delay included.
      const afterLink = (): void => {
        if (pending.down > 0) setTimeout(afterLink, 1);
        else if (!done) client.end();
      };
      if (!done) void trickle.then(afterLink);
    });
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', () => {
      clients.delete(client);
      all.delete(client);
      if (!done) upstream.destroy();
    });
    upstream.on('close', () => all.delete(upstream));
    for (const socket of pair) socket.once('close', () => client.destroyed && upstream.destroyed && pairs.delete(pair));
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
    partition: (on: boolean) => {
      (proxy as { partitioned: boolean }).partitioned = on;
      for (const [client, upstream] of pairs) {
        if (on) {
          client.pause();
          upstream.pause();
        } else {
          if (!proxy.paused) client.resume();
          upstream.resume();
        }
      }
    },
    shutDown: () =>
      new Promise<void>((resolve) => {
        // Not its callback, which waits for every connection to end: the port refuses from here.
        server.close();
        for (const s of all) s.end();
        setImmediate(resolve);
      }),
    restart: () => new Promise<void>((resolve) => server.listen(listening, '127.0.0.1', resolve)),
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of all) s.destroy();
        if (server.listening) server.close(() => resolve());
        else resolve();
      }),
  });
}
