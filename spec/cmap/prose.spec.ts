/**
 * CMAP prose tests that apply to a pool on its own.
 */
import { expect } from 'chai';
import { ConnectionPool, type ConnectionPoolEvent, type ConnectionCheckOutFailedEvent } from '../../lib';
import { startTestEndpoint, type TestEndpoint } from '../support/endpoint';

describe('CMAP prose tests', function () {
  let endpoint: TestEndpoint;
  before(async function () {
    endpoint = await startTestEndpoint();
  });
  after(async function () {
    await endpoint.stop();
  });

  it('5: an error while establishing a connection emits ConnectionCheckOutFailed with reason connectionError', async function () {
    const appName = 'cmapProseTest5';
    await endpoint.adminCommand({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['isMaster', 'hello'], closeConnection: true, appName },
    });
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: { ...endpoint.connectionOptions, appName } });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      const error = await pool.checkOut().then(
        () => expect.fail('the establishment must fail'),
        (e: unknown) => e,
      );
      const failed = events.find((e): e is ConnectionCheckOutFailedEvent => e.type === 'ConnectionCheckOutFailed');
      expect(failed).to.include({ reason: 'connectionError' });
      expect(failed!.error).to.equal(error);
      const order = events.map((e) => e.type).filter((t) => t.startsWith('Connection') && !t.startsWith('ConnectionPool'));
      expect(order).to.deep.equal(['ConnectionCheckOutStarted', 'ConnectionCreated', 'ConnectionClosed', 'ConnectionCheckOutFailed']);
      expect(events.find((e) => e.type === 'ConnectionClosed')).to.include({ reason: 'error' });
    } finally {
      pool.close();
      await endpoint.adminCommand({ configureFailPoint: 'failCommand', mode: 'off' });
    }
  });
});
