/**
 * The CMAP runner must be able to fail: a test whose expectations the pool does not meet is rejected, with a message
 * that says where.
 */
import { expect } from 'chai';
import { ConnectionPool, type PoolConnection } from '../../lib';
import { MockConnectionFactory } from '../../lib/testing';
import { mismatch } from './match';
import { runCmapTest, type PoolMaker } from './runner';
import type { CmapSpecFile } from './spec-file';

const makePool: PoolMaker = (options) =>
  new ConnectionPool<PoolConnection>({
    address: 'localhost:27017',
    ...options,
    connectionFactory: new MockConnectionFactory().factory,
  });

const base: CmapSpecFile = {
  version: 1,
  style: 'unit',
  description: 'runner self-test',
  operations: [{ name: 'ready' }, { name: 'checkOut' }],
  events: [
    { type: 'ConnectionCheckOutStarted', address: 42 },
    { type: 'ConnectionCreated', connectionId: 1, address: 42 },
    { type: 'ConnectionCheckedOut', connectionId: 1, address: 42 },
  ],
  ignore: ['ConnectionPoolCreated', 'ConnectionPoolReady', 'ConnectionReady'],
};

async function rejection(spec: CmapSpecFile): Promise<string | undefined> {
  try {
    await runCmapTest(spec, makePool);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

describe('CMAP runner (self-test)', function () {
  it('accepts a test the pool meets', async function () {
    expect(await rejection(base)).to.equal(undefined);
  });

  it('rejects a wrong connectionId, a missing event, a missing error and an unexpected error', async function () {
    const wrongId = structuredClone(base);
    wrongId.events![2].connectionId = 2;
    expect(await rejection(wrongId)).to.match(/events\[2\]\.connectionId: expected 2, got 1/);

    const tooMany = structuredClone(base);
    tooMany.events!.push({ type: 'ConnectionCheckedIn' });
    expect(await rejection(tooMany)).to.match(/expected event 3/);

    const noError = { ...structuredClone(base), error: { type: 'PoolClosedError' } };
    expect(await rejection(noError)).to.match(/expected the main thread to fail/);

    const unexpected = { ...structuredClone(base), operations: [{ name: 'checkOut' as const }], events: [] };
    expect(await rejection(unexpected)).to.match(/paused/);
  });

  it('times out waitForEvent when the events never come', async function () {
    const spec: CmapSpecFile = { ...base, operations: [{ name: 'waitForEvent', event: 'ConnectionReady', count: 1, timeout: 50 }], events: [] };
    expect(await rejection(spec)).to.match(/saw 0 of 1 ConnectionReady events within 50 ms/);
  });
});

describe('MATCH', function () {
  it('treats 42 and "42" as any existing value, and objects as subsets', function () {
    expect(mismatch({ a: 1, b: 2 }, { a: 42 })).to.equal(undefined);
    expect(mismatch({ a: 'x' }, { a: '42' })).to.equal(undefined);
    expect(mismatch({}, { a: 42 })).to.match(/\$\.a: expected a value/);
    expect(mismatch({ a: [1, 2, 3] }, { a: [1, 2] })).to.equal(undefined);
    expect(mismatch({ a: '1' }, { a: 1 })).to.match(/expected number, got string/);
    expect(mismatch({ a: { b: false } }, { a: { b: true } })).to.match(/\$\.a\.b: expected true, got false/);
  });
});
