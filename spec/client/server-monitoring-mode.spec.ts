/**
 * serverMonitoringMode through connect(): the option and the URI key pick each monitor's protocol; an invalid value
 * is an InvalidOptionError in the options and a warning in the URI. By default (auto, outside a FaaS platform) a
 * client's monitors stream, so its pools learn of a server shutting down within ms.
 */
import { expect } from 'chai';
import { connect, InvalidOptionError, MongoNetworkError, type Client, type ClientEvent } from '../../lib';
import { parseConnectionString } from '../../lib/connection-string';
import { EmbeddedServer } from '../../lib/testing';
import { eventually } from '../support/endpoint';

describe('connect(): serverMonitoringMode', function () {
  let server: EmbeddedServer;
  let client: Client | undefined;
  beforeEach(async function () {
    server = await new EmbeddedServer().start();
  });
  afterEach(async function () {
    await client?.close();
    client = undefined;
    await server.stop();
  });

  it('is auto by default; the option overrides the URI; each monitor gets it', async function () {
    client = connect(`mongodb://${server.address}/?serverMonitoringMode=poll`);
    expect([...client.monitors.values()][0].serverMonitoringMode).to.equal('poll');
    await client.close();
    client = connect(`mongodb://${server.address}/?serverMonitoringMode=poll`, { serverMonitoringMode: 'stream' });
    expect([...client.monitors.values()][0].serverMonitoringMode).to.equal('stream');
    await client.close();
    client = connect(`mongodb://${server.address}/`);
    expect([...client.monitors.values()][0].serverMonitoringMode).to.equal('auto');
  });

  it('an invalid value: InvalidOptionError as an option, a warning (value ignored) in the URI', function () {
    expect(() => connect(`mongodb://${server.address}/`, { serverMonitoringMode: 'polling' as never })).to.throw(InvalidOptionError, /serverMonitoringMode.*"auto", "stream", "poll"/);
    const parsed = parseConnectionString(`mongodb://${server.address}/?serverMonitoringMode=polling`);
    expect(parsed.clientOptions.serverMonitoringMode).to.equal(undefined);
    expect(parsed.warnings).to.deep.equal(['serverMonitoringMode="polling" is ignored: serverMonitoringMode must be one of "auto", "stream", "poll"']);
    expect(parseConnectionString(`mongodb://${server.address}/?serverMonitoringMode=stream`).warnings).to.deep.equal([]);
  });

  it('by default a pool is cleared within ms of its server shutting down; polling, not before the next check', async function () {
    const cleared = async (uri: string, waitMS: number): Promise<number | undefined> => {
      client = connect(uri, { appName: 'app' });
      const events: ClientEvent[] = [];
      client.events$.subscribe((e) => events.push(e));
      await client.command('admin', { ping: 1 });
      await new Promise((r) => setTimeout(r, 50));
      const started = Date.now();
      server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], errorCode: 91, appName: 'app' } });
      const found = await eventually(() => events.some((e) => e.type === 'ConnectionPoolCleared'), waitMS);
      await client.close();
      server.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'off' });
      return found ? Date.now() - started : undefined;
    };
    // Polling, the clear comes at the next check, heartbeatFrequencyMS (10 s) later: streaming is held to 5 s, which
    // leaves a loaded machine's pauses room.
    const streaming = await cleared(`mongodb://${server.address}/`, 5000);
    expect(streaming, 'ms to the clear, streaming').to.be.a('number').below(5000);
    expect(await cleared(`mongodb://${server.address}/?serverMonitoringMode=poll`, 500), 'polling: no clear within 500 ms').to.equal(undefined);
  });

  it('streaming: a command failing with a network error ends the streaming wait at once, closing the monitoring connection', async function () {
    client = connect(`mongodb://${server.address}/`, { appName: 'app' });
    const events: ClientEvent[] = [];
    client.events$.subscribe((e) => events.push(e));
    await client.command('admin', { ping: 1 });
    expect(await eventually(() => server.clientConnections().some((c) => c.awaitingHello))).to.equal(true);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true } });
    const started = Date.now();
    expect(await client.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(MongoNetworkError);
    // Not ended, the wait would last until the server streams its reply, maxAwaitTimeMS (10 s) later.
    expect(await eventually(() => !server.clientConnections().some((c) => c.awaitingHello), 5000), 'the monitoring connection closed').to.equal(true);
    expect(Date.now() - started).to.be.below(5000);
    const failed = events.find((e) => e.type === 'ServerHeartbeatFailed');
    expect(failed).to.include({ awaited: true });
    // The next check, on a new connection, 500 ms after the last: it readies the pool and streams again.
    expect(await eventually(() => server.clientConnections().some((c) => c.awaitingHello), 2000)).to.equal(true);
    expect([...client.pools.values()][0].state).to.equal('ready');
  });
});
