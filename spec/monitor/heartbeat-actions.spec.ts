/**
 * heartbeatActions(): only the server monitoring spec's heartbeat events become pool input actions; any other value in
 * the stream (a pool or client event of a merged stream, or a value that is no event at all) is passed over.
 */
import { expect } from 'chai';
import { firstValueFrom, from, toArray } from 'rxjs';
import { heartbeatActions, MonitorClosedError, MongoNetworkError, MongoNetworkTimeoutError, type PoolInputAction, type ServerHeartbeatEvent } from '../../lib';

const address = 'localhost:27017';

function actionsOf(events: readonly unknown[]): Promise<PoolInputAction[]> {
  return firstValueFrom(from(events as ServerHeartbeatEvent[]).pipe(heartbeatActions(), toArray()));
}

describe('heartbeatActions()', () => {
  it('maps Succeeded to ready, Failed to clear (interrupting on a network timeout) and Started to nothing', async () => {
    const timeout = new MongoNetworkTimeoutError(address, 'timed out');
    const network = new MongoNetworkError(address, 'reset');
    const actions = await actionsOf([
      { type: 'ServerHeartbeatStarted', address, awaited: false },
      { type: 'ServerHeartbeatSucceeded', address, awaited: false, duration: 1, reply: {} },
      { type: 'ServerHeartbeatFailed', address, awaited: false, duration: 1, error: timeout },
      { type: 'ServerHeartbeatFailed', address, awaited: false, duration: 1, error: network },
    ]);
    expect(actions).to.deep.equal([
      { type: 'ready' },
      { type: 'clear', cause: timeout, interruptInUseConnections: true },
      { type: 'clear', cause: network, interruptInUseConnections: false },
    ]);
  });

  it('maps the ServerHeartbeatFailed a closed monitor ends its check with (MonitorClosedError) to nothing: the pool is left as it is', async () => {
    const actions = await actionsOf([
      { type: 'ServerHeartbeatSucceeded', address, awaited: false, duration: 1, reply: {} },
      { type: 'ServerHeartbeatStarted', address, awaited: true },
      { type: 'ServerHeartbeatFailed', address, awaited: true, duration: 1, error: new MonitorClosedError(address) },
    ]);
    expect(actions).to.deep.equal([{ type: 'ready' }]);
  });

  it('passes over the events of a merged stream that are not heartbeats: a clear is not followed by a ready', async () => {
    const error = new MongoNetworkError(address, 'reset');
    const actions = await actionsOf([
      { type: 'ServerHeartbeatFailed', address, awaited: false, duration: 1, error },
      { type: 'ConnectionPoolCleared', address },
      { type: 'ConnectionCreated', address, connectionId: 1 },
      { type: 'ConnectionCheckOutFailed', address, reason: 'connectionError' },
    ]);
    expect(actions).to.deep.equal([{ type: 'clear', cause: error, interruptInUseConnections: false }]);
  });

  it('passes over values that are no event (null, a number, an object without a type) without erroring the stream', async () => {
    const actions = await actionsOf([null, undefined, 5, 'ServerHeartbeatSucceeded', {}, { type: 5 }, { type: 'ServerHeartbeatSucceeded', address, awaited: false, duration: 1, reply: {} }]);
    expect(actions).to.deep.equal([{ type: 'ready' }]);
  });
});
