/**
 * The pool over real TCP connections when the network or the OS fails under them, below the wire protocol: a byte-level
 * fault proxy (spec/support/tcp-fault-proxy.ts) in front of the embedded endpoint resets (RST) or ends (FIN) a
 * connection at a byte offset of the handshake exchange or of a command, goes silent, trickles bytes or stops reading.
 * Each case checks what CMAP and SDAM "Error handling" require: the error type (MongoNetworkError, or
 * MongoNetworkTimeoutError) and its labels, ConnectionClosed with reason `error`, the pool cleared or not, every
 * checkout settled once, and no socket left open.
 *
 * connectTimeoutMS and socketTimeoutMS run on Node's timers (the connection layer's clock), so the timeouts here are
 * short real ones.
 */
import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import {
  ConnectionPool,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  PoolClearedError,
  connect,
  type ConnectionOptions,
  type ConnectionPoolEvent,
} from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { eventually } from '../support/endpoint';
import { startTcpFaultProxy, type TcpFaultProxy } from '../support/tcp-fault-proxy';

/** `type(reason)` of each event, from the first ConnectionCheckOutStarted on. */
function trail(events: ConnectionPoolEvent[]): string[] {
  const from = events.findIndex((e) => e.type === 'ConnectionCheckOutStarted');
  return events.slice(from).map((e) => ('reason' in e ? `${e.type}(${e.reason})` : e.type));
}

/** Resolves to what the promise settled with, and how many times a handler ran (exactly once is right). */
async function outcome<T>(p: PromiseLike<T>): Promise<{ value?: T; error?: unknown; settled: number }> {
  const o: { value?: T; error?: unknown; settled: number } = { settled: 0 };
  await p.then(
    (value) => {
      o.settled++;
      o.value = value;
    },
    (error: unknown) => {
      o.settled++;
      o.error = error;
    },
  );
  return o;
}

/** `count` offsets from 0 to `length - 1`, the first and last bytes and the wire header's edges included. */
function offsets(length: number, count: number): number[] {
  const picked = new Set([0, 1, 15, 16, 17, length - 1]);
  for (let i = 0; i < count; i++) picked.add(Math.floor((i * length) / count));
  return [...picked].filter((o) => o >= 0 && o < length).sort((a, b) => a - b);
}

describe('TCP faults under the pool (fault proxy in front of the embedded endpoint)', function () {
  this.timeout(20_000);
  let server: EmbeddedServer;
  let proxy: TcpFaultProxy;
  /** The bytes of one handshake exchange, and of one ping exchange after it, per direction. */
  let handshake: { up: number; down: number };
  let ping: { up: number; down: number };
  const pools: ConnectionPool[] = [];

  function pool(connectionOptions: ConnectionOptions = {}): { pool: ConnectionPool; events: ConnectionPoolEvent[] } {
    const p = new ConnectionPool({ address: proxy.address, connectionOptions: { connectTimeoutMS: 2000, ...connectionOptions } });
    const events: ConnectionPoolEvent[] = [];
    p.events$.subscribe((e) => events.push(e));
    p.ready();
    pools.push(p);
    return { pool: p, events };
  }

  before(async function () {
    server = await new EmbeddedServer().start();
    proxy = await startTcpFaultProxy(server.address);
    const { pool: p } = pool();
    const c = await p.checkOut();
    handshake = { ...proxy.bytes };
    await c.command('admin', { ping: 1 });
    ping = { up: proxy.bytes.up - handshake.up, down: proxy.bytes.down - handshake.down };
    p.checkIn(c);
  });
  afterEach(async function () {
    for (const p of pools.splice(0)) p.close();
    proxy.fault = undefined;
    proxy.trickleMS = 0;
    proxy.blackhole = false;
    proxy.paused = false;
    proxy.applyPause();
    // Every socket the pool opened is closed (or ended) by the client once its pool is closed.
    expect(await eventually(() => proxy.openSockets() === 0, 2000), `${proxy.openSockets()} sockets left open`).to.equal(true);
  });
  after(async function () {
    await proxy.stop();
    await server.stop();
  });

  describe('a reset or FIN during the handshake exchange', function () {
    for (const kind of ['rst', 'fin'] as const) {
      for (const direction of ['up', 'down'] as const) {
        it(`${kind} after each sampled byte offset of the handshake ${direction === 'up' ? 'request' : 'reply'}: the checkout fails once with a labelled MongoNetworkError, the connection closed (error), the pool not cleared`, async function () {
          const seen = new Map<string, number[]>();
          for (const afterBytes of offsets(handshake[direction], 24)) {
            proxy.fault = () => ({ direction, afterBytes, kind });
            const { pool: p, events } = pool();
            const o = await outcome(p.checkOut());
            expect(o.settled, `offset ${afterBytes}`).to.equal(1);
            expect(o.error, `offset ${afterBytes}`).to.be.instanceOf(MongoNetworkError);
            const error = o.error as MongoNetworkError;
            expect(error).to.not.be.instanceOf(MongoNetworkTimeoutError);
            // CMAP "Backpressure-enabled": a network error before or during the hello carries both labels, so the
            // default policy does not clear the pool.
            expect([...error.errorLabels], `offset ${afterBytes}`).to.have.members(['SystemOverloadedError', 'RetryableError']);
            const t = trail(events).join(' ');
            seen.set(t, [...(seen.get(t) ?? []), afterBytes]);
            expect(p.state).to.equal('ready');
            p.close();
          }
          expect([...seen.keys()]).to.deep.equal([
            'ConnectionCheckOutStarted ConnectionCreated ConnectionClosed(error) ConnectionCheckOutFailed(connectionError)',
          ]);
        });
      }
    }
  });

  describe('a reset or FIN during a command', function () {
    for (const kind of ['rst', 'fin'] as const) {
      for (const direction of ['up', 'down'] as const) {
        it(`${kind} after each byte offset of the ping ${direction === 'up' ? 'request' : 'reply'}: the command fails with an unlabelled MongoNetworkError, the check-in closes the connection (error), the next checkout gets a new one`, async function () {
          // Up, offset 0 would cut the exchange right after the handshake request: the handshake's case above.
          for (let off = direction === 'up' ? 1 : 0; off < ping[direction]; off++) {
            proxy.fault = () => ({ direction, afterBytes: handshake[direction] + off, kind });
            const { pool: p, events } = pool();
            const c = await p.checkOut();
            const o = await outcome(c.command('admin', { ping: 1 }));
            expect(o.settled).to.equal(1);
            expect(o.error, `offset ${off}`).to.be.instanceOf(MongoNetworkError);
            expect((o.error as MongoNetworkError).errorLabels.size, `offset ${off}`).to.equal(0);
            expect(c.errored).to.equal(true);
            p.checkIn(c);
            proxy.fault = undefined;
            const next = await p.checkOut();
            expect(next.id).to.not.equal(c.id);
            expect(await next.command('admin', { ping: 1 })).to.include({ ok: 1 });
            p.checkIn(next);
            expect(trail(events).slice(4, 6), `offset ${off}`).to.deep.equal(['ConnectionCheckedIn', 'ConnectionClosed(error)']);
            expect(events.some((e) => e.type === 'ConnectionPoolCleared')).to.equal(false); // the pool alone never clears on it
            p.close();
          }
        });
      }
    }
  });

  describe('a peer gone silent (no FIN, no RST)', function () {
    it('during the handshake: a MongoNetworkTimeoutError after connectTimeoutMS naming the phase, labelled, the socket closed', async function () {
      proxy.fault = () => ({ direction: 'down', afterBytes: 40, kind: 'stall' });
      const { pool: p, events } = pool({ connectTimeoutMS: 150 });
      const started = Date.now();
      const o = await outcome(p.checkOut());
      expect(Date.now() - started).to.be.within(140, 1500);
      expect(o.error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect((o.error as Error).message).to.match(/timed out after 150 ms \(during hello\)$/);
      expect([...(o.error as MongoNetworkError).errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
      expect(trail(events)).to.deep.equal(['ConnectionCheckOutStarted', 'ConnectionCreated', 'ConnectionClosed(error)', 'ConnectionCheckOutFailed(connectionError)']);
    });

    it('during a reply: socketTimeoutMS fails the command with MongoNetworkTimeoutError and errors the connection', async function () {
      proxy.fault = () => ({ direction: 'down', afterBytes: handshake.down + 10, kind: 'stall' });
      const { pool: p, events } = pool({ socketTimeoutMS: 150 });
      const c = await p.checkOut();
      const o = await outcome(c.command('admin', { ping: 1 }));
      expect(o.error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect((o.error as MongoNetworkError).errorLabels.size).to.equal(0);
      expect(c.errored).to.equal(true);
      p.checkIn(c);
      expect(trail(events).slice(-2)).to.deep.equal(['ConnectionCheckedIn', 'ConnectionClosed(error)']);
    });

    it('during the TCP connect (the SYN unanswered: a full accept queue): a labelled MongoNetworkTimeoutError "during connect"', async function () {
      if (process.platform !== 'linux' || spawnSync('python3', ['-V']).error !== undefined) this.skip();
      // A listening socket that never accepts, its queue filled: the kernel drops further SYNs.
      const listener: ChildProcess = spawn('python3', ['-c', 'import socket,time\ns=socket.socket()\ns.bind(("127.0.0.1",0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)']);
      const fillers: net.Socket[] = [];
      try {
        const port = Number(await new Promise<string>((resolve) => listener.stdout!.once('data', (d) => resolve(String(d).trim()))));
        for (let i = 0; i < 3; i++) fillers.push(net.connect({ host: '127.0.0.1', port }).on('error', () => undefined));
        await new Promise((resolve) => setTimeout(resolve, 100));
        const p = new ConnectionPool({ address: `127.0.0.1:${port}`, connectionOptions: { connectTimeoutMS: 150 } });
        pools.push(p);
        p.ready();
        const o = await outcome(p.checkOut());
        expect(o.error).to.be.instanceOf(MongoNetworkTimeoutError);
        expect((o.error as Error).message).to.equal(`connecting to 127.0.0.1:${port} timed out after 150 ms (during connect)`);
        expect([...(o.error as MongoNetworkError).errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
      } finally {
        for (const s of fillers) s.destroy();
        listener.kill();
      }
    });
  });

  describe('an idle pooled connection whose peer closed it', function () {
    for (const kind of ['rst', 'fin'] as const) {
      it(`${kind}: the next checkout closes it (error) and establishes another, and the command on it succeeds`, async function () {
        const { pool: p, events } = pool();
        const first = await p.checkOut();
        p.checkIn(first);
        proxy.cutAll(kind);
        expect(await eventually(() => first.errored, 1000)).to.equal(true);
        const o = await outcome(p.withConnection((c) => c.command('admin', { ping: 1 })));
        expect(o.value).to.include({ ok: 1 });
        expect(trail(events).slice(5)).to.deep.equal([
          'ConnectionCheckOutStarted',
          'ConnectionClosed(error)',
          'ConnectionCreated',
          'ConnectionReady',
          'ConnectionCheckedOut',
          'ConnectionCheckedIn',
        ]);
        expect(events.some((e) => e.type === 'ConnectionPoolCleared')).to.equal(false);
      });
    }
  });

  describe('a slow network', function () {
    it('a handshake and a reply arriving one byte per write both succeed', async function () {
      proxy.trickleMS = 0.5;
      const { pool: p } = pool({ connectTimeoutMS: 10_000 });
      const c = await p.checkOut();
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      p.checkIn(c);
    });

    it('a server that stops reading a large command: the reply timeout covers the write, the connection is errored; one that resumes gets it', async function () {
      const { pool: p } = pool();
      const big = 'x'.repeat(4 * 1024 * 1024);
      const c = await p.checkOut();
      proxy.paused = true;
      proxy.applyPause();
      const o = await outcome(c.command('admin', { ping: 1, big }, { timeoutMS: 300 }));
      expect(o.error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(c.errored).to.equal(true);
      p.checkIn(c);
      proxy.paused = false;
      proxy.applyPause();
      const d = await p.checkOut();
      proxy.paused = true;
      proxy.applyPause();
      setTimeout(() => {
        proxy.paused = false;
        proxy.applyPause();
      }, 200);
      expect(await d.command('admin', { ping: 1, big })).to.include({ ok: 1 });
      p.checkIn(d);
    });
  });

  describe('through connect() (SDAM error handling)', function () {
    it('every connection reset: the monitor clears the pool once, and the next command succeeds on a new connection', async function () {
      const client = connect(`mongodb://${proxy.address}/?heartbeatFrequencyMS=500&connectTimeoutMS=1000`);
      const events: string[] = [];
      client.events$.subscribe((e) => events.push(e.type));
      try {
        await client.command('admin', { ping: 1 });
        proxy.cutAll('rst');
        expect(await eventually(() => events.includes('ConnectionPoolCleared'), 2000)).to.equal(true);
        expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
        expect(events.filter((t) => t === 'ConnectionPoolCleared')).to.have.length(1);
      } finally {
        await client.close();
      }
    });

    it('an idle pooled connection the server closed (the monitor\'s left alone): the next command succeeds on a new connection, nothing cleared', async function () {
      const client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500`);
      const events: ConnectionPoolEvent[] = [];
      client.events$.subscribe((e) => {
        if (!e.type.startsWith('ServerHeartbeat')) events.push(e as ConnectionPoolEvent);
      });
      try {
        await client.command('admin', { ping: 1 });
        const pool = client.pools.get(server.address)!;
        expect(pool.snapshot().availableConnectionCount).to.equal(1);
        expect(server.closeConnections((c) => !c.awaitingHello)).to.be.above(0);
        // The FIN reaches the client a moment later; a command sent before it would go out on the closed connection.
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
        expect(trail(events).slice(-6)).to.deep.equal([
          'ConnectionCheckOutStarted',
          'ConnectionClosed(error)',
          'ConnectionCreated',
          'ConnectionReady',
          'ConnectionCheckedOut',
          'ConnectionCheckedIn',
        ]);
        expect(events.some((e) => e.type === 'ConnectionPoolCleared')).to.equal(false);
      } finally {
        await client.close();
      }
    });

    it('a reply that does not come within socketTimeoutMS: MongoNetworkTimeoutError, the connection closed (error), the pool not cleared', async function () {
      const client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500&socketTimeoutMS=150`);
      const events: ConnectionPoolEvent[] = [];
      client.events$.subscribe((e) => {
        if (!e.type.startsWith('ServerHeartbeat')) events.push(e as ConnectionPoolEvent);
      });
      try {
        await client.command('admin', { ping: 1 });
        // Held 3 s, far past the 150 ms: a reply held 600 ms could arrive within a loaded runner's pause of the client
        // and be read before the timeout, as a reply received during a blocked event loop is.
        server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 3000 } });
        const o = await outcome(client.command('admin', { ping: 1 }));
        expect(o.error).to.be.instanceOf(MongoNetworkTimeoutError);
        // SDAM "Error handling": a network timeout on an application connection neither marks the server Unknown nor
        // clears its pool.
        expect(events.some((e) => e.type === 'ConnectionPoolCleared')).to.equal(false);
        expect(trail(events).slice(-2)).to.deep.equal(['ConnectionCheckedIn', 'ConnectionClosed(error)']);
        expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      } finally {
        server.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'off' });
        await client.close();
      }
    });

    it('a network gone silent: the monitor times out, clears with interruptInUseConnections, and the command in flight fails with a retryable PoolClearedError', async function () {
      const client = connect(`mongodb://${proxy.address}/?heartbeatFrequencyMS=500&connectTimeoutMS=300&serverSelectionTimeoutMS=1000`);
      const cleared: boolean[] = [];
      client.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolCleared') cleared.push(e.interruptInUseConnections);
      });
      try {
        await client.command('admin', { ping: 1 });
        proxy.blackhole = true;
        const o = await outcome(client.command('admin', { ping: 1 }));
        expect(o.settled).to.equal(1);
        expect(o.error).to.be.instanceOf(PoolClearedError);
        expect((o.error as PoolClearedError).hasErrorLabel('RetryableError')).to.equal(true);
        expect(cleared).to.deep.equal([true]);
        proxy.blackhole = false;
        expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      } finally {
        await client.close();
      }
    });
  });
});
