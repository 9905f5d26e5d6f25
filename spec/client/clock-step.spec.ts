/**
 * A client whose host's wall clock is stepped while it works (an NTP correction, a VM resumed, an operator's `date`):
 * the client's own waits (server selection, a command's timeoutMS) are measured on a clock that does not step, as
 * the pools' are. Against the embedded endpoint only (the server is made to answer slowly).
 */
import { expect } from 'chai';
import { connect, MongoNetworkTimeoutError, type Client } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';

describe('Client: a wall clock stepped while it works', function () {
  this.timeout(20_000);
  let server: EmbeddedServer | undefined;
  let client: Client | undefined;
  const realNow = Date.now;

  afterEach(async function () {
    Date.now = realNow;
    await client?.close();
    client = undefined;
    await server?.stop();
    server = undefined;
  });

  /** Steps `Date.now()` by `ms` as the command's checkout starts (after its timeoutMS began). */
  function stepAtCheckOut(c: Client, ms: number): void {
    c.events$.subscribe((e) => {
      if (e.type === 'ConnectionCheckOutStarted' && Date.now === realNow) Date.now = () => realNow() + ms;
    });
  }

  it('set back an hour during a command: its timeoutMS still ends it (500 ms), not the server\'s reply 3 s later', async function () {
    server = await new EmbeddedServer().start();
    const c = (client = connect(`mongodb://${server.address}/`));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 3000 } });
    stepAtCheckOut(c, -3_600_000);
    const started = performance.now();
    const outcome = await c.command('admin', { ping: 1 }, { timeoutMS: 500 }).catch((e: unknown) => e);
    const took = performance.now() - started;
    expect(outcome).to.be.instanceOf(MongoNetworkTimeoutError);
    expect(took).to.be.within(400, 2500);
  });

  it('set forward an hour during a command: it gets its server\'s reply, not a timeout at once', async function () {
    server = await new EmbeddedServer().start();
    const c = (client = connect(`mongodb://${server.address}/`));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 100 } });
    stepAtCheckOut(c, 3_600_000);
    expect(await c.command('admin', { ping: 1 }, { timeoutMS: 2000 })).to.include({ ok: 1 });
  });
});
