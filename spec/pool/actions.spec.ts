/**
 * The input lanes of the pool's actions (isControlAction), as the pool's callers see them: actions pushed while the
 * pool is processing are queued, control actions (clear, ready, close, check-ins, establishment results, timers)
 * ahead of checkout requests and their cancellations, which keep their own order.
 */
import { expect } from 'chai';
import { ConnectionPoolCore, PoolClearedError, type ConnectionPoolEvent } from '../../lib';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';

function makePool(maxPoolSize = 10) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
  const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize, scheduler: clock, connectionFactory: mock.factory });
  const events: ConnectionPoolEvent[] = [];
  return { pool, clock, events, types: () => events.map((e) => e.type) };
}

describe('action lanes (isControlAction)', function () {
  it('a clear requested while the pool is processing takes effect before a checkout requested just before it', function () {
    const { pool, events, types } = makePool();
    let error: unknown;
    pool.events$.subscribe((e) => {
      events.push(e);
      if (e.type === 'ConnectionPoolReady') {
        pool.checkOut().subscribe({ error: (x) => (error = x) }); // queued (checkout lane)...
        pool.clear(); // ...and overtaken by the clear (control lane)
      }
    });
    pool.ready();
    expect(types()).to.deep.equal([
      'ConnectionPoolCreated',
      'ConnectionPoolReady',
      'ConnectionPoolCleared',
      'ConnectionCheckOutStarted',
      'ConnectionCheckOutFailed', // the paused pool refuses it at once: no connection was created for it
    ]);
    expect(error).to.be.instanceOf(PoolClearedError);
  });

  it('a cancellation requested while the pool is processing keeps its place behind checkouts requested before it', function () {
    const { pool, clock, events, types } = makePool(1);
    pool.ready();
    pool.checkOut().subscribe(); // holds the only connection
    clock.advance(10);
    const waiting = pool.checkOut().subscribe(); // waits
    let triggered = false;
    pool.events$.subscribe((e) => {
      events.push(e);
      if (e.type === 'ConnectionCheckOutStarted' && !triggered) {
        triggered = true;
        pool.checkOut().subscribe(); // queued first...
        waiting.unsubscribe(); // ...then the cancellation, in the same lane
      }
    });
    pool.checkOut().subscribe(); // the third
    expect(types()).to.deep.equal([
      'ConnectionPoolCreated',
      'ConnectionCheckOutStarted', // the third
      'ConnectionCheckOutStarted', // the one requested from the handler
      'ConnectionCheckOutFailed', // then the cancellation
    ]);
    expect(events.at(-1)).to.include({ reason: 'cancelled' });
    expect(pool.snapshot().waitQueueLength).to.equal(2);
  });
});
