/**
 * How the pool asks a connection something: a connection comes from user code, so each question may throw or answer
 * oddly, and none may stop the pool or reach the application as an unhandled error.
 */
import { expect } from 'chai';
import { of } from 'rxjs';
import { ConnectionPoolCore, type PoolConnection } from '../../lib';
import { destroyQuietly, serviceIdOf } from '../../lib/pool/connection-checks';
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

  it('serviceIdOf names a service as clear({ serviceId }) does: a 24-character hex string in lower case, any other string as it is', function () {
    const A = 'aaaaaaaaaaaaaaaaaaaaaaaa';
    const reporting = (serviceId: unknown): PoolConnection => ({ id: 1, serviceId, destroy: () => undefined }) as PoolConnection;
    const cases: [unknown, string | undefined][] = [
      [A, A],
      [A.toUpperCase(), A],
      ['0123456789ABCDEFabcdef01', '0123456789abcdefabcdef01'],
      ['A'.repeat(25), 'A'.repeat(25)], // not 24 characters: no ObjectId, kept as reported
      ['A'.repeat(23), 'A'.repeat(23)],
      ['xA'.repeat(12), 'xA'.repeat(12)],
      ['A', 'A'],
      ['', ''],
      [undefined, undefined],
    ];
    for (const [reported, expected] of cases) expect(serviceIdOf(reporting(reported)), String(reported)).to.equal(expected);
    const unreadable = { id: 1, destroy: () => undefined, get serviceId(): string { throw new Error('unreadable'); } };
    expect(serviceIdOf(unreadable)).to.equal(undefined);
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
