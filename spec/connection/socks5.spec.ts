/**
 * The SOCKS5 exchange byte by byte, on a scripted socket: what is sent for each kind of destination and for the
 * credentials, and that a proxy's replies give the same outcome however they are split into chunks.
 */
import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import fc from 'fast-check';
import { socks5Connect } from '../../lib/connection/socks5';
import type { ProxySettings } from '../../lib/connection/proxy';
import { fuzzParameters } from '../support/fuzz';

/** A reply after which the proxy closes the connection. */
interface Closing {
  readonly closing: Buffer;
}

/**
 * A socket to a scripted proxy: each write is recorded, and answered (on a later turn, as I/O is) with the next of
 * `replies`, sent in chunks of the sizes `split` gives for it; `null` as a reply closes the socket, and a
 * {@link Closing} one closes it after its bytes.
 */
class ScriptedSocket extends EventEmitter {
  readonly written: Buffer[] = [];
  private next = 0;

  constructor(
    private readonly replies: readonly (Buffer | Closing | null)[],
    private readonly split: (reply: Buffer, index: number) => number[] = (reply) => [reply.length],
  ) {
    super();
  }

  write(data: Buffer): boolean {
    this.written.push(Buffer.from(data));
    const index = this.next++;
    const scripted = this.replies[index];
    if (scripted === undefined) return true;
    const reply = scripted === null ? Buffer.alloc(0) : Buffer.isBuffer(scripted) ? scripted : scripted.closing;
    let offset = 0;
    for (const size of this.split(reply, index)) {
      const chunk = reply.subarray(offset, offset + size);
      offset += size;
      if (chunk.length > 0) setImmediate(() => this.emit('data', chunk));
    }
    if (scripted === null || !Buffer.isBuffer(scripted)) setImmediate(() => this.emit('close', false));
    return true;
  }
}

const noAuth: ProxySettings = { host: 'proxy.example', port: 1080, username: undefined, password: undefined };
const withAuth: ProxySettings = { host: 'proxy.example', port: 1080, username: 'üser', password: 'pässword' };
const hex = (text: string): Buffer => Buffer.from(text.replace(/ /g, ''), 'hex');
/** The proxy's successful CONNECT reply, bound to 0.0.0.0:0. */
const GRANTED = hex('05 00 00 01 00000000 0000');

/** Runs the exchange to `host`:`port` against `socket`; resolves to 'connected' or the error's message. */
async function outcome(socket: ScriptedSocket, proxy: ProxySettings, host = 'db.example', port = 27017): Promise<string> {
  return socks5Connect(socket as unknown as Socket, proxy, host, port).then(
    () => 'connected',
    (error: Error) => error.message,
  );
}

describe('socks5Connect (RFC 1928, RFC 1929)', function () {
  it('offers "no authentication" alone without credentials, and sends CONNECT with a domain name, its length in bytes, and the port', async function () {
    const socket = new ScriptedSocket([hex('0500'), GRANTED]);
    expect(await outcome(socket, noAuth, 'db.example', 27017)).to.equal('connected');
    const name = Buffer.from('db.example').toString('hex');
    expect(socket.written.map((b) => b.toString('hex'))).to.deep.equal(['050100', `050100030a${name}6989`]);
  });

  it('sends each kind of destination as RFC 1928 lays it out', async function () {
    const cases: [string, number, string][] = [
      ['127.0.0.1', 1, '01 7f000001 0001'],
      ['10.1.2.3', 65535, '01 0a010203 ffff'],
      ['::1', 256, '04 00000000000000000000000000000001 0100'],
      ['2001:db8::7:0:1', 27017, '04 20010db8000000000000000700000001 6989'],
      ['2001:DB8:0:0:0:0:0:1', 27017, '04 20010db8000000000000000000000001 6989'],
      ['::ffff:192.0.2.1', 27017, '04 00000000000000000000ffffc0000201 6989'],
      ['::', 27017, '04 00000000000000000000000000000000 6989'],
      ['fe80::1%eth0', 27017, '04 fe800000000000000000000000000001 6989'],
      ['::ffff:192.0.2.1%eth0', 27017, '04 00000000000000000000ffffc0000201 6989'],
      ['::ffff:192.168.100.200', 27017, '04 00000000000000000000ffffc0a864c8 6989'],
      [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}`, 27017, `03 ff ${Buffer.from(`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}`).toString('hex')} 6989`],
      ['bücher.example', 27017, `03 15 ${Buffer.from('xn--bcher-kva.example').toString('hex')} 6989`],
      ['DB.Example', 27017, `03 0a ${Buffer.from('db.example').toString('hex')} 6989`],
    ];
    for (const [host, port, address] of cases) {
      const socket = new ScriptedSocket([hex('0500'), GRANTED]);
      expect(await outcome(socket, noAuth, host, port), host).to.equal('connected');
      expect(socket.written[1].toString('hex'), host).to.equal(hex(`050100 ${address}`).toString('hex'));
    }
  });

  it('offers both methods with credentials, and sends them in UTF-8 after their lengths in bytes (RFC 1929)', async function () {
    const socket = new ScriptedSocket([hex('0502'), hex('0100'), GRANTED]);
    expect(await outcome(socket, withAuth)).to.equal('connected');
    const user = Buffer.from('üser');
    const pass = Buffer.from('pässword');
    expect(socket.written[0].toString('hex')).to.equal('05020002');
    expect(socket.written[1].toString('hex')).to.equal(Buffer.concat([hex('01'), Buffer.from([user.length]), user, Buffer.from([pass.length]), pass]).toString('hex'));
    expect(user.length).to.equal(5);
  });

  it('refuses a host name with no ASCII form, or one longer than 255 bytes in it, sending nothing', async function () {
    for (const [host, why] of [['a b.example', /not a valid domain name \(it has no ASCII form\)$/], [`${'a'.repeat(250)}.example`, /its ASCII form is 258 bytes, more than the 255 a SOCKS5 request holds$/]] as const) {
      const socket = new ScriptedSocket([]);
      expect(await outcome(socket, noAuth, host)).to.match(why);
      expect(socket.written).to.deep.equal([]);
    }
  });

  it('names each refusal of the CONNECT by its RFC 1928 meaning, and each way the proxy can refuse the methods offered', async function () {
    const meanings = ['general SOCKS server failure', 'connection not allowed by ruleset', 'network unreachable', 'host unreachable', 'connection refused', 'TTL expired', 'command not supported', 'address type not supported', 'unassigned'];
    for (const [i, meaning] of meanings.entries()) {
      const code = i + 1;
      const reply = Buffer.from([0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
      expect(await outcome(new ScriptedSocket([hex('0500'), reply]), noAuth)).to.equal(`the proxy could not connect to the server: ${meaning} (SOCKS5 reply 0x0${code})`);
    }
    expect(await outcome(new ScriptedSocket([hex('05ff')]), withAuth)).to.equal('the proxy accepts none of the authentication methods offered (no authentication, username/password)');
    expect(await outcome(new ScriptedSocket([hex('0500'), Buffer.concat([GRANTED, hex('ff')])]), noAuth)).to.equal('the proxy sent 1 byte after its CONNECT reply, before the server could have sent any');
  });

  it('fails at the first byte of a CONNECT reply that is not SOCKS5, without waiting for more', async function () {
    const settled = outcome(new ScriptedSocket([hex('0500'), hex('04')]), noAuth);
    // Waiting for more, it would never settle (no more bytes come): 2 s leaves a loaded machine's pauses room.
    const waited = new Promise((r) => setTimeout(() => r('still waiting'), 2000).unref());
    expect(await Promise.race([settled, waited])).to.equal('the proxy does not speak SOCKS5 (its reply starts with 0x04, not 0x05)');
  });

  it('removes its listeners once settled, either way', async function () {
    for (const replies of [[hex('0500'), GRANTED], [hex('05ff')], [hex('0500'), null]]) {
      const socket = new ScriptedSocket(replies);
      await outcome(socket, noAuth);
      expect([socket.listenerCount('data'), socket.listenerCount('close')]).to.deep.equal([0, 0]);
    }
  });

  it('gives the same outcome however the replies are split into chunks', async function () {
    /** Proxies, right and wrong: the replies each gives, and the proxy settings offered. */
    const scripts: [ProxySettings, (Buffer | Closing | null)[]][] = [
      [noAuth, [hex('0500'), GRANTED]],
      [withAuth, [hex('0502'), hex('0100'), GRANTED]],
      [withAuth, [hex('0500'), GRANTED]],
      [withAuth, [hex('0502'), hex('0101')]],
      [noAuth, [hex('05ff')]],
      [noAuth, [hex('0502')]],
      [noAuth, [hex('4854')]],
      [noAuth, [hex('0500'), hex('0505 0001 00000000 0000')]],
      [noAuth, [hex('0500'), hex('0505')]],
      [noAuth, [hex('0500'), hex('0500 0003 03 616263 0050')]],
      [noAuth, [hex('0500'), hex('0500 0004 00000000000000000000000000000001 0050')]],
      [noAuth, [hex('0500'), hex('0500 0007 00000000 0000')]],
      [noAuth, [hex('0500'), Buffer.concat([GRANTED, hex('deadbeef')])]],
      [noAuth, [hex('0500'), { closing: GRANTED.subarray(0, 6) }]],
      [noAuth, [hex('0500'), null]],
    ];
    const whole = await Promise.all(scripts.map(([proxy, replies]) => outcome(new ScriptedSocket(replies), proxy)));
    expect(whole).to.deep.equal([
      'connected',
      'connected',
      'connected',
      'the proxy refused the user name and password (RFC 1929 status 0x01)',
      'the proxy accepts none of the authentication methods offered (no authentication)',
      'the proxy chose authentication method 0x02, which was not offered',
      'the proxy does not speak SOCKS5 (its reply starts with 0x48, not 0x05)',
      'the proxy could not connect to the server: connection refused (SOCKS5 reply 0x05)',
      'the proxy could not connect to the server: connection refused (SOCKS5 reply 0x05)',
      'connected',
      'connected',
      "the proxy's CONNECT reply has an unknown address type (0x07)",
      'the proxy sent 4 bytes after its CONNECT reply, before the server could have sent any',
      'the proxy closed the connection during the SOCKS5 exchange (awaiting its CONNECT reply)',
      'the proxy closed the connection during the SOCKS5 exchange (awaiting its CONNECT reply)',
    ]);
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: scripts.length - 1 }), fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 30, maxLength: 30 }), async (i, sizes) => {
        const [proxy, replies] = scripts[i];
        let next = 0;
        const split = (reply: Buffer): number[] => {
          const chunks: number[] = [];
          for (let left = reply.length; left > 0; ) {
            const size = Math.min(left, sizes[next++ % sizes.length]);
            chunks.push(size);
            left -= size;
          }
          return chunks;
        };
        const inChunks = await outcome(new ScriptedSocket(replies, split), proxy);
        // Bytes after the CONNECT reply that arrive in a later chunk cannot be told from the server's: the exchange is
        // then done, and the connection's own checks refuse them (a reply nobody asked for, or no TLS record).
        if (replies[1] !== undefined && Buffer.isBuffer(replies[1]) && replies[1].length > GRANTED.length) {
          expect(inChunks).to.match(/^(connected|the proxy sent [1-4] bytes? after its CONNECT reply, before the server could have sent any)$/);
        }
        else expect(inChunks).to.equal(whole[i]);
      }),
      fuzzParameters(300),
    );
  });
});
