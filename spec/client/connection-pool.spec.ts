/**
 * ConnectionPool, the pool with its default wiring: its name, the checks of its default factory's options, and which
 * log messages its feed carries at each level of the `connection` component.
 */
import { expect } from 'chai';
import { ConnectionPool, InvalidOptionError, type ConnectionLogMessage } from '../../lib';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
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

  it('with leak detection and connection logging at warn or info, logs the leak messages only: no debug message reaches the feed or the destination', function () {
    for (const severity of ['warn', 'info'] as const) {
      const clock = new VirtualClock();
      const written: ConnectionLogMessage[] = [];
      const pool = new ConnectionPool<MockConnection>({
        address: 'db.example:27017',
        scheduler: clock,
        connectionFactory: new MockConnectionFactory({ scheduler: clock }).factory,
        leakDetectionThresholdMS: 100,
        logging: { componentSeverities: { connection: severity }, path: { write: (m) => void written.push(m as ConnectionLogMessage) } },
      });
      const viaLog: ConnectionLogMessage[] = [];
      pool.log$.subscribe((m) => viaLog.push(m));
      pool.ready();
      const held: MockConnection[] = [];
      pool.checkOut().subscribe((c) => held.push(c));
      clock.advance(100);
      pool.checkIn(held[0]);
      pool.close();
      const expected = severity === 'warn' ? ['Connection leak suspected'] : ['Connection leak suspected', 'Connection leak suspect checked in'];
      expect(written.map((m) => m.fields.message), severity).to.deep.equal(expected);
      expect(viaLog.map((m) => m.fields.message), `${severity}: log$`).to.deep.equal(expected);
    }
  });
});
