/**
 * A network partition that heals (an availability zone's link lost for a while): no byte moves either way and nothing
 * is closed; TCP keeps the bytes and delivers them once the link is back. A client under load must fail the commands
 * the partition caught within its timeouts, say in its log why the others waited, and once healed serve again at once
 * on new connections, with no command failing after the heal, whatever the bytes held meanwhile bring. Against the
 * embedded endpoint, or the server of MONGODB_URI when it is set, through a fault proxy.
 */
import { expect } from 'chai';
import { connect, PoolClearedError, ServerSelectionError, type Client, type LogMessage } from '../../lib';
import { eventually, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { startTcpFaultProxy, type TcpFaultProxy } from '../support/tcp-fault-proxy';

describe('Client: a network partition that heals', function () {
  this.timeout(20_000);
  let server: TestEndpoint | undefined;
  let proxy: TcpFaultProxy | undefined;
  let client: Client | undefined;

  afterEach(async function () {
    await client?.close();
    client = undefined;
    await proxy?.stop();
    proxy = undefined;
    if (server !== undefined) await stopTestEndpoint(server);
    server = undefined;
  });

  it('fails what it caught at the monitor\'s timeout and serverSelectionTimeoutMS, logs the waits, and serves at once when healed, with no failure after', async function () {
    server = await startTestEndpoint();
    proxy = await startTcpFaultProxy(server.address);
    const log: LogMessage[] = [];
    // The streaming monitor's check times out after connectTimeoutMS + heartbeatFrequencyMS (server monitoring spec).
    const c = (client = connect(`mongodb://${proxy.address}/?directConnection=true&minPoolSize=2&heartbeatFrequencyMS=500&connectTimeoutMS=300&serverSelectionTimeoutMS=600`, {
      logging: { componentSeverities: { serverSelection: 'info' }, path: { write: (m: LogMessage) => void log.push(m) } },
    }));
    const pool = [...c.pools.values()][0];
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const p = proxy;

    p.partition(true);
    const partitionedAt = performance.now();
    const caught = c.command('admin', { ping: 1 }).then(
      () => undefined,
      (e: unknown) => ({ error: e, after: performance.now() - partitionedAt }),
    );
    const first = await Promise.race([caught, new Promise<{ error: unknown; after: number }>((resolve) => setTimeout(() => resolve({ error: 'still pending', after: 5000 }), 5000))]);
    expect(first?.error, 'the command in flight').to.be.instanceOf(PoolClearedError);
    expect((first?.error as Error).message).to.match(/interrupted due to server monitor timeout/);
    expect(first!.after, 'ms until the monitor timed out').to.be.below(5000);
    // The server is Unknown now: a command waits for it, and fails at serverSelectionTimeoutMS.
    const waited = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(waited).to.be.instanceOf(ServerSelectionError);
    const waits = log.filter((m) => m.component === 'serverSelection' && m.fields.message === 'Waiting for suitable server to become available');
    expect(waits.length, 'one waiting message for the command that waited').to.be.at.least(1);

    const acceptedBefore = p.accepted();
    p.partition(false);
    const healedAt = performance.now();
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const recovery = performance.now() - healedAt;
    expect(recovery, 'ms from the heal to the first success').to.be.below(3000);
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => c.command('admin', { ping: 1 })));
    expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)), 'failures after the heal').to.deep.equal([]);
    expect(pool.state).to.equal('ready');
    expect(await eventually(() => pool.snapshot().totalConnectionCount >= 2), 'minPoolSize refilled').to.equal(true);
    expect(p.accepted(), 'new connections were opened after the heal').to.be.above(acceptedBefore);
  });
});
