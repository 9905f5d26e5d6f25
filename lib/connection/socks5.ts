/**
 * The SOCKS5 exchange on a socket connected to a proxy: the greeting, the authentication (none, or the
 * username/password of RFC 1929), then CONNECT to the server (RFC 1928), after which the socket carries the
 * connection to the server.
 *
 * Source: SOCKS5 support spec, "Connection Establishment"; RFC 1928 (SOCKS Protocol Version 5); RFC 1929
 * (Username/Password Authentication for SOCKS V5). Written here rather than taken from the `socks` library (2.8.11),
 * which kept every connection it carried reachable for its own time limit after the connection closed (11 KiB per TLS
 * connection, for connectTimeoutMS + 1 s as it was called here: its timer is never cleared), sent a host name that is not ASCII with its length in
 * characters rather than bytes (so the proxy read another host and port), took a reply of an unknown address type as
 * success, and kept the proxy password on every error it raised.
 */
import { isIP, type Socket } from 'node:net';
import { domainToASCII } from 'node:url';
import type { ProxySettings } from './proxy';

const VERSION = 0x05;
const NO_AUTHENTICATION = 0x00;
const USERNAME_PASSWORD = 0x02;
const NO_ACCEPTABLE_METHOD = 0xff;
const CONNECT = 0x01;
const IPV4 = 0x01;
const DOMAIN_NAME = 0x03;
const IPV6 = 0x04;

/** RFC 1928, "Replies": what each reply code means. */
const REPLIES = [
  'succeeded',
  'general SOCKS server failure',
  'connection not allowed by ruleset',
  'network unreachable',
  'host unreachable',
  'connection refused',
  'TTL expired',
  'command not supported',
  'address type not supported',
];

/**
 * Runs the SOCKS5 exchange on `socket`, connected to the proxy: the greeting (offering "no authentication", and
 * username/password when the settings have them), the authentication, then CONNECT to `host`:`port`. `host` is sent
 * as an IPv4 or IPv6 address when it is one, else as a domain name, in its ASCII (IDNA) form: it is never resolved
 * here. Resolves once the proxy reports the connection made: the socket then carries it, and its next bytes are the
 * server's. Rejects with an Error whose message says what failed (the proxy refused the methods offered, the user name
 * and password, or the connection, with its reply; spoke something other than SOCKS5; sent bytes after its reply,
 * before the server could have sent any; or closed the connection), and that holds nothing else (never the password).
 * Sets no timer: the caller's deadline bounds the exchange, and destroying the socket ends it.
 *
 * Source: SOCKS5 support spec, "Connection Establishment" (steps 1 to 3: both methods offered when credentials are
 * given, "no authentication" alone otherwise; the destination's host name passed as is); RFC 1928; RFC 1929.
 */
export function socks5Connect(socket: Socket, proxy: ProxySettings, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = connectRequest(host, port);
    if (request instanceof Error) return reject(request);
    const methods = proxy.username === undefined ? [NO_AUTHENTICATION] : [NO_AUTHENTICATION, USERNAME_PASSWORD];
    let step: 'method' | 'authentication' | 'reply' = 'method';
    let received: Buffer = Buffer.alloc(0);

    const finish = (error: Error | undefined): void => {
      socket.off('data', onData);
      socket.off('close', onClose);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onClose = (): void => finish(new Error(`the proxy closed the connection during the SOCKS5 exchange (awaiting its ${STEP_NAMES[step]})`));
    const onData = (chunk: Buffer): void => {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
      // Each step's reply is whole before it is read; what follows it is the next step's, or (after the last) an error.
      for (;;) {
        const needed = replyLength(step, received);
        if (needed instanceof Error) return finish(needed);
        if (needed === undefined || received.length < needed) return;
        const reply = received.subarray(0, needed);
        received = received.subarray(needed);
        const next = advance(reply);
        if (next instanceof Error) return finish(next);
        if (next === 'done') {
          if (received.length > 0) {
            const bytes = received.length === 1 ? '1 byte' : `${received.length} bytes`;
            return finish(new Error(`the proxy sent ${bytes} after its CONNECT reply, before the server could have sent any`));
          }
          return finish(undefined);
        }
      }
    };
    /** Reads one whole reply of the current step and sends what comes next: the step reached, or an error. */
    const advance = (reply: Buffer): 'continue' | 'done' | Error => {
      if (step === 'method') {
        if (reply[0] !== VERSION) return notSocks5(reply[0]);
        const method = reply[1];
        if (method === NO_ACCEPTABLE_METHOD) {
          return new Error(`the proxy accepts none of the authentication methods offered (${methods.map((m) => METHOD_NAMES[m]).join(', ')})`);
        }
        if (!methods.includes(method)) return new Error(`the proxy chose authentication method 0x${hex(method)}, which was not offered`);
        if (method === USERNAME_PASSWORD) {
          step = 'authentication';
          socket.write(credentialsRequest(proxy.username as string, proxy.password as string));
          return 'continue';
        }
        step = 'reply';
        socket.write(request);
        return 'continue';
      }
      if (step === 'authentication') {
        // RFC 1929: status 0 is success; any other value, a failure (the connection is then closed).
        if (reply[1] !== 0x00) return new Error(`the proxy refused the user name and password (RFC 1929 status 0x${hex(reply[1])})`);
        step = 'reply';
        socket.write(request);
        return 'continue';
      }
      if (reply[1] !== 0x00) {
        const meaning = REPLIES[reply[1]] ?? 'unassigned';
        return new Error(`the proxy could not connect to the server: ${meaning} (SOCKS5 reply 0x${hex(reply[1])})`);
      }
      return 'done';
    };

    socket.on('data', onData);
    socket.once('close', onClose);
    socket.write(Buffer.from([VERSION, methods.length, ...methods]));
  });
}

const STEP_NAMES = { method: 'choice of authentication method', authentication: 'authentication reply', reply: 'CONNECT reply' } as const;
const METHOD_NAMES: Record<number, string> = { [NO_AUTHENTICATION]: 'no authentication', [USERNAME_PASSWORD]: 'username/password' };

/**
 * How many bytes the whole reply of `step` takes, from what has been received of it: undefined while that cannot be
 * told yet, or an Error for a reply that is not SOCKS5.
 */
function replyLength(step: 'method' | 'authentication' | 'reply', received: Buffer): number | Error | undefined {
  if (step !== 'reply') return 2;
  if (received.length >= 1 && received[0] !== VERSION) return notSocks5(received[0]);
  // A refusal is read as soon as its code is: the address that follows means nothing then.
  if (received.length >= 2 && received[1] !== 0x00) return 2;
  // The address type is the fourth byte; a domain name's length, the fifth.
  if (received.length < 4) return undefined;
  switch (received[3]) {
    case IPV4:
      return 4 + 4 + 2;
    case IPV6:
      return 4 + 16 + 2;
    case DOMAIN_NAME:
      return received.length < 5 ? undefined : 4 + 1 + received[4] + 2;
    default:
      return new Error(`the proxy's CONNECT reply has an unknown address type (0x${hex(received[3])})`);
  }
}

function notSocks5(version: number): Error {
  return new Error(`the proxy does not speak SOCKS5 (its reply starts with 0x${hex(version)}, not 0x05)`);
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}

/** RFC 1929's request: version 1, then the user name and the password, each after its length in bytes. */
function credentialsRequest(username: string, password: string): Buffer {
  const user = Buffer.from(username, 'utf8');
  const pass = Buffer.from(password, 'utf8');
  return Buffer.concat([Buffer.from([0x01, user.length]), user, Buffer.from([pass.length]), pass]);
}

/**
 * Why `host` cannot be sent to a SOCKS5 proxy as a CONNECT destination, or undefined when it can: an IPv4 or IPv6
 * address always can; a domain name needs an ASCII (IDNA) form (`a b.example` has none) of at most 255 bytes.
 *
 * Source: RFC 1928, "Requests" (DST.ADDR: a fully-qualified domain name after one octet of length).
 */
export function socks5HostProblem(host: string): string | undefined {
  return isIP(host) !== 0 ? undefined : nameProblem(domainToASCII(host));
}

/** Why a domain name's ASCII (IDNA) form, `''` when it has none, cannot be a CONNECT destination; undefined if it can. */
function nameProblem(ascii: string): string | undefined {
  if (ascii === '') return 'it is not a valid domain name (it has no ASCII form)';
  return ascii.length > 255 ? `its ASCII form is ${ascii.length} bytes, more than the 255 a SOCKS5 request holds` : undefined;
}

/**
 * The CONNECT request for `host`:`port`: an IPv4 or IPv6 address as one, anything else as a domain name in its ASCII
 * (IDNA) form, its length in bytes; an Error for a name {@link socks5HostProblem} refuses.
 */
function connectRequest(host: string, port: number): Buffer | Error {
  let address: Buffer;
  const family = isIP(host);
  if (family === 4) address = Buffer.from([IPV4, ...host.split('.').map(Number)]);
  else if (family === 6) address = Buffer.concat([Buffer.from([IPV6]), ipv6Bytes(host)]);
  else {
    const ascii = domainToASCII(host);
    const problem = nameProblem(ascii);
    if (problem !== undefined) return new Error(`the server's host name cannot be sent to a SOCKS5 proxy: ${problem}`);
    address = Buffer.concat([Buffer.from([DOMAIN_NAME, ascii.length]), Buffer.from(ascii, 'ascii')]);
  }
  return Buffer.concat([Buffer.from([VERSION, CONNECT, 0x00]), address, Buffer.from([port >> 8, port & 0xff])]);
}

/**
 * The 16 bytes of an IPv6 address (`isIP(text) === 6`: `::` and a trailing dotted IPv4 part allowed). A zone
 * (`%eth0`) names an interface of this host, which means nothing to the proxy: it is left out.
 */
function ipv6Bytes(text: string): Buffer {
  let groups = text.replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(groups);
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    groups = `${groups.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = groups.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const words = tail === undefined ? left : [...left, ...new Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bytes = Buffer.alloc(16);
  words.forEach((word, i) => bytes.writeUInt16BE(parseInt(word, 16), i * 2));
  return bytes;
}
