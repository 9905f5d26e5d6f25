/**
 * ConnectionPool, the pool with its default wiring: its name and the checks of its default factory's options (which log
 * messages it carries at each level: spec/pool/leak-detection.spec.ts and spec/logging).
 */
import { expect } from 'chai';
import { ConnectionPool, IncompatibleServerError, InvalidOptionError, PoolClearedError, type ConnectionPoolEvent } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { MINIFIED_NAMES, withClassesRenamed } from '../support/renamed-classes';

describe('ConnectionPool', function () {
  it('is named ConnectionPool, also once a minifying bundler has renamed the class, and a subclass of user code by its own name', function () {
    const pool = new ConnectionPool({ address: 'db:27017' });
    class ReportPool extends ConnectionPool {}
    const own = new ReportPool({ address: 'db:27017' });
    try {
      for (const name of MINIFIED_NAMES) {
        const tag = withClassesRenamed([ConnectionPool], name, () => Object.prototype.toString.call(pool));
        expect(tag, `class named "${name}"`).to.equal('[object ConnectionPool]');
      }
      expect(Object.prototype.toString.call(own)).to.equal('[object ReportPool]');
    } finally {
      pool.close();
      own.close();
    }
  });

  it('names a misspelt key of connectionOptions by its path, as an option of ConnectionPool', function () {
    expect(() => new ConnectionPool({ address: 'db:27017', connectionOptions: { appNme: 'x' } as never }))
      .to.throw(InvalidOptionError, /^Unknown option connectionOptions\.appNme of ConnectionPool: did you mean appName\?/)
      .with.property('option', 'connectionOptions.appNme');
  });
  it('against a server whose wire versions it does not speak: the checkout fails with IncompatibleServerError, the pool is cleared by it (paused: no retry, minPoolSize not restored), later checkouts fail with PoolClearedError', async function () {
    const server = await new EmbeddedServer({ maxWireVersion: 30, minWireVersion: 26 }).start();
    const pool = new ConnectionPool({ address: server.address, minPoolSize: 5, backgroundThreadIntervalMS: 50 });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    try {
      pool.ready();
      const first = await pool.withConnection((c) => c.command('admin', { ping: 1 })).catch((e: unknown) => e);
      // minPoolSize's establishments, started with the checkout's, fail the same way: whichever reaches the checkout first.
      expect(first).to.be.instanceOf(IncompatibleServerError).and.include({ address: server.address, minWireVersion: 26 });
      expect(pool.state).to.equal('paused');
      const later = await pool.checkOut().then(undefined, (e: unknown) => e);
      expect(later).to.be.instanceOf(PoolClearedError).with.property('cause').that.is.instanceOf(IncompatibleServerError);
      const accepted = server.connectionsAccepted;
      await new Promise((r) => setTimeout(r, 500));
      expect(server.connectionsAccepted, 'no establishment in 500 ms (10 background runs)').to.equal(accepted);
      expect(accepted, 'at most the first wave: the checkout and minPoolSize').to.be.at.most(6);
      expect(events.filter((e) => e.type === 'ConnectionPoolCleared')).to.have.length(1);
    } finally {
      pool.close();
      await server.stop();
    }
  });
});
