/**
 * A host name that resolves to several addresses (IPv6 and IPv4, several A records), as production names do: Node
 * tries them in turn (`autoSelectFamily`, RFC 8305 "Happy Eyeballs"), abandoning each attempt but the last after
 * `autoSelectFamilyAttemptTimeout` ms (250 by default). The addresses are loopback ones: 127.0.0.1 serves, 127.0.0.3
 * refuses, and 127.0.0.2 is made slow (its connect completes, to the server, only after a delay) by intercepting the
 * TCP handle's connect.
 */
import { expect } from 'chai';
import * as net from 'node:net';
import { connect, ConnectionPool, InvalidOptionError, MongoNetworkError, MongoNetworkTimeoutError, type ConnectionPoolEvent } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { establishOne } from '../support/endpoint';
import { startSocks5Proxy } from '../support/socks5-proxy';

type Lookup = (...args: unknown[]) => void;

/**
 * Runs `fn` while the host name `several.test` resolves to `addresses`, in that order (those of the family asked, if
 * one is).
 */
async function withAddresses<T>(addresses: string[], fn: () => Promise<T>): Promise<T> {
  const dns = require('node:dns') as { lookup: Lookup };
  const lookup = dns.lookup;
  dns.lookup = (host: unknown, options: unknown, callback: unknown) => {
    if (host !== 'several.test') return lookup(host, options, callback);
    const asked = (options as { family?: unknown }).family;
    const all = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })).filter((a) => (asked !== 4 && asked !== 6) || a.family === asked);
    const cb = callback as (error: null, address: unknown, family?: number) => void;
    process.nextTick(() => ((options as { all?: boolean }).all === true ? cb(null, all) : cb(null, all[0].address, all[0].family)));
  };
  try {
    return await fn();
  } finally {
    dns.lookup = lookup;
  }
}

interface TcpHandle {
  connect(req: { oncomplete?: unknown }, address: string, port: number): number;
  connect6(req: { oncomplete?: unknown }, address: string, port: number): number;
}

/**
 * Runs `fn` while a TCP connect to `slow` completes only after `delayMS`, to 127.0.0.1 (the server) on the same port:
 * a reachable address over a link slower than Node's attempt timeout. An attempt Node abandoned meanwhile is not
 * completed.
 */
async function withSlowAddress<T>(slow: string, delayMS: number, fn: () => Promise<T>): Promise<T> {
  const { TCP } = (process as unknown as { binding(name: string): { TCP: { prototype: TcpHandle } } }).binding('tcp_wrap');
  const { connect, connect6 } = TCP.prototype;
  const timers: NodeJS.Timeout[] = [];
  const delayed = (real: TcpHandle['connect']): TcpHandle['connect'] =>
    function (this: TcpHandle, req, address, port) {
      if (address !== slow) return real.call(this, req, address, port);
      timers.push(
        setTimeout(() => {
          if (req.oncomplete !== undefined) connect.call(this, req, '127.0.0.1', port);
        }, delayMS),
      );
      return 0;
    };
  TCP.prototype.connect = delayed(connect);
  TCP.prototype.connect6 = delayed(connect6);
  try {
    return await fn();
  } finally {
    TCP.prototype.connect = connect;
    TCP.prototype.connect6 = connect6;
    for (const timer of timers) clearTimeout(timer);
  }
}

describe('a host name resolving to several addresses', function () {
  let server: EmbeddedServer;
  let port: number;
  before(async function () {
    server = await new EmbeddedServer().start();
    port = Number(server.address.split(':')[1]);
  });
  after(async function () {
    await server.stop();
  });

  describe('autoSelectFamily, autoSelectFamilyAttemptTimeout and family', function () {
    // The first address is reachable in 600 ms, the second refuses: Node's 250 ms attempt timeout abandons the one
    // that would have answered, and the establishment fails well within connectTimeoutMS.
    const slowThenRefused = ['127.0.0.2', '127.0.0.3'];

    it("with Node's defaults, an address slower than 250 ms is abandoned for the next (what the options are for)", async function () {
      const error = await withAddresses(slowThenRefused, () => withSlowAddress('127.0.0.2', 600, () => establishOne(`several.test:${port}`, {}).catch((e) => e)));
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error.message).to.equal(`connecting to several.test:${port} failed: connect ETIMEDOUT 127.0.0.2:${port}; connect ECONNREFUSED 127.0.0.3:${port}`);
    });

    it('autoSelectFamilyAttemptTimeout longer than the link: the slow address connects', async function () {
      const started = performance.now();
      const connection = await withAddresses(slowThenRefused, () =>
        withSlowAddress('127.0.0.2', 600, () => establishOne(`several.test:${port}`, { autoSelectFamilyAttemptTimeout: 2000 })),
      );
      try {
        expect(performance.now() - started).to.be.within(550, 2000);
        expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
      } finally {
        connection.destroy();
      }
    });

    it('autoSelectFamily false: only the first address is tried, with no attempt timeout', async function () {
      const connection = await withAddresses(slowThenRefused, () =>
        withSlowAddress('127.0.0.2', 600, () => establishOne(`several.test:${port}`, { autoSelectFamily: false })),
      );
      try {
        expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
      } finally {
        connection.destroy();
      }
      // And a first address that refuses is not followed by the next one.
      const error = await withAddresses(['127.0.0.3', '127.0.0.1'], () => establishOne(`several.test:${port}`, { autoSelectFamily: false }).catch((e) => e));
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error.message).to.equal(`connecting to several.test:${port} failed: connect ECONNREFUSED 127.0.0.3:${port}`);
    });

    it("reach a client's monitor and pool: a command over the slow address succeeds with autoSelectFamilyAttemptTimeout", async function () {
      const reply = await withAddresses(slowThenRefused, () =>
        withSlowAddress('127.0.0.2', 600, async () => {
          const client = connect(`mongodb://several.test:${port}/?directConnection=true&serverSelectionTimeoutMS=5000`, { autoSelectFamilyAttemptTimeout: 2000 });
          try {
            return await client.command('admin', { ping: 1 });
          } finally {
            await client.close();
          }
        }),
      );
      expect(reply).to.include({ ok: 1 });
    });

    it("apply to the SOCKS5 proxy's host name (proxyHost)", async function () {
      const proxy = await startSocks5Proxy();
      try {
        const through = { proxyHost: 'several.test', proxyPort: proxy.port };
        // The proxy's addresses: 127.0.0.2 slow, then 127.0.0.3 refusing; the proxy itself listens on 127.0.0.1.
        const [failed, connection] = await withAddresses(slowThenRefused, () =>
          withSlowAddress('127.0.0.2', 600, async () => [
            await establishOne(`127.0.0.1:${port}`, through).catch((e) => e),
            await establishOne(`127.0.0.1:${port}`, { ...through, autoSelectFamilyAttemptTimeout: 2000 }),
          ]),
        );
        expect(failed).to.be.instanceOf(MongoNetworkError);
        expect(failed.message).to.match(/connect ETIMEDOUT 127\.0\.0\.2:\d+; connect ECONNREFUSED 127\.0\.0\.3:\d+$/);
        try {
          expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
        } finally {
          connection.destroy();
        }
      } finally {
        await proxy.close();
      }
    });

    it('family 4 skips the IPv6 addresses: no 250 ms lost on a black-holed IPv6 path for each connection; family 6, the IPv4 ones', async function () {
      const blackHoledIpv6 = ['::1', '127.0.0.1'];
      const timed = (options: Record<string, unknown>): Promise<[number, unknown]> =>
        withAddresses(blackHoledIpv6, () =>
          withSlowAddress('::1', 60_000, async () => {
            const started = performance.now();
            const outcome = await establishOne(`several.test:${port}`, { connectTimeoutMS: 1000, ...options }).catch((e) => e);
            if (!(outcome instanceof Error)) outcome.destroy();
            return [performance.now() - started, outcome];
          }),
        );
      // A 2 s attempt timeout, so that what family 4 saves stands out of a loaded machine's pauses.
      const [byDefault] = await timed({ connectTimeoutMS: 5000, autoSelectFamilyAttemptTimeout: 2000 });
      expect(byDefault).to.be.at.least(1900);
      const [ipv4Only, connected] = await timed({ connectTimeoutMS: 5000, autoSelectFamilyAttemptTimeout: 2000, family: 4 });
      expect(connected).to.not.be.instanceOf(Error);
      expect(ipv4Only).to.be.below(1500);
      const [, ipv6Only] = await timed({ family: 6 });
      expect(ipv6Only).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(ipv6Only).to.have.property('message', `connecting to several.test:${port} timed out after 1000 ms (during connect)`);
    });

    it('refuses values of the wrong type or range with an InvalidOptionError naming the option', function () {
      const bad: [Record<string, unknown>, string, RegExp][] = [
        [{ autoSelectFamily: 'yes' }, 'autoSelectFamily', /^Invalid autoSelectFamily: "yes" \(autoSelectFamily must be true or false/],
        [{ autoSelectFamily: 1 }, 'autoSelectFamily', /^Invalid autoSelectFamily: 1 /],
        [{ autoSelectFamilyAttemptTimeout: 0 }, 'autoSelectFamilyAttemptTimeout', /^Invalid autoSelectFamilyAttemptTimeout: 0 \(autoSelectFamilyAttemptTimeout must be an integer number of ms from 1 to 2147483647/],
        [{ autoSelectFamilyAttemptTimeout: -1 }, 'autoSelectFamilyAttemptTimeout', /^Invalid autoSelectFamilyAttemptTimeout: -1 /],
        [{ autoSelectFamilyAttemptTimeout: 2.5 }, 'autoSelectFamilyAttemptTimeout', /^Invalid autoSelectFamilyAttemptTimeout: 2.5 /],
        [{ autoSelectFamilyAttemptTimeout: 2 ** 31 }, 'autoSelectFamilyAttemptTimeout', /^Invalid autoSelectFamilyAttemptTimeout: 2147483648 /],
        [{ autoSelectFamilyAttemptTimeout: '500' }, 'autoSelectFamilyAttemptTimeout', /^Invalid autoSelectFamilyAttemptTimeout: "500" /],
        [{ family: 5 }, 'family', /^Invalid family: 5 \(family must be 0 \(IPv4 and IPv6\), 4 \(IPv4 only\) or 6 \(IPv6 only\)\)$/],
        [{ family: '4' }, 'family', /^Invalid family: "4" /],
        [{ family: 'IPv4' }, 'family', /^Invalid family: "IPv4" /],
      ];
      for (const [options, option, message] of bad) {
        expect(() => establishOne(`several.test:${port}`, options as never), JSON.stringify(options))
          .to.throw(InvalidOptionError, message)
          .with.property('option', option);
      }
    });
  });

  describe('connectTimeoutMS elapsing while the addresses are tried', function () {
    it('names what each address met: the refused one, the one abandoned after the attempt timeout, the one still unanswered', async function () {
      // 127.0.0.2 and 127.0.0.4 do not answer within the test (black holes); 127.0.0.3 refuses.
      const error = await withAddresses(['127.0.0.3', '127.0.0.2', '127.0.0.4'], () =>
        withSlowAddress('127.0.0.2', 60_000, () =>
          withSlowAddress('127.0.0.4', 60_000, () => establishOne(`several.test:${port}`, { connectTimeoutMS: 600, autoSelectFamilyAttemptTimeout: 300 }).catch((e) => e)),
        ),
      );
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(error.message).to.equal(
        `connecting to several.test:${port} timed out after 600 ms (during connect; connect ECONNREFUSED 127.0.0.3:${port}; ` +
          `127.0.0.2:${port} did not answer within autoSelectFamilyAttemptTimeout (300 ms); 127.0.0.4:${port} had not answered)`,
      );
      expect([...error.errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
    });

    it('names both of two addresses: the refused one and the one still unanswered', async function () {
      const error = await withAddresses(['127.0.0.3', '127.0.0.2'], () =>
        withSlowAddress('127.0.0.2', 60_000, () => establishOne(`several.test:${port}`, { connectTimeoutMS: 300 }).catch((e) => e)),
      );
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(error.message).to.equal(
        `connecting to several.test:${port} timed out after 300 ms (during connect; connect ECONNREFUSED 127.0.0.3:${port}; 127.0.0.2:${port} had not answered)`,
      );
    });

    it('stops listening to the attempts once the socket connected: an established connection keeps no listener of them', async function () {
      const c = await withAddresses(['127.0.0.3', '127.0.0.1'], () => establishOne(`several.test:${port}`, {}));
      try {
        const socket = (c as unknown as { socket: net.Socket }).socket;
        expect(['connectionAttempt', 'connectionAttemptFailed', 'connectionAttemptTimeout'].map((name) => socket.listenerCount(name))).to.deep.equal([0, 0, 0]);
      } finally {
        c.destroy();
      }
    });

    it('says nothing more for one address, nor once the socket connected', async function () {
      const error = await withAddresses(['127.0.0.2'], () =>
        withSlowAddress('127.0.0.2', 60_000, () => establishOne(`several.test:${port}`, { connectTimeoutMS: 300 }).catch((e) => e)),
      );
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(error.message).to.equal(`connecting to several.test:${port} timed out after 300 ms (during connect)`);
      // Connected to 127.0.0.1 after 127.0.0.3 refused, then a TLS handshake that is never answered: the addresses
      // are no longer the question.
      const silent = net.createServer(() => undefined);
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const silentPort = (silent.address() as net.AddressInfo).port;
      try {
        const stalled = await withAddresses(['127.0.0.3', '127.0.0.1'], () =>
          establishOne(`several.test:${silentPort}`, { connectTimeoutMS: 300, tls: true }).catch((e) => e),
        );
        expect(stalled).to.be.instanceOf(MongoNetworkTimeoutError);
        expect(stalled.message).to.equal(`connecting to several.test:${silentPort} timed out after 300 ms (during connect)`);
      } finally {
        silent.close();
      }
    });
  });

  describe('addresses with no route to them', function () {
    /**
     * Runs `fn` while a TCP connect to each address of `codes` fails at once with that errno, as the kernel fails it.
     */
    async function withUnreachable<T>(codes: Record<string, 'ENETUNREACH' | 'EHOSTUNREACH'>, fn: () => Promise<T>): Promise<T> {
      const { TCP } = (process as unknown as { binding(name: string): { TCP: { prototype: TcpHandle } } }).binding('tcp_wrap');
      const { connect, connect6 } = TCP.prototype;
      const errno = (require('node:os') as typeof import('node:os')).constants.errno;
      const failing = (real: TcpHandle['connect']): TcpHandle['connect'] =>
        function (this: TcpHandle, req, address, port) {
          const code = codes[address];
          return code === undefined ? real.call(this, req, address, port) : -errno[code];
        };
      TCP.prototype.connect = failing(connect);
      TCP.prototype.connect6 = failing(connect6);
      try {
        return await fn();
      } finally {
        TCP.prototype.connect = connect;
        TCP.prototype.connect6 = connect6;
      }
    }

    it('every address unreachable (no route to its network or host: the server never reached) carries no backpressure label, and clears the pool', async function () {
      // A dual-stack name on a client with no IPv6 route, whose IPv4 path is gone too.
      const unreachable = { '::1': 'ENETUNREACH', '127.0.0.2': 'EHOSTUNREACH' } as const;
      const error = await withAddresses(['::1', '127.0.0.2'], () => withUnreachable(unreachable, () => establishOne(`several.test:${port}`, {}).catch((e) => e)));
      expect(error).to.be.instanceOf(MongoNetworkError);
      // Node adds the local address to a connect that fails at once (" - Local (…)").
      expect(error.message).to.match(new RegExp(`^connecting to several.test:${port} failed: connect ENETUNREACH ::1:${port}\\b.*; connect EHOSTUNREACH 127\\.0\\.0\\.2:${port}\\b`));
      expect([...error.errorLabels]).to.deep.equal([]);
      const events = await withAddresses(['::1', '127.0.0.2'], () =>
        withUnreachable(unreachable, async () => {
          const pool = new ConnectionPool({ address: `several.test:${port}` });
          const seen: ConnectionPoolEvent[] = [];
          pool.events$.subscribe((e) => seen.push(e));
          pool.ready();
          await pool.checkOut().then((c) => pool.checkIn(c), () => undefined);
          pool.close();
          return seen.map((e) => e.type);
        }),
      );
      expect(events).to.include.members(['ConnectionClosed', 'ConnectionCheckOutFailed', 'ConnectionPoolCleared']);
    });

    it('one address unreachable and another refused: labelled, as the refusal may come of an overloaded server', async function () {
      const error = await withAddresses(['::1', '127.0.0.3'], () =>
        withUnreachable({ '::1': 'ENETUNREACH' }, () => establishOne(`several.test:${port}`, {}).catch((e) => e)),
      );
      expect(error.message).to.match(new RegExp(`^connecting to several.test:${port} failed: connect ENETUNREACH ::1:${port}\\b.*; connect ECONNREFUSED 127\\.0\\.0\\.3:${port}$`));
      expect([...error.errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
    });

    it('one address alone, unreachable: no label either', async function () {
      const error = await withUnreachable({ '127.0.0.2': 'EHOSTUNREACH' }, () => establishOne(`127.0.0.2:${port}`, {}).catch((e) => e));
      expect(error.message).to.match(new RegExp(`^connecting to 127.0.0.2:${port} failed: connect EHOSTUNREACH 127\\.0\\.0\\.2:${port}\\b`));
      expect([...error.errorLabels]).to.deep.equal([]);
    });
  });
});
