/**
 * ConnectionPool, the pool with its default wiring: its name and the checks of its default factory's options (which log
 * messages it carries at each level: spec/pool/leak-detection.spec.ts and spec/logging).
 */
import { expect } from 'chai';
import { ConnectionPool, InvalidOptionError } from '../../lib';
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
});
