/**
 * Property-based test of the reducer's deadlines on virtual time: random scripts of checkouts (normal and high
 * priority, some with their own timeoutMS), cancellations, check-ins, establishment outcomes (load-balanced ones with
 * a handshake reported first, or not), service and pool clears, drain, close and time passing, with a Background
 * Thread, a bounded WaitQueue and leak detection, and observers coming and going. After every action:
 * - no checkout still waits past its waitQueueTimeoutMS deadline, unless it started the establishment it waits on
 *   (CMAP "WaitQueue", "Checking Out a Connection"), and each one without a deadline has an establishment of its own;
 * - a checkout waiting with a deadline has the WaitQueue timer armed by that deadline; a closed pool has none armed;
 * - every checkout settles once, and the counts agree with the records, the services and the events;
 * - leak detection's timer is armed only while a connection is checked out (and the pool has leak detection on).
 *
 * A fixed seed; PROPERTY_SEED and PROPERTY_RUNS run others.
 */
import { expect } from 'chai';
import * as fc from 'fast-check';
import { Bench, FakeConnection, TestWaiter } from './harness';
import type { Waiter } from '../../lib/pool/wait-queue';
import { envInt, pick } from '../support/property';

type Step =
  | { t: 'checkOut'; high: boolean; own: number }
  | { t: 'cancel'; i: number; timeout: boolean }
  | { t: 'checkIn'; i: number }
  | { t: 'handshake'; i: number; service: number }
  | { t: 'succeed'; i: number; service: number }
  | { t: 'fail'; i: number; clear: boolean; service: number }
  | { t: 'clear'; interrupt: boolean; service: number }
  | { t: 'ready' }
  | { t: 'drain'; ms: number }
  | { t: 'close' }
  | { t: 'observe'; on: boolean }
  | { t: 'advance'; ms: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ high: fc.boolean(), own: fc.constantFrom(0, 0, 30, 70) }).map((r) => ({ t: 'checkOut', ...r }) as Step) },
  { weight: 2, arbitrary: fc.record({ i: fc.nat(20), timeout: fc.boolean() }).map((r) => ({ t: 'cancel', ...r }) as Step) },
  { weight: 4, arbitrary: fc.nat(20).map((i) => ({ t: 'checkIn', i }) as Step) },
  { weight: 3, arbitrary: fc.record({ i: fc.nat(20), service: fc.nat(2) }).map((r) => ({ t: 'handshake', ...r }) as Step) },
  { weight: 4, arbitrary: fc.record({ i: fc.nat(20), service: fc.nat(2) }).map((r) => ({ t: 'succeed', ...r }) as Step) },
  { weight: 1, arbitrary: fc.record({ i: fc.nat(20), clear: fc.boolean(), service: fc.nat(2) }).map((r) => ({ t: 'fail', ...r }) as Step) },
  { weight: 1, arbitrary: fc.record({ interrupt: fc.boolean(), service: fc.nat(2) }).map((r) => ({ t: 'clear', ...r }) as Step) },
  { weight: 2, arbitrary: fc.constant({ t: 'ready' } as Step) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 200 }).map((ms) => ({ t: 'drain', ms }) as Step) },
  { weight: 1, arbitrary: fc.constant({ t: 'close' } as Step) },
  { weight: 1, arbitrary: fc.boolean().map((on) => ({ t: 'observe', on }) as Step) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 120 }).map((ms) => ({ t: 'advance', ms }) as Step) },
);

const options = fc
  .record({
    maxPoolSize: fc.integer({ min: 0, max: 4 }),
    minPoolSize: fc.integer({ min: 0, max: 3 }),
    maxConnecting: fc.integer({ min: 1, max: 3 }),
    waitQueueTimeoutMS: fc.constantFrom(0, 40, 100),
    maxWaitQueueSize: fc.constantFrom(0, 0, 1, 3),
    leakDetectionThresholdMS: fc.constantFrom(0, 0, 60),
    backgroundThreadIntervalMS: fc.constantFrom(-1, 25),
    loadBalanced: fc.boolean(),
  })
  .map((o) => ({ ...o, minPoolSize: o.maxPoolSize === 0 ? o.minPoolSize : Math.min(o.minPoolSize, o.maxPoolSize) }));

const SEED = envInt('PROPERTY_SEED', 20261126);
const RUNS = envInt('PROPERTY_RUNS', 300);


describe('reduce (property: deadlines, claims and services on virtual time)', function () {
  // A few ms a script on a loaded machine; long PROPERTY_RUNS runs get time in proportion.
  this.timeout(Math.max(120_000, RUNS * 20));

  it('times out every checkout by its deadline, leaves no timer behind, settles each once and keeps the counts', function () {
    fc.assert(
      fc.property(options, fc.array(step, { minLength: 1, maxLength: 100 }), (opts, steps) => {
        const { loadBalanced, ...poolOptions } = opts;
        const b = new Bench(poolOptions, true, loadBalanced);
        const services = ['0'.repeat(24), '1'.repeat(24), '2'.repeat(24)];
        const waiters: Waiter<FakeConnection>[] = [];
        /** Checkouts that started the establishment they wait on (no waitQueueTimeoutMS applies to them then). */
        const held: FakeConnection[] = [];
        /** The service each pending connection reported at its handshake. */
        const handshakes = new Map<number, string>();

        const check = (where: string): void => {
          const s = b.state;
          const now = b.time;
          // Deadlines.
          let earliest = Infinity;
          for (const w of waiters) {
            if (w.state !== 'queued' && w.state !== 'claimant') continue;
            if (w.deadline === undefined) continue;
            expect(w.deadline, `${where}: a checkout still waits past its deadline (${w.state})`).to.be.greaterThan(now);
            earliest = Math.min(earliest, w.deadline);
          }
          // A checkout waits without a deadline only on an establishment it started (and still its own).
          if (poolOptions.waitQueueTimeoutMS > 0) {
            for (const w of waiters) {
              if (w.state !== 'claimant' || w.deadline !== undefined) continue;
              const own = [...s.records.values()].filter((r) => r.state === 'pending' && r.starter === w);
              expect(own.length, `${where}: checkout #${waiters.indexOf(w)} waits without a deadline on no establishment of its own`).to.equal(1);
            }
          }
          if (earliest !== Infinity) {
            const at = b.timers.get('waitQueue');
            expect(at, `${where}: a checkout waits with a deadline (${earliest}), but no WaitQueue timer is armed`).to.not.equal(undefined);
            expect(at!, `${where}: the WaitQueue timer is armed after the earliest deadline`).to.be.at.most(earliest);
          }
          expect(s.waitTimerAt, `${where}: waitTimerAt and the armed timer agree`).to.equal(b.timers.get('waitQueue'));
          if (s.state === 'closed') {
            expect(b.timers.has('waitQueue'), `${where}: a closed pool keeps a WaitQueue timer`).to.equal(false);
            expect(b.timers.has('background'), `${where}: a closed pool keeps its Background Thread`).to.equal(false);
          }
          // Leak detection: armed only while it has something to watch.
          const inUse = [...s.records.values()].filter((r) => r.state === 'in use').length;
          if (poolOptions.leakDetectionThresholdMS === 0) expect(b.timers.has('leakDetection'), `${where}: leak timer without leak detection`).to.equal(false);
          if (inUse === 0 && s.state === 'closed') expect(b.timers.has('leakDetection'), `${where}: leak timer on a finished pool`).to.equal(false);
          // Counts.
          const byState = { pending: 0, available: 0, 'in use': 0, closed: 0 };
          for (const rec of s.records.values()) byState[rec.state]++;
          expect(byState.pending, `${where}: pendingConnectionCount`).to.equal(s.pendingConnectionCount);
          expect(byState.available, `${where}: availableConnectionCount`).to.equal(s.available.size);
          expect(b.pending.size, `${where}: establishments under way = pending records`).to.equal(s.pendingConnectionCount);
          const waiting = waiters.filter((w) => w.state === 'queued' || w.state === 'claimant');
          expect(waiting.length, `${where}: waitQueueLength`).to.equal(s.waitQueue.length + s.claimants.length);
          expect(s.claimants.length, `${where}: every claim has an establishment`).to.be.at.most(s.claimablePendingCount);
          if (s.claimants.length < s.claimablePendingCount) expect(s.waitQueue.length, `${where}: an unclaimed establishment while the WaitQueue waits`).to.equal(0);
          if (opts.maxPoolSize > 0) expect(s.records.size, `${where}: total <= maxPoolSize`).to.be.at.most(opts.maxPoolSize);
          expect(s.pendingConnectionCount, `${where}: pending <= maxConnecting`).to.be.at.most(opts.maxConnecting);
          const perService = new Map<string, number>();
          for (const rec of s.records.values()) if (rec.serviceId !== undefined) perService.set(rec.serviceId, (perService.get(rec.serviceId) ?? 0) + 1);
          expect([...s.serviceGenerations].map(([id, g]) => [id, g.connectionCount]), `${where}: service counts`).to.have.deep.members([...perService]);
          for (const id of s.handshakeGenerations?.keys() ?? []) {
            expect(s.records.get(id)?.state, `${where}: a handshake generation kept for connection ${id}, not pending`).to.equal('pending');
          }
          const settled = new Map<Waiter<FakeConnection>, number>();
          for (const o of b.outcomes) settled.set(o.waiter, (settled.get(o.waiter) ?? 0) + 1);
          for (const [w, n] of settled) expect(n, `${where}: checkout #${waiters.indexOf(w)} settled ${n} times`).to.equal(1);
        };

        let n = 0;
        for (const st of steps) {
          const before = b.outcomes.length;
          switch (st.t) {
            case 'checkOut': {
              const waiter = new TestWaiter();
              waiters.push(waiter);
              b.dispatch({ type: 'checkOut', waiter, high: st.high });
              break;
            }
            case 'cancel': {
              const w = pick(waiters.filter((x) => x.state !== 'done'), st.i);
              if (w === undefined) break;
              if (st.timeout) b.dispatch({ type: 'cancel', waiter: w, timeoutMS: 30 });
              else b.cancel(w);
              break;
            }
            case 'checkIn': {
              const c = pick(held, st.i);
              if (c) {
                held.splice(held.indexOf(c), 1);
                b.checkIn(c);
              }
              break;
            }
            case 'handshake': {
              const id = pick([...b.pending], st.i);
              if (id !== undefined) {
                handshakes.set(id, services[st.service]!);
                b.dispatch({ type: 'handshakeDone', id, serviceId: services[st.service]! });
              }
              break;
            }
            case 'succeed': {
              const id = pick([...b.pending], st.i);
              if (id !== undefined) b.succeed(id, loadBalanced ? (handshakes.get(id) ?? services[st.service]) : undefined);
              break;
            }
            case 'fail': {
              const id = pick([...b.pending], st.i);
              if (id === undefined) break;
              const error = new Error('boom') as Error & { serviceId?: unknown };
              if (loadBalanced && handshakes.has(id)) (error as unknown as Record<string, unknown>).serviceId = handshakes.get(id);
              b.failEstablishment(id, error, st.clear);
              break;
            }
            case 'clear':
              b.dispatch(
                loadBalanced
                  ? { type: 'clear', interruptInUseConnections: false, serviceId: services[st.service] }
                  : { type: 'clear', interruptInUseConnections: st.interrupt },
              );
              break;
            case 'ready':
              b.dispatch({ type: 'ready' });
              break;
            case 'drain':
              b.dispatch({ type: 'drain', timeoutMS: st.ms });
              break;
            case 'close':
              b.dispatch({ type: 'close' });
              break;
            case 'observe':
              b.state.observed = st.on;
              break;
            case 'advance':
              b.advanceTo(b.time + st.ms);
              break;
          }
          for (const o of b.outcomes.slice(before)) {
            if (o.kind !== 'deliver') continue;
            expect(held, 'a connection is never handed out twice').to.not.include(o.connection);
            const rec = b.state.records.get(o.connection!.id)!;
            const current = loadBalanced ? b.state.serviceGenerations.get(rec.serviceId!)!.generation : b.state.generation;
            expect(rec.generation, 'never hands out a stale connection').to.equal(current);
            held.push(o.connection!);
          }
          check(`step ${n++} (${JSON.stringify(st)})`);
        }

        // Wind down: close, finish every establishment, return every connection.
        b.dispatch({ type: 'close' });
        for (const id of [...b.pending]) b.succeed(id, loadBalanced ? services[0] : undefined);
        for (const c of held.splice(0)) b.checkIn(c);
        check('wind down');
        for (const w of waiters) {
          expect(b.outcomes.filter((o) => o.waiter === w), 'every checkout settled exactly once').to.have.length(1);
        }
        expect(b.state.records.size, 'no connection left in a closed pool').to.equal(0);
        expect([...b.timers.keys()], 'no timer left armed once the pool is finished').to.deep.equal([]);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
