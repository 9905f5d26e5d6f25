/**
 * Property-based test of the reducer: random option sets and random action sequences (checkouts, cancellations,
 * check-ins, establishment outcomes, clears, ready, close, time passing), checking after every action that the pool
 * keeps its invariants (its counts; its lists of available and in-use connections, and the counts by purpose, against
 * the connections themselves), and at the end that nothing was lost or leaked. Scripts are drawn at every length up to
 * 80 steps (fast-check's default bias would keep them to a handful).
 *
 * A fixed seed, as in the pool property test, so that every run checks the same scripts; PROPERTY_SEED and
 * PROPERTY_RUNS run another seed or more scripts.
 */
import { expect } from 'chai';
import * as fc from 'fast-check';
import { Bench, FakeConnection, TestWaiter } from './harness';
import type { ConnectionRecord, PoolState } from '../../lib/pool/state';
import type { Waiter } from '../../lib/pool/wait-queue';
import { envInt, pick } from '../support/property';

type Step =
  | { t: 'checkOut' }
  | { t: 'cancel'; i: number }
  | { t: 'checkIn'; i: number }
  | { t: 'errorInUse'; i: number }
  | { t: 'succeed'; i: number; service: number }
  | { t: 'fail'; i: number; clear: boolean }
  | { t: 'clear'; interrupt: boolean; service: number }
  | { t: 'ready' }
  | { t: 'close' }
  | { t: 'advance'; ms: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ t: 'checkOut' } as Step) },
  { weight: 2, arbitrary: fc.nat(20).map((i) => ({ t: 'cancel', i }) as Step) },
  { weight: 5, arbitrary: fc.nat(20).map((i) => ({ t: 'checkIn', i }) as Step) },
  { weight: 1, arbitrary: fc.nat(20).map((i) => ({ t: 'errorInUse', i }) as Step) },
  { weight: 5, arbitrary: fc.record({ i: fc.nat(20), service: fc.nat(2) }).map((r) => ({ t: 'succeed', ...r }) as Step) },
  { weight: 1, arbitrary: fc.record({ i: fc.nat(20), clear: fc.boolean() }).map((r) => ({ t: 'fail', ...r }) as Step) },
  { weight: 1, arbitrary: fc.record({ interrupt: fc.boolean(), service: fc.nat(2) }).map((r) => ({ t: 'clear', ...r }) as Step) },
  { weight: 2, arbitrary: fc.constant({ t: 'ready' } as Step) },
  { weight: 1, arbitrary: fc.constant({ t: 'close' } as Step) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 150 }).map((ms) => ({ t: 'advance', ms }) as Step) },
);

const options = fc
  .record({
    maxPoolSize: fc.integer({ min: 0, max: 5 }),
    minPoolSize: fc.integer({ min: 0, max: 3 }),
    maxConnecting: fc.integer({ min: 1, max: 3 }),
    waitQueueTimeoutMS: fc.constantFrom(0, 50, 100),
    maxIdleTimeMS: fc.constantFrom(0, 100),
    backgroundThreadIntervalMS: fc.constantFrom(-1, 40),
    loadBalanced: fc.boolean(),
  })
  .map((o) => ({ ...o, minPoolSize: o.maxPoolSize === 0 ? o.minPoolSize : Math.min(o.minPoolSize, o.maxPoolSize) }));

/** The records linked in `list` from its head, checking each link back and the list's tail and size on the way. */
function linked(list: PoolState<FakeConnection>['inUse'], what: string): ConnectionRecord<FakeConnection>[] {
  const out: ConnectionRecord<FakeConnection>[] = [];
  let prev: ConnectionRecord<FakeConnection> | undefined;
  for (let rec = list.head; rec !== undefined && out.length <= list.size; rec = rec.next) {
    expect(rec.prev, `${what}: the link back of connection ${rec.id}`).to.equal(prev);
    out.push(rec);
    prev = rec;
  }
  expect(list.tail, `${what}: its tail is its last record`).to.equal(prev);
  expect(out.length, `${what}: its size is the number of records linked`).to.equal(list.size);
  return out;
}

/** A checkout's purpose (`checkOut({ purpose })`), cycled over the checkouts of a script rather than drawn. */
const PURPOSES = [undefined, 'cursor', 'transaction'] as const;

const SEED = envInt('PROPERTY_SEED', 424242);
const RUNS = envInt('PROPERTY_RUNS', 400);


describe('reduce (property: random action sequences)', function () {
  it('keeps counts, limits, FIFO service and single settlement; loses and leaks nothing', function () {
    fc.assert(
      fc.property(options, fc.noBias(fc.array(step, { minLength: 1, maxLength: 80, size: 'max' })), (opts, steps) => {
        const { loadBalanced, ...poolOptions } = opts;
        const b = new Bench(poolOptions, true, loadBalanced);
        const services = ['s0', 's1', 's2'];
        const waiters: Waiter<FakeConnection>[] = [];
        const held: FakeConnection[] = [];
        // Connection id → the order of its last checkout: the in-use list must be in that order.
        const checkedOut = new Map<number, number>();
        let checkOuts = 0;

        const check = (deliveredNow: Waiter<FakeConnection>[]): void => {
          const s = b.state;
          const byState = { pending: 0, available: 0, 'in use': 0, closed: 0 };
          for (const rec of s.records.values()) byState[rec.state]++;
          expect(byState.closed, 'closed records are removed').to.equal(0);
          expect(byState.pending, 'pendingConnectionCount').to.equal(s.pendingConnectionCount);
          expect(byState.available, 'availableConnectionCount').to.equal(s.available.size);
          expect(s.records.size, 'total = pending + available + in use').to.equal(
            byState.pending + byState.available + byState['in use'],
          );
          if (opts.maxPoolSize > 0) expect(s.records.size, 'total <= maxPoolSize').to.be.at.most(opts.maxPoolSize);
          expect(s.pendingConnectionCount, 'pending <= maxConnecting').to.be.at.most(opts.maxConnecting);
          expect(s.claimants.length, 'every claim has an establishment').to.be.at.most(s.claimablePendingCount);
          expect(b.pending.size, 'establishments under way = pending records').to.equal(s.pendingConnectionCount);
          const perService = new Map<string, number>();
          for (const rec of s.records.values()) {
            if (rec.serviceId !== undefined) perService.set(rec.serviceId, (perService.get(rec.serviceId) ?? 0) + 1);
          }
          expect(
            [...s.serviceGenerations].map(([id, g]) => [id, g.connectionCount]),
            'service counts = established connections per service; no empty entry',
          ).to.have.deep.members([...perService]);
          for (const w of deliveredNow) {
            const older = waiters.slice(0, waiters.indexOf(w)).filter((o) => o.state !== 'done');
            expect(older, 'FIFO: no older waiter is still waiting').to.have.length(0);
          }
          // The in-use and available lists: exactly the records in use and available, the in-use ones in checkout
          // order (the oldest checkout at the head, which the holdings of a timeout name); no record in both.
          const inUse = linked(s.inUse, 'in-use list');
          const available = linked(s.available, 'available list');
          const ids = (recs: ConnectionRecord<FakeConnection>[]): number[] => recs.map((rec) => rec.id);
          const inUseRecords = [...s.records.values()].filter((rec) => rec.state === 'in use');
          inUseRecords.sort((a, b) => checkedOut.get(a.id)! - checkedOut.get(b.id)!);
          expect(ids(inUse), 'in-use list = the connections in use, in checkout order').to.deep.equal(ids(inUseRecords));
          expect(ids(available), 'available list = the available connections').to.have.members(
            ids([...s.records.values()].filter((rec) => rec.state === 'available')),
          );
          // The counts by purpose kept as connections go out and in = a recount over the holders.
          const byPurpose = { cursor: 0, transaction: 0 };
          for (const rec of inUseRecords) {
            const purpose = rec.holder === undefined ? undefined : s.purposes?.get(rec.holder);
            if (purpose !== undefined) byPurpose[purpose]++;
          }
          expect({ ...s.inUseByPurpose }, 'connections in use by purpose').to.deep.equal(byPurpose);
          // Each claimant's own establishment (the one whose failure is its) is the one the map finds.
          for (const rec of s.records.values()) {
            if (rec.state === 'pending' && rec.starter?.state === 'claimant') {
              expect(s.startedEstablishments.get(rec.starter), `the establishment connection ${rec.id}'s starter owns`).to.equal(rec);
            }
          }
          const settled = new Map<Waiter<FakeConnection>, number>();
          for (const o of b.outcomes) settled.set(o.waiter, (settled.get(o.waiter) ?? 0) + 1);
          for (const n of settled.values()) expect(n, 'a checkout settles once').to.equal(1);
        };

        for (const st of steps) {
          const before = b.outcomes.length;
          switch (st.t) {
            case 'checkOut': {
              const waiter = new TestWaiter();
              b.dispatch({ type: 'checkOut', waiter, purpose: PURPOSES[waiters.length % PURPOSES.length] });
              waiters.push(waiter);
              break;
            }
            case 'cancel': {
              const w = pick(waiters.filter((x) => x.state !== 'done'), st.i);
              if (w) b.cancel(w);
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
            case 'errorInUse': {
              const c = pick(held, st.i);
              if (c) c.errored = true;
              break;
            }
            case 'succeed': {
              const id = pick([...b.pending], st.i);
              if (id !== undefined) b.succeed(id, loadBalanced ? services[st.service] : undefined);
              break;
            }
            case 'fail': {
              const id = pick([...b.pending], st.i);
              if (id !== undefined) b.failEstablishment(id, new Error('boom'), st.clear);
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
            case 'close':
              b.dispatch({ type: 'close' });
              break;
            case 'advance':
              b.advanceTo(b.time + st.ms);
              break;
          }
          const delivered = b.outcomes.slice(before).filter((o) => o.kind === 'deliver');
          for (const o of delivered) {
            expect(held, 'a connection is never handed out twice').to.not.include(o.connection);
            const rec = b.state.records.get(o.connection!.id)!;
            const current = loadBalanced ? b.state.serviceGenerations.get(rec.serviceId!)!.generation : b.state.generation;
            expect(rec.generation, 'never hands out a stale connection').to.equal(current);
            held.push(o.connection!);
            checkedOut.set(o.connection!.id, ++checkOuts);
          }
          check(delivered.map((o) => o.waiter));
        }

        // Wind down: close, finish every establishment, return every connection.
        b.dispatch({ type: 'close' });
        for (const id of [...b.pending]) b.succeed(id, loadBalanced ? 's0' : undefined);
        for (const c of held.splice(0)) b.checkIn(c);
        check([]);
        for (const w of waiters) {
          expect(b.outcomes.filter((o) => o.waiter === w), 'every checkout settled exactly once').to.have.length(1);
        }
        expect(b.state.records.size, 'no connection left in a closed pool').to.equal(0);
        const established = b.commands.filter((c) => c.type === 'deliver').length;
        expect(established).to.be.at.most(waiters.length);
        const created = b.events.filter((e) => e.type === 'ConnectionCreated').length;
        const closed = b.events.filter((e) => e.type === 'ConnectionClosed').length;
        expect(closed, 'every created connection was closed').to.equal(created);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
