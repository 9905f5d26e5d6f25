/**
 * A SOCKS5 proxy for tests (RFC 1928, CONNECT only; "no authentication" or username/password, RFC 1929): a TCP server
 * on 127.0.0.1 that negotiates with each client, connects to the destination it names (or wherever `map` sends it)
 * and then forwards the bytes both ways. It records what every client asked for, so a test can check what the
 * driver sent (the methods offered, the username, the destination as written), and it can be broken on demand (see
 * {@link Socks5ProxyOptions.behaviour}): silent, answering with bytes that are not SOCKS5, closing, trickling its
 * replies, sending bytes after its reply, or stalling before the CONNECT reply.
 *
 * Source: extension (the proxy a driver's `proxyHost`/`proxyPort` options point at; RFC 1928 and RFC 1929).
 */
import * as net from 'node:net';

/** Options of {@link startSocks5Proxy}. */
export interface Socks5ProxyOptions {
  /**
   * Credentials the proxy requires (RFC 1929). Undefined: it accepts only "no authentication" (0x00). When set it
   * selects username/password (0x02) if offered, else replies 0xFF (no acceptable method) and closes.
   */
  auth?: { username: string; password: string };
  /**
   * Where a CONNECT to host:port is forwarded. Default: host:port itself (a domain name is resolved by the proxy with
   * net.connect). Returning undefined refuses it with reply 0x04 (host unreachable).
   */
  map?: (host: string, port: number) => { host: string; port: number } | undefined;
  /** Reply code for every CONNECT (default 0x00 succeeded); non-zero refuses it with that code and closes. */
  replyCode?: number;
  /**
   * A broken proxy: 'silent' accepts TCP and never answers (it still reads and records the greeting);
   * 'garbage' answers the greeting with 2 bytes that are not SOCKS5 ("HT") then keeps the socket open;
   * 'close-after-greeting' reads the greeting then closes (FIN); 'trickle' writes every reply byte in its own write,
   * 5 ms apart (the forwarded bytes go through unchanged, after the CONNECT reply); 'extra-bytes' appends 4 bytes
   * (0xde 0xad 0xbe 0xef) right after the successful CONNECT reply, in the same write; 'stall-after-auth' answers
   * the greeting and the authentication, then never answers the CONNECT (it still records its destination).
   * Default undefined: a correct proxy. Whatever the behaviour, the proxy closes its side once the client has ended
   * its own before the exchange finished.
   */
  behaviour?: 'silent' | 'garbage' | 'close-after-greeting' | 'trickle' | 'extra-bytes' | 'stall-after-auth';
}

/** What one client asked for, filled in as its exchange goes. */
export interface Socks5Request {
  /** The methods the client offered in its greeting, in order. */
  readonly methods: readonly number[];
  /** The username it sent (RFC 1929), if it authenticated; never the password. */
  readonly username: string | undefined;
  /** Whether the credentials matched `auth` (undefined when no authentication took place). */
  readonly authenticated: boolean | undefined;
  /** ATYP of the CONNECT: 1 IPv4, 3 domain name, 4 IPv6 (0 until the CONNECT arrives). */
  readonly addressType: number;
  /** The destination as sent: the domain name, or the IP address as text (IPv6 in its compressed form, no brackets). */
  readonly host: string;
  /** The destination port as sent (0 until the CONNECT arrives). */
  readonly port: number;
}

/** A running SOCKS5 proxy. */
export interface Socks5Proxy {
  /** The address it listens on. */
  readonly host: '127.0.0.1';
  /** The TCP port it listens on. */
  readonly port: number;
  /**
   * Every greeting received (one entry per client connection that sent a full greeting), then filled in as the
   * exchange goes; entries for connections that did not reach CONNECT have addressType 0, host '' and port 0.
   */
  readonly requests: readonly Socks5Request[];
  /** Client connections accepted so far. */
  accepted(): number;
  /** Client sockets currently open (neither closed nor ended by the client). */
  openSockets(): number;
  /** Destroys every socket (both sides) and stops listening. */
  close(): Promise<void>;
}

/** RFC 1928 reply codes used here. */
const REPLY = { succeeded: 0x00, hostUnreachable: 0x04, connectionRefused: 0x05, commandNotSupported: 0x07, addressTypeNotSupported: 0x08 };

/** The bytes the 'extra-bytes' proxy sends right after its CONNECT reply. */
const EXTRA_BYTES = Buffer.of(0xde, 0xad, 0xbe, 0xef);

/** How long the 'trickle' proxy waits before each byte of a reply. */
const TRICKLE_MS = 5;

/** Whether `socket` can still be written to: neither destroyed nor ended by this side. */
function writable(socket: net.Socket): boolean {
  return !socket.destroyed && !socket.writableEnded;
}

/** A CONNECT reply with `code`; the bound address is 0.0.0.0:0 (IPv4). */
function connectReply(code: number): Buffer {
  return Buffer.of(0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0);
}

/** The 16 bytes of an IPv6 address as text, compressed (RFC 5952: the longest run of two or more zero groups is `::`). */
function ipv6Text(bytes: Buffer): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i));
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number): string => groups.slice(from, to).map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLength, 8)}`;
}

/** Starts a SOCKS5 proxy on 127.0.0.1 (a free port). Resolves once it listens. */
export async function startSocks5Proxy(options: Socks5ProxyOptions = {}): Promise<Socks5Proxy> {
  const requests: Array<{ -readonly [K in keyof Socks5Request]: Socks5Request[K] }> = [];
  const clients = new Set<net.Socket>();
  const all = new Set<net.Socket>();
  let accepted = 0;
  let closing = false;
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    accepted++;
    // Small writes go out at once (no Nagle): a trickled reply arrives byte by byte, and forwarding adds no delay.
    client.setNoDelay(true);
    clients.add(client);
    all.add(client);
    const behaviour = options.behaviour;
    /**
     * `greeting`, `auth`, `request`: waiting for that message. `connecting`: the CONNECT was received, the reply is
     * not written yet. `piping`: forwarding both ways. `mute`: reads and ignores everything (silent, garbage, stalled,
     * or closing after a reply).
     */
    let stage: 'greeting' | 'auth' | 'request' | 'connecting' | 'piping' | 'mute' = 'greeting';
    let buffer: Buffer = Buffer.alloc(0);
    let clientEnded = false;
    let upstream: net.Socket | undefined;
    let entry: (typeof requests)[number] | undefined;
    let trickle: Promise<void> = Promise.resolve();

    /** Writes a reply (byte by byte for 'trickle'), then calls `then` once it is all handed to the socket. */
    const send = (bytes: Buffer, then?: () => void): void => {
      if (behaviour !== 'trickle') {
        if (writable(client)) client.write(bytes);
        then?.();
        return;
      }
      for (const byte of bytes) {
        trickle = trickle
          .then(() => new Promise<void>((resolve) => setTimeout(resolve, TRICKLE_MS)))
          .then(() => {
            if (!closing && writable(client)) client.write(Buffer.of(byte));
          });
      }
      if (then !== undefined) void trickle.then(() => (closing ? undefined : then()));
    };
    /** Ends the client's side (FIN) after the replies written so far, and drops the upstream connection. */
    const finish = (): void => {
      stage = 'mute';
      upstream?.destroy();
      if (writable(client)) client.end();
    };
    /** Writes a reply, then closes. */
    const refuse = (bytes: Buffer): void => {
      stage = 'mute';
      send(bytes, finish);
    };
    /** Closes at once on a malformed message. */
    const malformed = (): void => {
      stage = 'mute';
      upstream?.destroy();
      client.destroy();
    };

    /**
     * Whether the message waiting starts with `version`: false while no byte is in, and (closing the connection) for
     * a message of another version.
     */
    const startsWith = (version: number): boolean => {
      if (buffer.length < 1) return false;
      if (buffer[0] === version) return true;
      malformed();
      return false;
    };

    const onGreeting = (): boolean => {
      if (!startsWith(0x05)) return false;
      if (buffer.length < 2 || buffer.length < 2 + buffer[1]) return false;
      const methods = [...buffer.subarray(2, 2 + buffer[1])];
      buffer = buffer.subarray(2 + buffer[1]);
      entry = { methods, username: undefined, authenticated: undefined, addressType: 0, host: '', port: 0 };
      requests.push(entry);
      if (behaviour === 'silent') {
        stage = 'mute';
        return false;
      }
      if (behaviour === 'garbage') {
        stage = 'mute';
        client.write(Buffer.from('HT', 'latin1'));
        return false;
      }
      if (behaviour === 'close-after-greeting') {
        finish();
        return false;
      }
      const wanted = options.auth === undefined ? 0x00 : 0x02;
      if (!methods.includes(wanted)) {
        refuse(Buffer.of(0x05, 0xff));
        return false;
      }
      send(Buffer.of(0x05, wanted));
      stage = wanted === 0x02 ? 'auth' : 'request';
      return true;
    };

    const onAuth = (): boolean => {
      if (!startsWith(0x01)) return false;
      if (buffer.length < 2) return false;
      const userLength = buffer[1];
      if (buffer.length < 3 + userLength) return false;
      const passwordLength = buffer[2 + userLength];
      const end = 3 + userLength + passwordLength;
      if (buffer.length < end) return false;
      const username = buffer.subarray(2, 2 + userLength).toString('utf8');
      const password = buffer.subarray(3 + userLength, end).toString('utf8');
      buffer = buffer.subarray(end);
      const ok = username === options.auth!.username && password === options.auth!.password;
      entry!.username = username;
      entry!.authenticated = ok;
      if (!ok) {
        refuse(Buffer.of(0x01, 0x01));
        return false;
      }
      send(Buffer.of(0x01, 0x00));
      stage = 'request';
      return true;
    };

    const onRequest = (): boolean => {
      if (!startsWith(0x05)) return false;
      if (buffer.length < 5) return false;
      const command = buffer[1];
      const addressType = buffer[3];
      let addressLength: number;
      if (addressType === 0x01) addressLength = 4;
      else if (addressType === 0x04) addressLength = 16;
      else if (addressType === 0x03) addressLength = 1 + buffer[4];
      else {
        refuse(connectReply(REPLY.addressTypeNotSupported));
        return false;
      }
      const end = 4 + addressLength + 2;
      if (buffer.length < end) return false;
      if (buffer[2] !== 0x00) {
        malformed();
        return false;
      }
      const address = buffer.subarray(4, 4 + addressLength);
      const host =
        addressType === 0x01
          ? [...address].join('.')
          : addressType === 0x04
            ? ipv6Text(address)
            : address.subarray(1).toString('utf8');
      const port = buffer.readUInt16BE(4 + addressLength);
      // Bytes after the request (the client's first bytes for the destination) stay in `buffer`, to be forwarded.
      buffer = buffer.subarray(end);
      entry!.addressType = addressType;
      entry!.host = host;
      entry!.port = port;
      if (behaviour === 'stall-after-auth') {
        stage = 'mute';
        return false;
      }
      if (command !== 0x01) {
        refuse(connectReply(REPLY.commandNotSupported));
        return false;
      }
      const code = options.replyCode ?? REPLY.succeeded;
      if (code !== REPLY.succeeded) {
        refuse(connectReply(code));
        return false;
      }
      const target = options.map === undefined ? { host, port } : options.map(host, port);
      if (target === undefined) {
        refuse(connectReply(REPLY.hostUnreachable));
        return false;
      }
      stage = 'connecting';
      connect(target);
      return false;
    };

    const connect = (target: { host: string; port: number }): void => {
      const socket = net.connect({ host: target.host, port: target.port, noDelay: true });
      let connected = false;
      upstream = socket;
      all.add(socket);
      socket.on('close', (hadError) => {
        all.delete(socket);
        if (stage === 'piping') {
          if (hadError) client.destroy();
          else if (writable(client)) client.end();
        }
      });
      socket.on('error', (error: NodeJS.ErrnoException) => {
        if (stage === 'connecting' && !connected) {
          refuse(connectReply(error.code === 'ECONNREFUSED' ? REPLY.connectionRefused : REPLY.hostUnreachable));
        }
      });
      socket.once('connect', () => {
        if (stage !== 'connecting') return;
        connected = true;
        const reply = connectReply(REPLY.succeeded);
        send(behaviour === 'extra-bytes' ? Buffer.concat([reply, EXTRA_BYTES]) : reply, () => {
          if (stage !== 'connecting') return;
          if (client.destroyed || socket.destroyed) {
            finish();
            return;
          }
          stage = 'piping';
          if (buffer.length > 0) socket.write(buffer);
          buffer = Buffer.alloc(0);
          if (clientEnded) socket.end();
          socket.on('data', (chunk: Buffer) => {
            if (writable(client)) client.write(chunk);
          });
          socket.on('end', () => {
            if (writable(client)) client.end();
          });
        });
      });
    };

    client.on('data', (chunk: Buffer) => {
      if (stage === 'piping') {
        if (upstream !== undefined && writable(upstream)) upstream.write(chunk);
        return;
      }
      if (stage === 'mute') return;
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      for (;;) {
        const more =
          stage === 'greeting' ? onGreeting() : stage === 'auth' ? onAuth() : stage === 'request' ? onRequest() : false;
        if (!more) break;
      }
    });
    client.on('end', () => {
      clientEnded = true;
      clients.delete(client);
      if (stage === 'piping') {
        if (upstream !== undefined && writable(upstream)) upstream.end();
      } else if (stage !== 'connecting') {
        // A client gone before the exchange finished: nothing more to answer, once the replies under way are written.
        void trickle.then(finish);
      }
    });
    client.on('error', () => undefined);
    client.on('close', () => {
      clients.delete(client);
      all.delete(client);
      upstream?.destroy();
    });
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    host: '127.0.0.1',
    port,
    requests,
    accepted: () => accepted,
    openSockets: () => clients.size,
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        for (const socket of all) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
