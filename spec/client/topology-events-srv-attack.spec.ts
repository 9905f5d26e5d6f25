import { expect } from 'chai';
import { ClientClosedError, connect, type Client, type TopologyEvent } from '../../lib';
import { SrvEnvironment, srvRecords, TEST1 } from '../support/srv-environment';

describe('Client.topologyEvents$ attacked: a mongodb+srv client closed by a subscriber as its hosts open', function () {
  this.timeout(20_000);
  const environment = new SrvEnvironment({ srv: { [TEST1]: srvRecords(27017, 27018) } });
  let client: Client | undefined;
  before(() => environment.start());
  after(() => environment.stop());
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  for (const kind of ['TopologyDescriptionChanged', 'ServerOpening'] as const) {
    it(`close() from the first ${kind} (the found hosts listed, then opened): a command waiting for the hosts fails at once with ClientClosedError, not at serverSelectionTimeoutMS`, async function () {
      const c = (client = connect(`mongodb+srv://test1.test.build.10gen.cc/?${environment.query}&serverMonitoringMode=poll&serverSelectionTimeoutMS=5000`));
      const seen: string[] = [];
      c.topologyEvents$.subscribe((e: TopologyEvent) => {
        seen.push(e.type);
        if (e.type === kind && seen.filter((t) => t === kind).length === 1) void c.close();
      });
      const start = Date.now();
      const outcome = await c.command('admin', { ping: 1 }).catch((error: unknown) => error);
      const tookMS = Date.now() - start;
      expect(seen, 'the event came').to.include(kind);
      expect(outcome).to.be.instanceOf(ClientClosedError);
      expect(tookMS).to.be.lessThan(2000);
    });
  }
});
