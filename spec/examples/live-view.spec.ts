/**
 * The demo's live view: the pure renderer (examples/live-view.ts) at 80 and 160 columns, the in-place terminal
 * frames (examples/live-screen.ts), and the statistics behind it (examples/live-stats.ts), whose memory stays
 * bounded however many checkouts it records.
 */
import { expect } from 'chai';
import { InvalidOptionError, MonitorClosedError, type ClientEvent, type PoolSnapshot } from '../../lib';
import { LiveStats } from '../../examples/live-stats';
import { enterScreen, frame, leaveScreen } from '../../examples/live-screen';
import { CELL_LEGEND, renderLiveView, sparkline, type CellState, type LiveViewModel } from '../../examples/live-view';
import { fullGc } from '../support/full-gc';

const cells = (states: [CellState, number][]): { id: number; state: CellState }[] => {
  let id = 0;
  return states.flatMap(([state, n]) => Array.from({ length: n }, () => ({ id: ++id, state })));
};

/** Midway through a 5 s run, moments after the clear: the old connections closing, the new ones busy. */
const MODEL: LiveViewModel = {
  endpoint: 'embedded 127.0.0.1:40123',
  elapsedMS: 3250,
  durationMS: 5000,
  workers: 300,
  poolState: 'ready',
  generation: 1,
  maxPoolSize: 10,
  waitQueueLength: 290,
  checkouts: 81_234,
  connections: cells([['closing', 4], ['in use', 7], ['available', 2], ['pending', 1]]),
  checkoutsPerSecond: [24_100, 26_800, 9_800, 27_350],
  waitQueue: [290, 290, 120, 290],
  waitP50MS: [9.1, 10.2, 3.2, 10.4],
  waitP99MS: [21.5, 23.9, 180.2, 24.7],
  log: [
    { atMS: 0, text: 'heartbeat ok 0.6 ms' },
    { atMS: 500, text: 'heartbeat ok 0.4 ms' },
    { atMS: 1000, text: 'heartbeat ok 0.4 ms' },
    { atMS: 1500, text: 'heartbeat ok 0.5 ms' },
    { atMS: 2000, text: 'heartbeat ok 0.4 ms' },
    { atMS: 2500, text: 'pool cleared' },
    { atMS: 2531, text: 'heartbeat ok 31.2 ms' },
    { atMS: 2531, text: 'pool ready' },
    { atMS: 3031, text: 'heartbeat ok 0.4 ms' },
  ],
};

const EVENTS_80_AND_160 = [
  '',
  'events',
  '   0.0 s  heartbeat ok 0.6 ms',
  '   0.5 s  heartbeat ok 0.4 ms',
  '   1.0 s  heartbeat ok 0.4 ms',
  '   1.5 s  heartbeat ok 0.5 ms',
  '   2.0 s  heartbeat ok 0.4 ms',
  '   2.5 s  pool cleared',
  '   2.5 s  heartbeat ok 31.2 ms',
  '   2.5 s  pool ready',
  '   3.0 s  heartbeat ok 0.4 ms',
];

/** The lines every width shares (the title, the sparkline rows and the log aside). */
const POOL_LINES = [
  'pool ready · generation 1 · 300 workers · 81234 checkouts',
  '',
  'connections 10 of 10: 7 in use, 2 available, 1 pending, 4 closing',
  '× × × × █ █ █ █ █ █ █ ▒ ▒ ░',
  '█ in use  ▒ available  ░ pending  × closing',
  '',
];

/** A fake clock for LiveStats, in ms. */
class Clock {
  t = 1_000_000;
  readonly now = (): number => this.t;
}

const checkedOut = (duration: number, connectionId = 1): ClientEvent =>
  ({ type: 'ConnectionCheckedOut', address: 'h:1', time: 0, connectionId, duration }) as ClientEvent;

const snapshot = (s: Partial<PoolSnapshot>): PoolSnapshot => ({
  address: 'h:1',
  state: 'ready',
  draining: false,
  generation: 0,
  totalConnectionCount: 0,
  availableConnectionCount: 0,
  pendingConnectionCount: 0,
  inUseConnectionCount: 0,
  waitQueueLength: 0,
  serviceGenerations: [],
  ...s,
});

const gc = fullGc;

const RUN = { endpoint: 'e', durationMS: 10_000, workers: 1, maxPoolSize: 10 };

describe('examples/live-view', function () {
  describe('renderLiveView', function () {
    it('at 80 columns: the run, the pool, a cell per connection, the WaitQueue, three sparklines, the event log', function () {
      const lines = renderLiveView(MODEL, 80, 24);
      expect(lines).to.deep.equal([
        'rxcmap demo · embedded 127.0.0.1:40123                            3.3 s of 5.0 s',
        ...POOL_LINES,
        'WaitQueue     ██▄█                                                           290',
        'checkouts/s   ▇█▄█                                                         27350',
        'wait p50 ms   ▇█▃█                                                        10.400',
        'wait p99 ms   ▂▂█▂                                                        24.700',
        ...EVENTS_80_AND_160,
      ]);
      expect(lines.length).to.be.at.most(24);
      for (const line of lines) expect(line.length, line).to.be.at.most(80);
    });

    it('at 160 columns: the same, the sparklines and the title spread to the width', function () {
      const lines = renderLiveView(MODEL, 160, 24);
      expect(lines).to.deep.equal([
        `rxcmap demo · embedded 127.0.0.1:40123${' '.repeat(108)}3.3 s of 5.0 s`,
        ...POOL_LINES,
        `WaitQueue     ██▄█${' '.repeat(139)}290`,
        `checkouts/s   ▇█▄█${' '.repeat(137)}27350`,
        `wait p50 ms   ▇█▃█${' '.repeat(136)}10.400`,
        `wait p99 ms   ▂▂█▂${' '.repeat(136)}24.700`,
        ...EVENTS_80_AND_160,
      ]);
      expect(lines.length).to.be.at.most(24);
      for (const line of lines) expect(line.length, line).to.be.at.most(160);
      expect(lines[0]).to.have.lengthOf(160);
      expect(lines[7]).to.have.lengthOf(160);
    });

    it('keeps to 24 lines and the width with a long history, many connections and a long log: newest first to stay', function () {
      const model: LiveViewModel = {
        ...MODEL,
        endpoint: `mongodb://${'h'.repeat(200)}:27017/`,
        connections: cells([['in use', 100], ['available', 100], ['pending', 50], ['closing', 150]]),
        checkoutsPerSecond: Array.from({ length: 500 }, (_, i) => i % 8),
        log: Array.from({ length: 100 }, (_, i) => ({ atMS: i * 500, text: `entry ${i} ${'x'.repeat(300)}` })),
      };
      for (const width of [80, 79, 120, 160, 200]) {
        const lines = renderLiveView(model, width, 24);
        expect(lines, `width ${width}`).to.have.lengthOf(24);
        for (const line of lines) expect(line.length, `width ${width}: ${line}`).to.be.at.most(width);
        // The cell grid: 3 full rows, the last ending with how many more connections there are.
        const grid = lines.slice(4, 7);
        const shown = grid.join(' ').split(' ').filter((g) => g.length === 1).length;
        expect(grid[2], `width ${width}`).to.match(new RegExp(` \\+${400 - shown}$`));
        expect(lines[7]).to.equal(CELL_LEGEND);
        // The sparkline shows the newest points: the series ends with 496 % 8 .. 499 % 8 = 0 .. 3.
        expect(lines[10], `width ${width}`).to.match(/▁▂▃▄ +3$/);
        // The log shows its newest entries, as many as fit.
        expect(lines[23].startsWith('  49.5 s  entry 99 '), lines[23]).to.equal(true);
      }
      for (let width = 0; width <= 200; width++) {
        for (const line of renderLiveView(model, width, 24)) expect(line.length, `width ${width}: ${line}`).to.be.at.most(width);
      }
      expect(renderLiveView(model, 80, 5)).to.have.lengthOf(5);
      expect(renderLiveView(model, 80, 0)).to.deep.equal([]);
    });

    it('with no connections and no samples yet', function () {
      const none = { connections: [], checkoutsPerSecond: [], waitQueue: [], waitP50MS: [], waitP99MS: [], log: [] };
      const empty: LiveViewModel = { ...MODEL, ...none };
      const lines = renderLiveView(empty, 80, 24);
      expect(lines[3]).to.equal('connections 0 of 10: 0 in use, 0 available, 0 pending, 0 closing');
      expect(lines[4]).to.equal('(no connections)');
      expect(lines[8]).to.equal(`checkouts/s${' '.repeat(68)}0`);
      expect(lines[9]).to.equal(`wait p50 ms${' '.repeat(68)}-`);
      expect(lines).to.have.lengthOf(11); // no log
    });
  });

  it('sparkline: the largest shown value is █, 0 is ▁, only the newest `width` values', function () {
    expect(sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8)).to.equal('▁▂▃▄▅▆▇█');
    expect(sparkline([100, 0, 7, 14], 3)).to.equal('▁▅█');
    expect(sparkline([0, 0], 5)).to.equal('▁▁');
    expect(sparkline([NaN, -1, 2], 3)).to.equal('▁▁█');
    expect(sparkline([1, 2], 0)).to.equal('');
  });

  it('frames: the cursor hidden once, then home + each line cleared to its end + the rest of the screen cleared', function () {
    expect(enterScreen()).to.equal('\x1b[?25l\x1b[2J\x1b[H');
    expect(frame(['ab', '', 'c'])).to.equal('\x1b[Hab\x1b[K\r\n\x1b[K\r\nc\x1b[K\x1b[J');
    expect(frame(['ab'])).to.not.include('\x1b[2J'); // no full clear between frames: no flicker
    expect(leaveScreen()).to.equal('\r\n\x1b[?25h');
  });

  describe('LiveStats', function () {
    it('one point per 1 s window: checkouts per second, the longest WaitQueue, wait p50 / p99 in ms', function () {
      const clock = new Clock();
      const stats = new LiveStats({ now: clock.now });
      stats.start();
      for (let i = 1; i <= 100; i++) stats.onEvent(checkedOut(i / 10)); // 0.1 .. 10 ms
      stats.onSnapshot(snapshot({ waitQueueLength: 42, generation: 3 }));
      stats.onSnapshot(snapshot({ waitQueueLength: 7, generation: 3 }));
      clock.t += 1000;
      for (let i = 0; i < 50; i++) stats.onEvent(checkedOut(2));
      clock.t += 500; // half of the second window
      const model = stats.model(RUN);
      expect(model.elapsedMS).to.equal(1500);
      expect(model.checkouts).to.equal(150);
      expect(model.generation).to.equal(3);
      expect(model.waitQueueLength).to.equal(7);
      expect(model.checkoutsPerSecond).to.deep.equal([100, 100]); // 50 in the half second so far
      expect(model.waitQueue).to.deep.equal([42, 7]);
      // Histogram precision: 3 significant digits (a value reads as the highest of its bucket, here + 3 µs at most).
      expect(model.waitP50MS).to.have.lengthOf(2);
      expect(model.waitP50MS[0]).to.be.within(5, 5.005);
      expect(model.waitP50MS[1]).to.be.within(2, 2.002);
      expect(model.waitP99MS[0]).to.be.within(9.9, 9.91);
      expect(model.waitP99MS[1]).to.be.within(2, 2.002);
      const all = stats.waitPercentiles();
      expect(all.p50).to.be.within(2.5, 2.503); // 70 of the 150 waits are 2 ms or less: the 75th is 2.5 ms
      expect(all.p99).to.be.within(9.9, 9.91);
    });

    it('connections by id: pending, available, in use, then closing for closingMS', function () {
      const clock = new Clock();
      const stats = new LiveStats({ now: clock.now, closingMS: 1000 });
      const e = (type: string, connectionId: number): ClientEvent =>
        ({ type, address: 'h:1', time: 0, connectionId, duration: 1 }) as ClientEvent;
      for (const [type, id] of [['ConnectionCreated', 2], ['ConnectionCreated', 1], ['ConnectionReady', 1], ['ConnectionCreated', 3]] as const) {
        stats.onEvent(e(type, id));
      }
      stats.onEvent(e('ConnectionReady', 3));
      stats.onEvent(checkedOut(1, 3));
      stats.onEvent({ type: 'ConnectionClosed', address: 'h:1', time: 0, connectionId: 2, reason: 'stale' });
      expect(stats.model(RUN).connections).to.deep.equal([
        { id: 1, state: 'available' },
        { id: 2, state: 'closing' },
        { id: 3, state: 'in use' },
      ]);
      clock.t += 1000;
      expect(stats.model(RUN).connections.map((c) => c.id)).to.deep.equal([1, 3]);
    });

    it('logs heartbeats and clears as they happen, at ms since the start, keeping the newest logLength', function () {
      const clock = new Clock();
      const stats = new LiveStats({ now: clock.now, logLength: 3 });
      stats.start();
      clock.t += 250;
      stats.onEvent({ type: 'ServerHeartbeatSucceeded', address: 'h:1', connectionId: 0, time: 0, awaited: false, duration: 0.42, reply: {} });
      stats.onEvent({ type: 'ConnectionPoolCleared', address: 'h:1', time: 0, interruptInUseConnections: false });
      const error = new Error('ECONNRESET');
      stats.onEvent({ type: 'ServerHeartbeatFailed', address: 'h:1', connectionId: 0, time: 0, awaited: false, duration: 3, error });
      stats.onEvent({ type: 'ConnectionPoolReady', address: 'h:1', time: 0 });
      expect(stats.model(RUN).log).to.deep.equal([
        { atMS: 250, text: 'pool cleared' },
        { atMS: 250, text: 'heartbeat failed after 3.0 ms: ECONNRESET' },
        { atMS: 250, text: 'pool ready' },
      ]);
      // The check a close() ended is not logged as a failed heartbeat.
      stats.onEvent({ type: 'ServerHeartbeatFailed', address: 'h:1', connectionId: 0, time: 0, awaited: true, duration: 120, error: new MonitorClosedError('h:1') });
      expect(stats.model(RUN).log.at(-1)).to.deep.equal({ atMS: 250, text: 'monitor closed' });
    });

    it('bounded memory: a million waits fill histograms, not lists; the series keep historyLength windows', function () {
      const clock = new Clock();
      const stats = new LiveStats({ now: clock.now, historyLength: 60 });
      stats.start();
      gc();
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 1_000_000; i++) {
        stats.onEvent(checkedOut((i % 1000) / 100)); // 0 .. 9.99 ms
        if (i % 5000 === 4999) clock.t += 1000; // 200 windows
      }
      gc(); // the events themselves are garbage: only what the statistics keep remains
      const grown = process.memoryUsage().heapUsed - before;
      expect(stats.checkouts).to.equal(1_000_000);
      expect(stats.recordedWaits).to.equal(1_000_000); // every sample is in the histograms
      // A list of a million numbers alone takes 8 MB; the histograms take the same memory for 1 sample or 1e6.
      expect(grown, `heap grew ${(grown / 1e6).toFixed(1)} MB`).to.be.below(1e6);
      const model = stats.model(RUN);
      expect(model.checkoutsPerSecond).to.have.lengthOf(60);
      expect(model.waitP99MS).to.have.lengthOf(60);
      expect(model.checkoutsPerSecond.at(-1)).to.equal(5000);
      const { p50, p99 } = stats.waitPercentiles();
      expect(p50).to.be.closeTo(5, 0.05); // histogram precision: 3 significant digits
      expect(p99).to.be.closeTo(9.9, 0.05);
    });

    it('refuses a window or history that is not a positive integer', function () {
      expect(() => new LiveStats({ windowMS: 0 })).to.throw(InvalidOptionError, /windowMS.*an integer >= 1/);
      expect(() => new LiveStats({ historyLength: 1.5 })).to.throw(InvalidOptionError, /historyLength.*1\.5.*an integer >= 1/);
    });
  });
});
