/**
 * How the pool asks a connection something: a connection comes from user code, so each question may throw or answer
 * oddly, and none may stop the pool or reach the application as an unhandled error.
 */
import { expect } from 'chai';
import { of } from 'rxjs';
import { ConnectionPoolCore, type PoolConnection } from '../../lib';
import { destroyQuietly } from '../../lib/pool/connection-checks';
import { unhandledRejectionsOf } from '../support/unhandled';

describe('connection checks', function () {
  it('destroyQuietly swallows a destroy() that throws, and the rejection of a Promise or thenable it returns', async function () {
    const unhandled = await unhandledRejectionsOf(() => {
      const rejecting = [
        () => Promise.reject(new Error('async teardown failed')),
        () => ({ then: (_: unknown, reject: (e: unknown) => void) => reject(new Error('thenable teardown failed')) }),
        () => ({ get then(): never { throw new Error('then unreadable'); } }),
        () => {
          throw new Error('teardown failed');
        },
      ];
      for (const destroy of rejecting) expect(() => destroyQuietly({ id: 1, destroy })).to.not.throw();
    });
    expect(unhandled).to.deep.equal([]);
  });

  it('a pool whose connections return a rejected Promise from destroy() closes them without an unhandled rejection', async function () {
    let destroyed = 0;
    const pool = new ConnectionPoolCore<PoolConnection>({
      address: 'h:1',
      backgroundThreadIntervalMS: -1,
      connectionFactory: (d) =>
        of({
          id: d.id,
          destroy: () => {
            destroyed++;
            return Promise.reject(new Error('socket already gone'));
          },
        }),
    });
    const unhandled = await unhandledRejectionsOf(async () => {
      pool.ready();
      pool.checkIn(await pool.checkOut());
      pool.close();
    });
    expect(destroyed).to.equal(1);
    expect(pool.snapshot()).to.include({ state: 'closed', totalConnectionCount: 0 });
    expect(unhandled).to.deep.equal([]);
  });
});
