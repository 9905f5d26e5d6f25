/**
 * A command the server sheds under load: MongoDB 8.2's ingress request rate limiter answers it with
 * IngressRequestRateLimitExceeded (462) and the labels SystemOverloadedError and RetryableError (client backpressure
 * spec, "Overload Errors"). The command fails with that error, its labels readable for a retry policy, and nothing
 * else changes: its connection goes back to the pool and serves the next command (the client backpressure tests'
 * "overload error retry attempts return connections to the pool"), the pool is not cleared and stays ready, and the
 * monitor is not asked for a check (the server answered: it is up). Against the embedded endpoint, or the server of
 * MONGODB_URI when it is set and has the failCommand fail point.
 */
import { expect } from 'chai';
import { connect, ErrorLabel, MongoServerError, type Client, type ClientEvent } from '../../lib';
import { VirtualClock } from '../../lib/testing';
import { eventually, setFailPoint, startTestEndpoint, stopTestEndpoint, withOptions, type TestEndpoint } from '../support/endpoint';

describe('Client: a command shed by the server under load (462, SystemOverloadedError)', function () {
  this.timeout(20_000);
  let server: TestEndpoint | undefined;
  let client: Client | undefined;

  afterEach(async function () {
    await client?.close();
    client = undefined;
    if (server !== undefined) await stopTestEndpoint(server);
    server = undefined;
  });

  it('fails with the server\'s error and labels; its connection is checked in and serves the next command; no clear, no check', async function () {
    server = await startTestEndpoint();
    const clock = new VirtualClock();
    const uri = withOptions(process.env.MONGODB_URI ?? `mongodb://${server.address}/`, 'maxPoolSize=1&serverMonitoringMode=poll&heartbeatFrequencyMS=60000');
    const c = (client = connect(uri, { scheduler: clock, ...server.connectionOptions }));
    const events: string[] = [];
    c.events$.subscribe((e: ClientEvent) => void (e.type !== 'ConnectionCheckOutStarted' && events.push(e.type)));
    const pool = [...c.pools.values()][0];
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    clock.advance(1000); // a requested check would run at once from here
    await setFailPoint(this, server, {
      mode: { times: 5 },
      data: { failCommands: ['ping'], errorCode: 462, errorLabels: [ErrorLabel.RetryableError, ErrorLabel.SystemOverloadedError] },
    });
    events.length = 0;
    for (let attempt = 1; attempt <= 5; attempt++) {
      const shed = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(shed, `attempt ${attempt}`).to.be.instanceOf(MongoServerError);
      expect((shed as MongoServerError).code).to.equal(462);
      expect((shed as MongoServerError).hasErrorLabel(ErrorLabel.SystemOverloadedError)).to.equal(true);
      expect((shed as MongoServerError).hasErrorLabel(ErrorLabel.RetryableError)).to.equal(true);
    }
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    clock.advance(0);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events, 'one connection, out and in six times, nothing else').to.deep.equal(Array.from({ length: 6 }, () => ['ConnectionCheckedOut', 'ConnectionCheckedIn']).flat());
    expect(pool.state).to.equal('ready');
    expect(pool.snapshot().totalConnectionCount).to.equal(1);
  });
});
