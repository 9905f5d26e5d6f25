/**
 * Idle connections cut by the network: TCP keepalive on every socket the default factory opens
 * (keepAliveInitialDelay), and a connection whose peer ended or closed its socket while it was idle is errored at once,
 * so that the pool closes it (reason `error`) instead of handing it out.
 *
 * Runs against the embedded endpoint, or the server in MONGODB_URI when it is set; the tests that make the server
 * close sockets need the embedded endpoint and skip otherwise.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import * as tls from 'node:tls';
import {
  Connection,
  ConnectionPool,
  InvalidOptionError,
  MongoNetworkError,
  connectionFactory,
  type ConnectionOptions,
  type ConnectionPoolEvent,
} from '../../lib';
import {
  checkConnectionOptions,
  DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS,
  MAX_KEEP_ALIVE_INITIAL_DELAY_MS,
} from '../../lib/connection/connection-options';
import { EmbeddedServer } from '../../lib/testing';
import { establishOne, eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';

const fixtures = path.resolve(__dirname, '../fixtures/tls');

interface KeepAliveCall {
  readonly socket: net.Socket;
  readonly enable: boolean | undefined;
  readonly initialDelay: number | undefined;
}

interface SocketSpy {
  /** Every socket that connected (TLS sockets included: `tls.connect` connects through `net.Socket#connect`). */
  readonly sockets: net.Socket[];
  /** Every `setKeepAlive` call on any socket. */
  readonly calls: KeepAliveCall[];
  restore(): void;
}

/** Records the sockets that connect and the `setKeepAlive` calls, until `restore()`. */
function spyOnSockets(): SocketSpy {
  const proto = net.Socket.prototype;
  const { connect, setKeepAlive } = proto;
  const sockets: net.Socket[] = [];
  const calls: KeepAliveCall[] = [];
  proto.connect = function (this: net.Socket, ...args: unknown[]) {
    sockets.push(this);
    return (connect as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof connect;
  proto.setKeepAlive = function (this: net.Socket, enable?: boolean, initialDelay?: number) {
    calls.push({ socket: this, enable, initialDelay });
    return setKeepAlive.call(this, enable, initialDelay);
  };
  return {
    sockets,
    calls,
    restore: () => {
      proto.connect = connect;
      proto.setKeepAlive = setKeepAlive;
    },
  };
}

/**
 * The kernel's keepalive timer of the established TCP connection from local port `port`, in ms (Linux `ss -o`), or
 * undefined when `ss` cannot tell (not Linux, no `ss`, no timer).
 */
function kernelKeepAliveTimerMS(port: number): number | undefined {
  if (process.platform !== 'linux') return undefined;
  const ss = spawnSync('ss', ['-tnoH', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' });
  if (ss.error !== undefined || ss.status !== 0) return undefined;
  const m = /timer:\(keepalive,(?:(\d+)min)?(?:(\d+)sec)?(?:(\d+)ms)?/.exec(ss.stdout);
  if (m === null) return undefined;
  return Number(m[1] ?? 0) * 60_000 + Number(m[2] ?? 0) * 1000 + Number(m[3] ?? 0);
}

const hasSs = process.platform === 'linux' && spawnSync('ss', ['-V']).error === undefined;

describe('keepAliveInitialDelay (TCP keepalive on every connection)', function () {
  describe('validation', function () {
    it('defaults to 120000 ms, as the official Node.js driver', function () {
      expect(DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS).to.equal(120_000);
      expect(MAX_KEEP_ALIVE_INITIAL_DELAY_MS).to.equal(32_767_000);
    });

    it('accepts integers of ms from 0 to 32767000', function () {
      for (const keepAliveInitialDelay of [undefined, 0, 1, 1000, 120_000, MAX_KEEP_ALIVE_INITIAL_DELAY_MS]) {
        expect(() => checkConnectionOptions({ keepAliveInitialDelay }, 'test')).to.not.throw();
        expect(() => connectionFactory({ host: 'h', port: 1, keepAliveInitialDelay })).to.not.throw();
      }
    });

    it('refuses anything else with an InvalidOptionError naming the option and what is allowed', function () {
      const wrong: unknown[] = [-1, 1.5, Number.NaN, Infinity, MAX_KEEP_ALIVE_INITIAL_DELAY_MS + 1, '1000', true, null];
      for (const value of wrong) {
        const options = { keepAliveInitialDelay: value } as ConnectionOptions;
        let error: unknown;
        try {
          connectionFactory({ ...options, host: 'h', port: 1 });
        } catch (e) {
          error = e;
        }
        expect(error, String(value)).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).to.equal('keepAliveInitialDelay');
        expect((error as InvalidOptionError).message).to.include(
          'keepAliveInitialDelay must be an integer number of ms from 0 (the OS default delay) to 32767000',
        );
      }
    });

    it('is checked where pools take connection options, and a misspelt key names it', function () {
      const at = (connectionOptions: object): unknown => {
        try {
          const options = { address: '127.0.0.1:1', connectionOptions: connectionOptions as ConnectionOptions };
          new ConnectionPool(options).close();
        } catch (e) {
          return e;
        }
        return undefined;
      };
      const negative = at({ keepAliveInitialDelay: -5 });
      expect(negative).to.be.instanceOf(InvalidOptionError).with.property('option', 'keepAliveInitialDelay');
      const misspelt = at({ keepAliveInitalDelay: 1000 }) as InvalidOptionError;
      expect(misspelt).to.be.instanceOf(InvalidOptionError);
      expect(misspelt.suggestion).to.equal('keepAliveInitialDelay');
      expect(at({ keepAliveInitialDelay: 60_000 })).to.equal(undefined);
    });
  });

  describe(`TCP (${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
    let endpoint: TestEndpoint;
    let spy: SocketSpy;
    before(async function () {
      endpoint = await startTestEndpoint();
    });
    after(() => endpoint.stop());
    beforeEach(function () {
      spy = spyOnSockets();
    });
    afterEach(function () {
      spy.restore();
    });

    for (const [given, expected] of [
      [undefined, 120_000],
      [0, 0],
      [500, 1000],
      [5000, 5000],
    ] as const) {
      it(`keepAliveInitialDelay ${given ?? 'unset'}: setKeepAlive(true, ${expected}) on the socket`, async function () {
        const c = await establishOne(endpoint.address, { ...endpoint.connectionOptions, keepAliveInitialDelay: given });
        try {
          expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
          expect(spy.calls.map(({ enable, initialDelay }) => [enable, initialDelay])).to.deep.equal([[true, expected]]);
          expect(spy.calls[0].socket).to.equal(spy.sockets[0]);
        } finally {
          c.destroy();
        }
        expect(spy.sockets[0].destroyed).to.equal(true); // it was this connection's socket
      });
    }

    it('every connection a pool opens gets keepalive', async function () {
      const { address, connectionOptions } = endpoint;
      const pool = new ConnectionPool({ address, connectionOptions, minPoolSize: 3 });
      try {
        pool.ready();
        const held = await Promise.all([pool.checkOut(), pool.checkOut(), pool.checkOut()]);
        for (const c of held) pool.checkIn(c);
        expect(spy.sockets).to.have.length(3);
        expect(spy.calls.map((call) => call.socket)).to.have.members(spy.sockets);
        expect(spy.calls.every((call) => call.enable === true && call.initialDelay === 120_000)).to.equal(true);
      } finally {
        pool.close();
      }
    });

    it('the kernel runs the keepalive timer with the delay asked (Linux, ss)', async function () {
      if (!hasSs) this.skip(); // needs Linux and ss (iproute2) to read the socket's timer
      const c = await establishOne(endpoint.address, endpoint.connectionOptions);
      const zero = await establishOne(endpoint.address, { ...endpoint.connectionOptions, keepAliveInitialDelay: 0 });
      try {
        const timer = kernelKeepAliveTimerMS(spy.sockets[0].localPort!);
        expect(timer).to.be.within(110_000, 120_000);
        // 0: the OS default (net.ipv4.tcp_keepalive_time, in s; ss shows long timers in whole minutes).
        const osDefault = Number(fs.readFileSync('/proc/sys/net/ipv4/tcp_keepalive_time', 'utf8')) * 1000;
        expect(kernelKeepAliveTimerMS(spy.sockets[1].localPort!)).to.be.within(osDefault - 120_000, osDefault);
      } finally {
        c.destroy();
        zero.destroy();
      }
    });
  });

  describe('TLS (embedded endpoint)', function () {
    let server: EmbeddedServer;
    let spy: SocketSpy;
    before(async function () {
      const key = fs.readFileSync(path.join(fixtures, 'server.key'));
      const cert = fs.readFileSync(path.join(fixtures, 'server.crt'));
      server = await new EmbeddedServer({ tls: { key, cert } }).start();
    });
    after(() => server.stop());
    beforeEach(function () {
      spy = spyOnSockets();
    });
    afterEach(function () {
      spy.restore();
    });

    const tlsOptions = (): ConnectionOptions => ({ tls: true, tlsCAFile: path.join(fixtures, 'ca.pem') });
    const address = (): string => server.address.replace('127.0.0.1', 'localhost');

    it('a TLS socket gets setKeepAlive(true, keepAliveInitialDelay)', async function () {
      const c = await establishOne(address(), { ...tlsOptions(), keepAliveInitialDelay: 30_000 });
      try {
        expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
        expect(spy.calls.map(({ enable, initialDelay }) => [enable, initialDelay])).to.deep.equal([[true, 30_000]]);
        expect(spy.calls[0].socket).to.equal(spy.sockets[0]).and.be.instanceOf(tls.TLSSocket);
      } finally {
        c.destroy();
      }
    });

    it('the kernel runs the keepalive timer of a TLS connection (Linux, ss)', async function () {
      if (!hasSs) this.skip(); // needs Linux and ss (iproute2) to read the socket's timer
      const c = await establishOne(address(), tlsOptions());
      try {
        expect(kernelKeepAliveTimerMS(spy.sockets[0].localPort!)).to.be.within(110_000, 120_000);
      } finally {
        c.destroy();
      }
    });
  });
});

describe('a connection whose peer ended or closed the socket while idle', function () {
  describe('Connection (raw sockets)', function () {
    let server: net.Server;
    let port: number;
    /** The server's side of each connection, in accept order. */
    const accepted: net.Socket[] = [];
    before(async function () {
      server = net.createServer((socket) => accepted.push(socket)).listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      port = (server.address() as net.AddressInfo).port;
    });
    after(function () {
      for (const socket of accepted.splice(0)) socket.destroy();
      server.close();
    });

    /**
     * An idle Connection over a fresh socket to the raw server, and the server's side of it; `ended` resolves to
     * `errored` as seen at the socket's 'end'.
     */
    async function connect(
      allowHalfOpen: boolean,
    ): Promise<{ connection: Connection; peer: net.Socket; ended: Promise<boolean> }> {
      const count = accepted.length;
      const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen });
      await new Promise((resolve) => socket.once('connect', resolve));
      const connection = new Connection(socket, { id: 7, generation: 0, address: `127.0.0.1:${port}` });
      // Registered after the Connection's own listeners: runs right after them, before the socket closes.
      const ended = new Promise<boolean>((resolve) => socket.once('end', () => resolve(connection.errored)));
      expect(await eventually(() => accepted.length > count, 1000)).to.equal(true);
      return { connection, peer: accepted[count], ended };
    }

    for (const allowHalfOpen of [false, true]) {
      it(`is errored from the moment the server's FIN arrives (allowHalfOpen ${allowHalfOpen})`, async function () {
        const { connection, peer, ended } = await connect(allowHalfOpen);
        expect(connection.errored).to.equal(false);
        peer.end();
        expect(await ended).to.equal(true);
        expect(connection.error).to.be.instanceOf(MongoNetworkError);
        const message = `connection 7 to 127.0.0.1:${port} closed by the server or the network`;
        expect(connection.error?.message).to.equal(message);
        expect(connection.busy).to.equal(false);
        const error = await connection.command('admin', { ping: 1 }).catch((e: unknown) => e);
        expect(error).to.equal(connection.error); // refused at once, nothing written
        connection.destroy();
      });
    }

    it('is errored once the server resets the socket', async function () {
      const { connection, peer } = await connect(false);
      expect(connection.errored).to.equal(false);
      peer.resetAndDestroy();
      expect(await eventually(() => connection.errored, 1000)).to.equal(true);
      expect(connection.error).to.be.instanceOf(MongoNetworkError);
    });
  });

  describe(`through ConnectionPool (${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
    let endpoint: TestEndpoint;
    let pool: ConnectionPool | undefined;
    let spy: SocketSpy | undefined;
    before(async function () {
      endpoint = await startTestEndpoint();
    });
    after(() => endpoint.stop());
    afterEach(function () {
      pool?.close();
      pool = undefined;
      spy?.restore();
      spy = undefined;
    });

    function start(): { pool: ConnectionPool; events: ConnectionPoolEvent[] } {
      const p = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions });
      const events: ConnectionPoolEvent[] = [];
      p.events$.subscribe((e) => events.push(e));
      p.ready();
      pool = p;
      return { pool: p, events };
    }

    /** The events after the first ConnectionCheckedIn, as `type id reason`. */
    const afterCheckIn = (events: ConnectionPoolEvent[]): string[] =>
      events
        .slice(events.findIndex((e) => e.type === 'ConnectionCheckedIn') + 1)
        .map((e) => `${e.type} ${'connectionId' in e ? e.connectionId : ''} ${'reason' in e ? e.reason : ''}`.trim());

    it('an available connection the server closed is closed (error), never checked out again', async function () {
      if (!endpoint.embedded) this.skip(); // embedded endpoint only: it makes the server close its sockets
      const { pool: p, events } = start();
      const first = await p.checkOut();
      p.checkIn(first);
      expect(endpoint.embedded.closeConnections()).to.equal(1);
      expect(await eventually(() => first.errored, 1000)).to.equal(true);
      const second = await p.checkOut();
      expect(second.id).to.not.equal(first.id);
      expect(await second.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(afterCheckIn(events)).to.deep.equal([
        'ConnectionCheckOutStarted',
        `ConnectionClosed ${first.id} error`,
        `ConnectionCreated ${second.id}`,
        `ConnectionReady ${second.id}`,
        `ConnectionCheckedOut ${second.id}`,
      ]);
      p.checkIn(second);
    });

    it("a checkout made at the server's FIN, before the socket closes, gets a new connection", async function () {
      if (!endpoint.embedded) this.skip(); // embedded endpoint only: it makes the server close its sockets
      spy = spyOnSockets(); // to reach the connection's socket
      const { pool: p, events } = start();
      const first = await p.checkOut();
      p.checkIn(first);
      const socket = spy.sockets[0];
      let closeEmitted = false;
      socket.once('close', () => (closeEmitted = true));
      let closedAtEnd: boolean | undefined;
      const second = new Promise<Connection>((resolve, reject) => {
        socket.once('end', () => {
          closedAtEnd = closeEmitted;
          p.checkOut().then(resolve, reject);
        });
      });
      endpoint.embedded.closeConnections();
      const c = await second;
      expect(closedAtEnd).to.equal(false); // the checkout was made before the socket's 'close'
      expect(c.id).to.not.equal(first.id);
      const closedAt = events.findIndex((e) => e.type === 'ConnectionClosed' && e.connectionId === first.id);
      const checkedOutAt = events.findIndex((e) => e.type === 'ConnectionCheckedOut' && e.connectionId === c.id);
      expect(events[closedAt]).to.include({ reason: 'error' });
      expect(closedAt).to.be.above(-1).and.below(checkedOutAt);
      p.checkIn(c);
    });
  });
});
