/**
 * The command runner against user code that breaks its contract: a connectionFactory that throws, returns something
 * that is not an ObservableInput, or emits something that is not this establishment's connection, and a
 * clearOnEstablishmentError that throws. Each must fail the establishment with a typed error, settle the checkout
 * once, and free the pending slot.
 */
import { expect } from 'chai';
import { of } from 'rxjs';
import { ConnectionPoolCore, PoolCallbackError, type ConnectionFactory, type ConnectionPoolEvent, type PoolConnection } from '../../lib';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';

function poolWith(factory: ConnectionFactory<PoolConnection>, clearOnEstablishmentError?: (e: Error) => boolean) {
  const clock = new VirtualClock();
  const pool = new ConnectionPoolCore<PoolConnection>({ address: 'db:27017', maxConnecting: 1, scheduler: clock, connectionFactory: factory, clearOnEstablishmentError });
  const events: ConnectionPoolEvent[] = [];
  pool.events$.subscribe((e) => events.push(e));
  pool.ready();
  return { pool, clock, events };
}

/** Checks out once (Observable form) and returns what happened, synchronously. */
function checkOutOnce(pool: ConnectionPoolCore<PoolConnection>): { errors: unknown[]; connections: PoolConnection[] } {
  const outcome = { errors: [] as unknown[], connections: [] as PoolConnection[] };
  pool.checkOut().subscribe({ next: (c) => outcome.connections.push(c), error: (e) => outcome.errors.push(e) });
  return outcome;
}

describe('CommandRunner with a misbehaving connectionFactory or policy', function () {
  const broken: [string, ConnectionFactory<PoolConnection>, RegExp][] = [
    ['throws', () => { throw new Error('factory bug'); }, /connectionFactory threw: factory bug/],
    ['returns a number, not an ObservableInput', () => 42 as never, /connectionFactory returned 42, not an Observable, Promise or other ObservableInput/],
    ['returns null', () => null as never, /connectionFactory returned null/],
    ['emits a number, not a connection', () => of(7) as never, /connectionFactory emitted 7 for connection 1, not a connection/],
    ['emits a connection with another id', (d) => of({ id: d.id + 100, destroy: () => undefined }), /connection 101 for connection 1/],
  ];
  for (const [what, factory, message] of broken) {
    it(`fails the checkout with a PoolCallbackError when the factory ${what}, and frees the slot`, function () {
      const { pool, events } = poolWith(factory);
      const first = checkOutOnce(pool);
      expect(first.errors, 'settled once').to.have.length(1);
      const error = first.errors[0] as PoolCallbackError;
      expect(error).to.be.instanceOf(PoolCallbackError);
      expect(error.callback).to.equal('connectionFactory');
      expect(error.message).to.match(message);
      expect(events.filter((e) => e.type === 'ConnectionClosed')).to.have.length(1);
      expect(events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'connectionError' });
      expect(pool.snapshot()).to.include({ pendingConnectionCount: 0, totalConnectionCount: 0 });
    });
  }

  it('tears down an object it cannot accept, so no socket is left behind', function () {
    let destroyed = 0;
    const { pool } = poolWith((d) => of({ id: d.id + 1, destroy: () => destroyed++ }));
    checkOutOnce(pool);
    expect(destroyed).to.equal(1);
  });

  it('fails the establishment with a PoolCallbackError when clearOnEstablishmentError throws, keeping both errors', function () {
    const clock = new VirtualClock();
    const refused = new Error('connection refused');
    const mock = new MockConnectionFactory({ scheduler: clock, failWith: () => refused });
    const pool = new ConnectionPoolCore<MockConnection>({
      address: 'db:27017',
      scheduler: clock,
      connectionFactory: mock.factory,
      clearOnEstablishmentError: () => {
        throw new Error('policy bug');
      },
    });
    pool.ready();
    const errors: unknown[] = [];
    pool.checkOut().subscribe({ error: (e) => errors.push(e) });
    clock.advance(0);
    expect(errors).to.have.length(1);
    const error = errors[0] as PoolCallbackError;
    expect(error).to.be.instanceOf(PoolCallbackError);
    expect(error.callback).to.equal('clearOnEstablishmentError');
    expect(error.message).to.match(/clearOnEstablishmentError threw: policy bug; the establishment had failed with: connection refused/);
    expect((error.cause as Error).message).to.equal('policy bug');
    expect(error.establishmentError).to.equal(refused);
    expect(pool.snapshot()).to.include({ pendingConnectionCount: 0, totalConnectionCount: 0 });
    expect(pool.state, 'the default rule decided: an unlabelled error clears').to.equal('paused');
  });
});
