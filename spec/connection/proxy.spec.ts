/**
 * Connections through a SOCKS5 proxy: the proxy options and their checks, the SOCKS5 support spec's prose tests (each
 * connection string through a proxy that requires authentication and one that does not, over TCP and TLS, the options
 * in the URI and in the options object), what the proxy is sent (never a resolved address), and what a proxy that
 * refuses, breaks or goes silent makes of an establishment and of a pool.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { firstValueFrom, from } from 'rxjs';
import {
  ConnectionPool,
  ErrorLabel,
  InvalidOptionError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  connect,
  connectionFactory,
  type Client,
  type ClientEvent,
  type Connection,
  type ConnectionOptions,
  type ConnectionPoolEvent,
  type LogMessage,
} from '../../lib';
import { proxySettings } from '../../lib/connection/proxy';
import { socks5Connect } from '../../lib/connection/socks5';
import { EmbeddedServer } from '../../lib/testing';
import { closedPort, eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { fullGc } from '../support/full-gc';
import { startSocks5Proxy, type Socks5Proxy, type Socks5ProxyOptions } from '../support/socks5-proxy';

const fixtures = path.resolve(__dirname, '../fixtures/tls');
const PROXY_PASSWORD = 'p4ssw0rd';

/** What `f` throws (undefined when it returns). */
function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('proxySettings (SOCKS5 support spec, "MongoClient Configuration")', function () {
  it('gives no proxy without proxyHost (or with an empty one), and port 1080 by default', function () {
    expect(proxySettings({})).to.equal(undefined);
    expect(proxySettings({ proxyHost: '' })).to.equal(undefined);
    expect(proxySettings({ proxyHost: 'proxy.example' })).to.deep.equal({ host: 'proxy.example', port: 1080, username: undefined, password: undefined });
    expect(proxySettings({ proxyHost: '[::1]', proxyPort: 1081 })).to.deep.equal({ host: '::1', port: 1081, username: undefined, password: undefined });
  });

  it('errors for proxyPort, proxyUsername or proxyPassword without proxyHost, and for a user name without a password or the reverse', function () {
    const alone = 'given only with proxyHost (the SOCKS5 proxy it applies to)';
    const pair = (other: string): string => `given only with ${other} (RFC 1929 authentication needs both)`;
    const cases: [Record<string, unknown>, string, unknown, string][] = [
      [{ proxyPort: 1080 }, 'proxyPort', 1080, alone],
      [{ proxyUsername: 'u', proxyPassword: PROXY_PASSWORD }, 'proxyUsername', 'u', alone],
      [{ proxyPassword: PROXY_PASSWORD }, 'proxyPassword', '<not shown>', alone],
      [{ proxyHost: '', proxyPort: 1080 }, 'proxyPort', 1080, alone],
      [{ proxyHost: 'p', proxyUsername: 'u' }, 'proxyUsername', 'u', pair('proxyPassword')],
      [{ proxyHost: 'p', proxyPassword: PROXY_PASSWORD }, 'proxyPassword', '<not shown>', pair('proxyUsername')],
      // A zero-length user name or password is ignored: the other is then alone.
      [{ proxyHost: 'p', proxyUsername: '', proxyPassword: PROXY_PASSWORD }, 'proxyPassword', '<not shown>', pair('proxyUsername')],
      [{ proxyHost: 'p', proxyUsername: 'u', proxyPassword: '' }, 'proxyUsername', 'u', pair('proxyPassword')],
    ];
    for (const [options, option, value, allowed] of cases) {
      const error = thrown(() => proxySettings(options));
      expect(error, inspect(options)).to.be.instanceOf(InvalidOptionError);
      expect(error, inspect(options)).to.include({ option, value, allowed });
      expect(inspect(error)).to.not.include(PROXY_PASSWORD);
    }
    // Both zero-length: no authentication, as neither was given.
    expect(proxySettings({ proxyHost: 'p', proxyUsername: '', proxyPassword: '' })).to.include({ username: undefined, password: undefined });
  });

  it('refuses values of the wrong type or range, and a user name or password over 255 bytes (RFC 1929), never showing the password', function () {
    const long = 'é'.repeat(128); // 256 bytes of UTF-8
    const cases: [Record<string, unknown>, string, RegExp, unknown?][] = [
      [{ proxyHost: 5 }, 'proxyHost', /a string/],
      [{ proxyHost: '[::1' }, 'proxyHost', /without a port/],
      [{ proxyHost: 'a]b' }, 'proxyHost', /without a port/],
      [{ proxyHost: '[db.example]' }, 'proxyHost', /IPv6 address/],
      [{ proxyHost: 'proxy.example:1081' }, 'proxyHost', /without a port \(give the port as proxyPort\)/],
      [{ proxyHost: '127.0.0.1:1081' }, 'proxyHost', /without a port/],
      [{ proxyHost: '[::1]:1081' }, 'proxyHost', /without a port/],
      [{ proxyHost: 'p', proxyPort: 0 }, 'proxyPort', /1 to 65535/],
      [{ proxyHost: 'p', proxyPort: 65536 }, 'proxyPort', /1 to 65535/],
      [{ proxyHost: 'p', proxyPort: '1080' }, 'proxyPort', /1 to 65535/],
      [{ proxyHost: 'p', proxyUsername: 5, proxyPassword: PROXY_PASSWORD }, 'proxyUsername', /a string/, 5],
      [{ proxyHost: 'p', proxyUsername: long, proxyPassword: PROXY_PASSWORD }, 'proxyUsername', /at most 255 bytes/],
      [{ proxyHost: 'p', proxyUsername: 'u', proxyPassword: `${PROXY_PASSWORD}${long}` }, 'proxyPassword', /at most 255 bytes/],
      [{ proxyHost: 'p', proxyUsername: 'u', proxyPassword: [PROXY_PASSWORD] }, 'proxyPassword', /a string/, '<not shown>'],
    ];
    for (const [options, option, allowed, value] of cases) {
      const error = thrown(() => proxySettings(options));
      expect(error, inspect(options)).to.be.instanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).to.equal(option);
      expect((error as InvalidOptionError).allowed).to.match(allowed);
      if (value !== undefined) expect((error as InvalidOptionError).value).to.deep.equal(value);
      expect(inspect(error)).to.not.include(PROXY_PASSWORD);
    }
    // The limits themselves are allowed: 255 bytes each, ports 1 and 65535.
    expect(proxySettings({ proxyHost: 'p', proxyUsername: 'u'.repeat(255), proxyPassword: 'p'.repeat(255) })).to.not.equal(undefined);
    expect([1, 65535].map((proxyPort) => proxySettings({ proxyHost: 'p', proxyPort })?.port)).to.deep.equal([1, 65535]);
  });

  it('connect(), a connection factory and a pool check them before anything is opened', function () {
    const bad = { proxyHost: 'p', proxyUsername: 'u' };
    expect(() => connect('mongodb://localhost:27017', bad)).to.throw(InvalidOptionError, /proxyUsername/);
    expect(() => connect('mongodb://localhost:27017/?proxyHost=p', { proxyPassword: PROXY_PASSWORD })).to.throw(InvalidOptionError, /proxyPassword/);
    expect(() => connectionFactory({ host: 'localhost', port: 27017, proxyPort: 1080 })).to.throw(InvalidOptionError, /proxyPort/);
    expect(() => new ConnectionPool({ address: 'localhost:27017', connectionOptions: bad })).to.throw(InvalidOptionError, /proxyUsername/);
    // The URI and the options object complete each other: a URI proxyHost with the options' credentials.
    const client = connect('mongodb://localhost:27017/?proxyHost=p', { proxyUsername: 'u', proxyPassword: PROXY_PASSWORD, serverSelectionTimeoutMS: 1 });
    void client.close();
  });
});

describe('connections through a SOCKS5 proxy', function () {
  let endpoint: TestEndpoint;
  /** The server's host and port (MONGODB_URI's first host, or the embedded endpoint). */
  let server: { host: string; port: number };
  /** Requires username / p4ssw0rd, as the spec's proxy on port 1080. */
  let authProxy: Socks5Proxy;
  /** Requires no authentication, as the spec's proxy on port 1081. */
  let openProxy: Socks5Proxy;
  const proxies: Socks5Proxy[] = [];
  const clients: Client[] = [];

  /** `localhost:12345` (the spec's `<mappedhost>`) and `mongodb.invalid` (a name no DNS resolves) lead to the server. */
  const map = (host: string, port: number): { host: string; port: number } =>
    (host === 'localhost' && port === 12345) || host === 'mongodb.invalid' ? server : { host, port };

  async function proxy(options: Socks5ProxyOptions = {}): Promise<Socks5Proxy> {
    const started = await startSocks5Proxy({ map, ...options });
    proxies.push(started);
    return started;
  }

  /** A client of `uri` with the endpoint's own options (credentials, TLS of MONGODB_URI) and `options`. */
  function client(uri: string, options: Record<string, unknown> = {}): Client {
    // A failing row waits this long; a real server (further away, with TLS and authentication) gets longer.
    const c = connect(uri, { ...endpoint.connectionOptions, serverSelectionTimeoutMS: process.env.MONGODB_URI ? 5000 : 500, ...options });
    clients.push(c);
    return c;
  }

  /** Establishes one connection to `host`:`port` with `options`; resolves to it or rejects with the error. */
  async function establish(host: string, port: number | undefined, options: ConnectionOptions): Promise<Connection> {
    const factory = connectionFactory({ ...endpoint.connectionOptions, ...options, host, port });
    const address = port === undefined ? host : `${host}:${port}`;
    return firstValueFrom(from(factory({ id: 1, generation: 0, address, signal: new AbortController().signal })));
  }

  /** The error establishing one connection through `through` with `options` fails with. */
  async function failure(through: Socks5Proxy | number, options: ConnectionOptions = {}): Promise<MongoNetworkError> {
    const proxyPort = typeof through === 'number' ? through : through.port;
    const error = await establish('localhost', 12345, { proxyHost: '127.0.0.1', proxyPort, connectTimeoutMS: 2000, ...options }).then(
      (c) => {
        c.destroy();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(MongoNetworkError);
    return error as MongoNetworkError;
  }

  before(async function () {
    endpoint = await startTestEndpoint();
    const [host, port] = endpoint.address.split(/:(?=\d+$)/);
    server = { host: host.replace(/^\[(.*)\]$/, '$1'), port: Number(port) };
    authProxy = await proxy({ auth: { username: 'username', password: PROXY_PASSWORD } });
    openProxy = await proxy();
  });

  afterEach(async function () {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });

  after(async function () {
    await Promise.all(proxies.map((p) => p.close()));
    await endpoint.stop();
  });

  /**
   * The SOCKS5 support spec's prose tests: each connection string runs a hello through a fresh client, and succeeds
   * or fails as the spec's table says. `<mappedhost>` is localhost:12345 (each proxy maps it to the server), and
   * `<replicaset>` the server's own address, which the proxy reaches as it is. `tlsQuery`: the URI options of TLS (in
   * both forms: what varies is where the proxy options are given).
   */
  function proseTable(tlsQuery: () => string, replicaset: () => string): void {
    const auth = (): number => authProxy.port;
    const open = (): number => openProxy.port;
    const rows: [string, () => string, () => number, string, boolean][] = [
      ['<mappedhost>', () => 'localhost:12345', auth, '&directConnection=true', false],
      ['<mappedhost>', () => 'localhost:12345', open, '&directConnection=true', true],
      ['<replicaset>', replicaset, auth, '', false],
      ['<replicaset>', replicaset, open, '', true],
      ['<mappedhost>', () => 'localhost:12345', auth, '&proxyUsername=nonexistentuser&proxyPassword=badauth&directConnection=true', false],
      ['<mappedhost>', () => 'localhost:12345', open, '&proxyUsername=nonexistentuser&proxyPassword=badauth&directConnection=true', true],
      ['<replicaset>', replicaset, open, '&proxyUsername=nonexistentuser&proxyPassword=badauth', true],
      ['<mappedhost>', () => 'localhost:12345', auth, `&proxyUsername=username&proxyPassword=${PROXY_PASSWORD}&directConnection=true`, true],
      ['<mappedhost>', () => 'localhost:12345', open, '&directConnection=true', true],
      ['<replicaset>', replicaset, auth, `&proxyUsername=username&proxyPassword=${PROXY_PASSWORD}`, true],
      ['<replicaset>', replicaset, open, '', true],
    ];
    for (const [shown, hosts, port, rest, succeeds] of rows) {
      for (const form of ['in the URI', 'as options of connect()'] as const) {
        const label = `mongodb://${shown}/?proxyHost=localhost&proxyPort=${port === auth ? 1080 : 1081}${rest.replace(PROXY_PASSWORD, '***')}, ${form}: ${succeeds ? 'succeeds' : 'fails'}`;
        it(label, async function () {
          const query = `proxyHost=localhost&proxyPort=${port()}${rest}`;
          const params = Object.fromEntries(new URLSearchParams(query));
          const c =
            form === 'in the URI'
              ? client(`mongodb://${hosts()}/?${query}${tlsQuery()}`)
              : client(`mongodb://${hosts()}/?${tlsQuery().replace(/^&/, '')}`, {
                  proxyHost: params.proxyHost,
                  proxyPort: Number(params.proxyPort),
                  ...(params.proxyUsername === undefined ? {} : { proxyUsername: params.proxyUsername, proxyPassword: params.proxyPassword }),
                  ...(params.directConnection === undefined ? {} : { directConnection: true }),
                });
          const outcome = await c.command('admin', { hello: 1 }).then(
            (reply) => reply,
            (error: Error) => error,
          );
          if (succeeds) expect(outcome, inspect(outcome)).to.not.be.instanceOf(Error);
          else {
            // For the reason the spec means: the proxy refused the client (not a timeout on the way).
            expect(outcome).to.be.instanceOf(Error);
            expect((outcome as Error).message).to.match(/through the SOCKS5 proxy localhost:\d+ failed: the proxy (accepts none of the authentication methods|refused the user name and password)/);
          }
          if (outcome instanceof Error) expect(inspect(outcome)).to.not.include(PROXY_PASSWORD);
        });
      }
    }
  }

  describe('the prose tests, over TCP (or as MONGODB_URI connects)', function () {
    proseTable(
      () => '',
      () => endpoint.address,
    );
  });

  describe('the prose tests, over TLS (the embedded endpoint serving TLS; skipped with MONGODB_URI)', function () {
    let tlsServer: EmbeddedServer | undefined;
    let saved: { host: string; port: number };
    before(async function () {
      if (process.env.MONGODB_URI) return this.skip();
      tlsServer = await new EmbeddedServer({ tls: { key: fs.readFileSync(path.join(fixtures, 'server.key')), cert: fs.readFileSync(path.join(fixtures, 'server.crt')) } }).start();
      saved = server;
      // Through the proxy as localhost (the certificate's name), which the proxy resolves.
      server = { host: 'localhost', port: Number(tlsServer.address.split(':')[1]) };
    });
    after(async function () {
      if (tlsServer === undefined) return;
      server = saved;
      await tlsServer.stop();
    });
    proseTable(
      () => `&tls=true&tlsCAFile=${encodeURIComponent(path.join(fixtures, 'ca.pem'))}`,
      () => `localhost:${server.port}`,
    );

    it("verifies the server's certificate through the tunnel: against the wrong CA it fails, with no backpressure label", async function () {
      const error = await failure(openProxy, { tls: true, tlsCAFile: path.join(fixtures, 'other-ca.pem') });
      expect(error.message).to.match(/through the SOCKS5 proxy 127\.0\.0\.1:\d+ failed/);
      expect([...error.errorLabels]).to.deep.equal([]);
    });
  });

  it('passes the host name to the proxy as it is, never resolved here: a name no DNS resolves connects through the proxy', async function () {
    const before = openProxy.requests.length;
    const c = await establish('mongodb.invalid', 27017, { proxyHost: '127.0.0.1', proxyPort: openProxy.port });
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    c.destroy();
    const request = openProxy.requests[before];
    expect(request).to.include({ addressType: 3, host: 'mongodb.invalid', port: 27017 });
    // Without the proxy the same name fails (ENOTFOUND): the proxy is what reached the server.
    const direct = await establish('mongodb.invalid', 27017, { connectTimeoutMS: 2000 }).catch((e: unknown) => e);
    expect(direct).to.be.instanceOf(MongoNetworkError);
  });

  it('sends a host name that is not ASCII in its IDNA form, its length in bytes: the proxy is asked for that host and port, not another', async function () {
    const routed = await proxy({ map: () => server });
    const c = await establish('bücher.example', 27017, { proxyHost: '127.0.0.1', proxyPort: routed.port, connectTimeoutMS: 2000 });
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    c.destroy();
    // What Node's lookup asks DNS for without a proxy.
    expect(routed.requests.at(-1)).to.include({ addressType: 3, host: 'xn--bcher-kva.example', port: 27017 });
    // A name longer than 255 bytes in its ASCII form is refused as the factory is made: no connection could carry it.
    const before = routed.accepted();
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.example`;
    const error = await establish(long, 27017, { proxyHost: '127.0.0.1', proxyPort: routed.port }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect(error).to.include({ option: 'host', allowed: 'a host a SOCKS5 proxy can be asked for (with proxyHost): its ASCII form is 263 bytes, more than the 255 a SOCKS5 request holds' });
    expect(routed.accepted()).to.equal(before);
  });

  it('a connection established through the proxy is not kept reachable once closed (as one established directly is not)', async function () {
    /** Establishes one connection to `host`:`port` with `options`, closes it, and returns a weak reference to it. */
    async function closed(host: string, port: number, options: ConnectionOptions): Promise<WeakRef<Connection>> {
      const c = await establish(host, port, options);
      c.destroy();
      return new WeakRef(c);
    }
    const direct = await closed(server.host, server.port, {});
    const proxied = await closed('localhost', 12345, { proxyHost: '127.0.0.1', proxyPort: openProxy.port, connectTimeoutMS: 30000 });
    await new Promise((r) => setTimeout(r, 50));
    fullGc();
    expect(direct.deref(), 'the direct connection').to.equal(undefined);
    expect(proxied.deref(), 'the proxied connection').to.equal(undefined);
  });

  it('sends an IPv4 or IPv6 address as an address (ATYP 1 or 4), not as a name', async function () {
    const routed = await proxy({ map: () => server });
    for (const [host, type, sent] of [['127.0.0.1', 1, '127.0.0.1'], ['::1', 4, '::1'], ['2001:db8::7:0:1', 4, '2001:db8::7:0:1'], ['::ffff:127.0.0.1', 4, '::ffff:7f00:1']] as const) {
      const c = await establish(host, 27017, { proxyHost: '127.0.0.1', proxyPort: routed.port });
      c.destroy();
      expect(routed.requests.at(-1)).to.include({ addressType: type, host: sent, port: 27017 });
    }
  });

  it('offers "no authentication" alone without proxy credentials, and also username/password with them (RFC 1928 methods 0 and 2)', async function () {
    const before = openProxy.requests.length;
    (await establish('localhost', 12345, { proxyHost: '127.0.0.1', proxyPort: openProxy.port })).destroy();
    (await establish('localhost', 12345, { proxyHost: '127.0.0.1', proxyPort: openProxy.port, proxyUsername: 'u', proxyPassword: 'x' })).destroy();
    expect(openProxy.requests.slice(before).map((r) => r.methods)).to.deep.equal([[0], [0, 2]]);
    const authBefore = authProxy.requests.length;
    (await establish('localhost', 12345, { proxyHost: '127.0.0.1', proxyPort: authProxy.port, proxyUsername: 'username', proxyPassword: PROXY_PASSWORD })).destroy();
    expect(authProxy.requests[authBefore]).to.include({ username: 'username', authenticated: true });
  });

  it("a client's pools and monitors all go through the proxy, and no event or log message names it", async function () {
    const events: ClientEvent[] = [];
    const logs: LogMessage[] = [];
    const routed = await proxy();
    // mongodb.invalid resolves nowhere: every connection of the client, the monitor's included, must use the proxy.
    const c = client(`mongodb://mongodb.invalid:27017/?proxyHost=127.0.0.1&proxyPort=${routed.port}&directConnection=true`, {
      logging: { componentSeverities: { default: 'debug' }, path: { write: (m: LogMessage) => logs.push(m) } },
    });
    c.events$.subscribe((e) => events.push(e));
    c.log$.subscribe((m) => logs.push(m));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(await eventually(() => events.some((e) => e.type === 'ServerHeartbeatSucceeded'))).to.equal(true);
    expect(routed.accepted()).to.be.at.least(2); // the monitor's connection and the pool's
    const text = JSON.stringify([...events, ...logs]);
    expect(text).to.include('mongodb.invalid');
    expect(text).to.not.include(String(routed.port));
  });

  it('a connection to a Unix domain socket path never goes through the proxy', async function () {
    const socketPath = path.join(os.tmpdir(), `rxcmap-proxy-${process.pid}.sock`);
    fs.rmSync(socketPath, { force: true });
    const target = net.createServer((s) => s.pipe(net.connect(server.port, server.host)).pipe(s).on('error', () => undefined)).listen(socketPath);
    await new Promise((r) => target.once('listening', r));
    try {
      const before = openProxy.accepted();
      const c = await establish(socketPath, undefined, { proxyHost: '127.0.0.1', proxyPort: openProxy.port });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
      expect(openProxy.accepted()).to.equal(before);
    } finally {
      await new Promise((r) => target.close(r));
      fs.rmSync(socketPath, { force: true });
    }
  });

  describe('failures at the proxy: network errors with no backpressure label, naming the proxy, never its password', function () {
    it('the proxy refusing the TCP connection (nothing listens): ECONNREFUSED as the cause', async function () {
      const error = await failure(await closedPort());
      expect(error.message).to.match(/^connecting to localhost:12345 through the SOCKS5 proxy 127\.0\.0\.1:\d+ failed: .*ECONNREFUSED/);
      expect((error.cause as NodeJS.ErrnoException).code).to.equal('ECONNREFUSED');
      expect([...error.errorLabels]).to.deep.equal([]);
    });

    it('the proxy refusing the user name and password, with no cause that holds the settings', async function () {
      const error = await failure(authProxy, { proxyUsername: 'username', proxyPassword: 'wr0ng-Pass' });
      expect(error.message).to.match(/through the SOCKS5 proxy 127\.0\.0\.1:\d+ failed: the proxy refused the user name and password \(RFC 1929 status 0x01\)$/);
      expect([...error.errorLabels]).to.deep.equal([]);
      expect(error.cause).to.equal(undefined);
      expect(inspect(error, { depth: Infinity, showHidden: true })).to.not.include('wr0ng-Pass');
      expect(JSON.stringify(error)).to.not.include('wr0ng-Pass');
    });

    it('the proxy refusing credentials the client does not have (no acceptable method)', async function () {
      const error = await failure(authProxy);
      expect(error.message).to.match(/through the SOCKS5 proxy 127\.0\.0\.1:\d+ failed: the proxy accepts none of the authentication methods offered \(no authentication\)$/);
      expect([...error.errorLabels]).to.deep.equal([]);
    });

    for (const [code, meaning] of [[5, 'connection refused'], [4, 'host unreachable'], [1, 'general SOCKS server failure'], [9, 'unassigned']] as const) {
      it(`the proxy failing to reach the server (reply ${code}, ${meaning}): no label, though the server may be what refused`, async function () {
        const error = await failure(await proxy({ replyCode: code }));
        expect(error.message).to.match(new RegExp(`failed: the proxy could not connect to the server: ${meaning} \\(SOCKS5 reply 0x0${code}\\)$`));
        expect([...error.errorLabels]).to.deep.equal([]);
      });
    }

    for (const behaviour of ['garbage', 'close-after-greeting'] as const) {
      it(`a broken proxy (${behaviour}) fails the establishment and the socket is closed`, async function () {
        const broken = await proxy({ behaviour });
        const error = await failure(broken);
        expect([...error.errorLabels]).to.deep.equal([]);
        expect(await eventually(() => broken.openSockets() === 0)).to.equal(true);
      });
    }

    for (const behaviour of ['silent', 'stall-after-auth'] as const) {
      it(`a proxy gone silent (${behaviour}) fails the establishment after connectTimeoutMS (during proxy), with no label`, async function () {
        const silent = await proxy({ behaviour, auth: behaviour === 'stall-after-auth' ? { username: 'u', password: 'x' } : undefined });
        const started = Date.now();
        const error = await failure(silent, { connectTimeoutMS: 300, proxyUsername: 'u', proxyPassword: 'x' });
        expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
        expect(error.message).to.match(/timed out after 300 ms \(during proxy\)/);
        expect(Date.now() - started).to.be.below(2000);
        expect([...error.errorLabels]).to.deep.equal([]);
        expect(await eventually(() => silent.openSockets() === 0)).to.equal(true);
      });
    }

    it('connectTimeoutMS 0 (no limit) and 2147483647 (the longest) both leave a proxied establishment time to complete', async function () {
      for (const connectTimeoutMS of [0, 2147483647]) {
        const c = await establish('localhost', 12345, { proxyHost: '127.0.0.1', proxyPort: openProxy.port, connectTimeoutMS });
        expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
        c.destroy();
      }
    });

    it('socks5Connect rejects with an Error that holds its message only: not the settings, not the password', async function () {
      const socket = net.connect(authProxy.port, '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      const settings = { host: '127.0.0.1', port: authProxy.port, username: 'username', password: 'wr0ng-Pass' };
      const error = await socks5Connect(socket, settings, 'localhost', 12345).catch((e: unknown) => e);
      socket.destroy();
      expect(error).to.be.instanceOf(Error);
      expect((error as Error).message).to.equal('the proxy refused the user name and password (RFC 1929 status 0x01)');
      expect(Object.keys(error as Error)).to.deep.equal([]);
      expect(inspect(error, { depth: Infinity, showHidden: true })).to.not.include('wr0ng-Pass');
    });

    it('a proxy that writes each byte of its replies apart still connects', async function () {
      const c = await establish('localhost', 12345, { proxyHost: '127.0.0.1', proxyPort: (await proxy({ behaviour: 'trickle' })).port });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
    });

    it('a proxy that sends bytes after its reply, before the server said anything, fails the establishment, over TCP or TLS', async function () {
      const extra = await proxy({ behaviour: 'extra-bytes' });
      for (const options of [{}, { tls: true, tlsCAFile: path.join(fixtures, 'ca.pem') }]) {
        const error = await failure(extra, options);
        expect(error.message).to.match(/failed: the proxy sent 4 bytes after its CONNECT reply, before the server could have sent any$/);
      }
      expect(await eventually(() => extra.openSockets() === 0)).to.equal(true);
    });

    /**
     * A proxy that answers each chunk the client sends with the next of `replies` (hex, then `|end` to close the
     * connection after it), then stays silent.
     */
    async function scripted(replies: string[]): Promise<number> {
      const server = net.createServer((socket) => {
        let n = 0;
        socket.on('error', () => undefined);
        socket.on('data', () => {
          const [reply, end] = (replies[n++] ?? '').split('|');
          if (reply !== '') socket.write(Buffer.from(reply, 'hex'));
          if (end === 'end') socket.end();
        });
      });
      await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
      after(() => server.close());
      server.unref();
      return (server.address() as net.AddressInfo).port;
    }

    const broken: [string, string[], ConnectionOptions, RegExp][] = [
      ['replies in another protocol', ['4854'], {}, /the proxy does not speak SOCKS5 \(its reply starts with 0x48, not 0x05\)$/],
      ['chooses a method that was not offered (username/password, without credentials)', ['0502'], {}, /the proxy chose authentication method 0x02, which was not offered$/],
      ['chooses GSSAPI', ['0501'], { proxyUsername: 'u', proxyPassword: 'x' }, /the proxy chose authentication method 0x01, which was not offered$/],
      ['replies to CONNECT with an unknown address type', ['0500', '05000007' + '00'.repeat(6)], {}, /the proxy's CONNECT reply has an unknown address type \(0x07\)$/],
      ['replies to CONNECT with an unknown address type in 4 bytes, then waits', ['0500', '05000007'], {}, /the proxy's CONNECT reply has an unknown address type \(0x07\)$/],
      ['replies to CONNECT in another version', ['0500', '04000001' + '00'.repeat(6)], {}, /the proxy does not speak SOCKS5 \(its reply starts with 0x04, not 0x05\)$/],
      ['closes after half of its CONNECT reply', ['0500', '05000001|end'], {}, /the proxy closed the connection during the SOCKS5 exchange \(awaiting its CONNECT reply\)$/],
      ['refuses the CONNECT with 2 bytes, then closes', ['0500', '0505|end'], {}, /the proxy could not connect to the server: connection refused \(SOCKS5 reply 0x05\)$/],
    ];
    for (const [what, replies, options, message] of broken) {
      it(`a proxy that ${what} fails the establishment, saying so`, async function () {
        const error = await failure(await scripted(replies), { connectTimeoutMS: 1000, ...options });
        expect(error.message).to.match(message);
        expect([...error.errorLabels]).to.deep.equal([]);
      });
    }

    it('unsubscribing during the SOCKS5 exchange closes the socket to the proxy', async function () {
      const silent = await proxy({ behaviour: 'silent' });
      const factory = connectionFactory({ host: 'localhost', port: 12345, proxyHost: '127.0.0.1', proxyPort: silent.port });
      const subscription = from(factory({ id: 1, generation: 0, address: 'localhost:12345', signal: new AbortController().signal })).subscribe({ error: () => undefined });
      expect(await eventually(() => silent.openSockets() === 1)).to.equal(true);
      subscription.unsubscribe();
      expect(await eventually(() => silent.openSockets() === 0)).to.equal(true);
    });

    it('a pool whose proxy refuses its credentials fails the checkout (connectionError) and clears, as for any network error that is no overload', async function () {
      const events: ConnectionPoolEvent[] = [];
      const logs: LogMessage[] = [];
      const pool = new ConnectionPool({
        address: 'localhost:12345',
        connectionOptions: { ...endpoint.connectionOptions, proxyHost: '127.0.0.1', proxyPort: authProxy.port, proxyUsername: 'username', proxyPassword: 'wr0ng-Pass' },
        logging: { componentSeverities: { default: 'debug' }, path: { write: (m: LogMessage) => logs.push(m) } },
      });
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      const error = await pool.checkOut().then(
        () => undefined,
        (e: unknown) => e,
      );
      await pool.close();
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(events.map((e) => e.type).filter((t) => t === 'ConnectionCheckOutFailed' || t === 'ConnectionPoolCleared')).to.deep.equal(['ConnectionPoolCleared', 'ConnectionCheckOutFailed']);
      expect(events.find((e) => e.type === 'ConnectionCheckOutFailed')).to.include({ reason: 'connectionError' });
      expect(logs.length).to.be.above(0);
      expect(JSON.stringify([...events, ...logs]) + inspect(error, { depth: Infinity })).to.not.include('wr0ng-Pass');
      expect([...(error as MongoNetworkError).errorLabels]).to.not.include(ErrorLabel.SystemOverloadedError);
    });
  });
});
