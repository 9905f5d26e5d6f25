/**
 * establish: a monitor's dedicated connection from a connection factory (an Observable's or a Promise's), abortable,
 * and never left open by an establishment its monitor abandoned.
 */
import { expect } from 'chai';
import { EMPTY, of, Subject } from 'rxjs';
import type { Connection } from '../../lib/connection/connection';
import { PoolCallbackError } from '../../lib/errors';
import { establish } from '../../lib/monitor/establish';
import type { ConnectionDescriptor, ConnectionFactory } from '../../lib/pool/contract';
import { MockConnection } from '../../lib/testing';

/** A turn of the event loop: every promise job pending now has run. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** What `connection` came to after a turn: the connection, the error it rejected with, or 'pending'. */
async function outcome(connection: Promise<Connection>): Promise<unknown> {
  return Promise.race([connection.then(undefined, (e: unknown) => e), turn().then(() => 'pending')]);
}

/** A factory of MockConnections that keeps the descriptors (their signals) it was given. */
function recording(make: (d: ConnectionDescriptor) => unknown): { factory: ConnectionFactory<Connection>; descriptors: ConnectionDescriptor[] } {
  const descriptors: ConnectionDescriptor[] = [];
  const factory = ((d: ConnectionDescriptor) => {
    descriptors.push(d);
    return make(d);
  }) as unknown as ConnectionFactory<Connection>;
  return { factory, descriptors };
}

describe('establish', function () {
  it('delivers the connection of an Observable or a Promise factory and leaves it open, its signal not aborted', async function () {
    // The establishment is over, not abandoned: a factory that hands its signal to net.connect({ signal }), or
    // destroys its connection when it aborts, keeps the connection it delivered.
    for (const [kind, make] of [
      ['Observable', (d: ConnectionDescriptor) => of(new MockConnection(d))],
      ['Promise', async (d: ConnectionDescriptor) => new MockConnection(d)],
    ] as const) {
      const { factory, descriptors } = recording(make);
      const { connection, subscription } = establish(factory, 'db:27017', 1, () => false);
      const c = (await outcome(connection)) as unknown as MockConnection;
      await turn();
      expect(c, kind).to.be.instanceOf(MockConnection);
      expect(descriptors.map(({ id, generation, address }) => ({ id, generation, address })), kind).to.deep.equal([{ id: 1, generation: 0, address: 'db:27017' }]);
      expect(c.destroyed, `${kind}: the delivered connection is open`).to.equal(false);
      expect(descriptors[0].signal.aborted, `${kind}: its signal`).to.equal(false);
      subscription.unsubscribe();
      await turn();
      expect(c.destroyed, `${kind}: unsubscribing after the delivery leaves it to its holder`).to.equal(false);
      expect(descriptors[0].signal.aborted, `${kind}: nor aborts the signal`).to.equal(false);
    }
  });

  it('fails with PoolCallbackError when the factory completes without a connection, as a pool establishment does', async function () {
    // Otherwise the monitor's check (or RTT round) waiting on it would never end.
    const { factory, descriptors } = recording(() => EMPTY);
    const { connection } = establish(factory, 'db:27017', 1, () => false);
    const error = await outcome(connection);
    expect(error).to.be.instanceOf(PoolCallbackError);
    expect((error as PoolCallbackError).callback).to.equal('connectionFactory');
    expect((error as Error).message).to.equal('connectionFactory completed without a connection for connection 1');
    expect(descriptors[0].signal.aborted, 'the establishment is abandoned').to.equal(true);
  });

  it('rejects with what the factory failed with', async function () {
    const failure = new Error('refused');
    const { connection } = establish(recording(async () => Promise.reject(failure)).factory, 'db:27017', 1, () => false);
    expect(await outcome(connection)).to.equal(failure);
  });

  it('aborts an establishment unsubscribed before it delivered, and destroys what a Promise factory resolves to afterwards', async function () {
    const arrivals = new Subject<MockConnection>();
    const observed = recording(() => arrivals);
    const a = establish(observed.factory, 'db:27017', 1, () => false);
    a.subscription.unsubscribe();
    expect(observed.descriptors[0].signal.aborted).to.equal(true);
    expect(arrivals.observed, 'the Observable is unsubscribed').to.equal(false);

    let resolve!: (c: MockConnection) => void;
    const promised = recording(() => new Promise<MockConnection>((r) => (resolve = r)));
    const b = establish(promised.factory, 'db:27017', 1, () => false);
    b.subscription.unsubscribe();
    expect(promised.descriptors[0].signal.aborted).to.equal(true);
    const late = new MockConnection(promised.descriptors[0]);
    resolve(late);
    await turn();
    expect(late.destroyed, 'a Promise cannot be cancelled: what it delivers later is destroyed').to.equal(true);
    expect(await outcome(b.connection)).to.equal('pending');
  });

  it('destroys a connection that arrives once the monitor is closed, and every one after the first', async function () {
    const subjects: Subject<MockConnection>[] = [];
    const { factory, descriptors } = recording(() => subjects[subjects.push(new Subject<MockConnection>()) - 1]);
    const { connection } = establish(factory, 'db:27017', 1, () => true);
    const afterClose = new MockConnection(descriptors[0]);
    subjects[0].next(afterClose);
    expect(afterClose.destroyed).to.equal(true);
    expect(await outcome(connection)).to.equal('pending');

    const more = establish(factory, 'db:27017', 1, () => false);
    const [first, second] = [new MockConnection(descriptors[1]), new MockConnection(descriptors[1])];
    subjects[1].next(first);
    subjects[1].next(second);
    expect(await outcome(more.connection)).to.equal(first);
    expect([first.destroyed, second.destroyed]).to.deep.equal([false, true]);
  });
});
