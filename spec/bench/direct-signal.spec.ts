import { expect } from 'chai';
import { CheckOutCancelledError } from '../../lib';
import { ConnectionPoolCore } from '../../lib/pool/connection-pool-core';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { DirectAbortController } from '../../bench/direct-signal';
import { abortAlone } from '../../bench/scenarios';

describe('bench: DirectAbortController', () => {
  it('calls each listener once, at once, with the reason set; a removed listener is not called', () => {
    const controller = new DirectAbortController();
    const calls: unknown[] = [];
    const removed = (): void => void calls.push('removed');
    controller.signal.addEventListener('abort', () => calls.push(controller.signal.reason));
    controller.signal.addEventListener('abort', removed);
    controller.signal.removeEventListener('abort', removed);
    const reason = new Error('stop');
    controller.abort(reason);
    controller.abort(new Error('again'));
    expect(calls).to.deep.equal([reason]);
    expect(controller.signal.aborted).to.equal(true);
  });

  it("cancels an rxcmap Promise checkout as an AbortController does: CheckOutCancelledError, the signal's reason as cause", async () => {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock });
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, scheduler: clock, connectionFactory: mock.factory });
    pool.ready();
    const holding = pool.checkOut().then((c) => c); // the first then() starts the lazy request
    clock.advance(1);
    const held = await holding;
    const controller = new DirectAbortController();
    const waiting = pool.checkOut({ signal: controller.signal }).then(undefined, (e: unknown) => e);
    controller.abort();
    const error = await waiting;
    expect(error).to.be.instanceOf(CheckOutCancelledError);
    expect((error as Error).cause).to.equal(controller.signal.reason);
    expect(pool.snapshot().waitQueueLength).to.equal(0);
    pool.checkIn(held);
    pool.close();
  });

  it('the direct rejection floor rejects every aborted caller with its own error before its batch is timed', async () => {
    const micros = await abortAlone(50, 100, true, true);
    expect(Number.isFinite(micros) && micros > 0).to.equal(true);
  });
});
