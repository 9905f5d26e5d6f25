/**
 * A client whose host's wall clock is stepped while it works (an NTP correction, a VM resumed, an operator's `date`):
 * the client's own waits (server selection, a command's timeoutMS) are measured on a clock that does not step, as
 * the pools' are; and the log messages it writes are stamped on the wall clock. Against the embedded endpoint (the
 * server is made to answer slowly), but for the log messages' test, which runs against MONGODB_URI's server when it is
 * set.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as dns from 'node:dns';
import * as path from 'node:path';
import { connect, MongoNetworkTimeoutError, ServerSelectionError, type Client, type LogMessage } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { DnsResponder } from '../support/dns-responder';
import { closedPort, withOptions } from '../support/endpoint';

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

  it('set back an hour while a mongodb+srv seedlist is looked up: the server selection still fails at serverSelectionTimeoutMS, not an hour later', async function () {
    const port = await closedPort();
    const responder = await new DnsResponder({ srv: { '_mongodb._tcp.test1.test.build.10gen.cc': [{ target: 'localhost.test.build.10gen.cc', port }] } }).start();
    const servers = dns.getServers();
    dns.setServers([responder.server]);
    try {
      responder.delayMS = 400;
      const c = (client = connect('mongodb+srv://test1.test.build.10gen.cc/?tls=false&serverSelectionTimeoutMS=1000'));
      const started = performance.now();
      const outcome = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      // The clock steps while the answer is held back.
      setTimeout(() => (Date.now = () => realNow() - 3_600_000), 150);
      const settled = await Promise.race([outcome, new Promise((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5000))]);
      expect(settled).to.be.instanceOf(ServerSelectionError);
      expect(performance.now() - started).to.be.within(900, 2500);
    } finally {
      dns.setServers(servers);
      await client?.close();
      await responder.close();
    }
  });

  for (const step of [3_600_000, -3_600_000]) {
    it(`set ${step > 0 ? 'forward' : 'back'} an hour: every message written after it is stamped on the wall clock, as a command's are and the application's own log lines`, async function () {
      // The server of MONGODB_URI when it is set: only pings are sent.
      const uri = process.env.MONGODB_URI ?? (server = await new EmbeddedServer().start()).uri;
      const written: LogMessage[] = [];
      const c = (client = connect(withOptions(uri, 'heartbeatFrequencyMS=500&serverMonitoringMode=poll'), {
        logging: { componentSeverities: { connection: 'debug', topology: 'debug', serverSelection: 'debug', command: 'debug' }, path: { write: (m: LogMessage) => void written.push(m) } },
      }));
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      Date.now = () => realNow() + step;
      // Messages of the millisecond after a reading share it (see wallClockTime): the step shows from the next one.
      await new Promise((r) => setTimeout(r, 2));
      written.length = 0;
      const stepped = Date.now();
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      // A heartbeat after the step too (every 500 ms).
      const heartbeatsBefore = written.filter((m) => m.component === 'topology').length;
      for (let i = 0; i < 100 && written.filter((m) => m.component === 'topology').length === heartbeatsBefore; i++) await new Promise((r) => setTimeout(r, 20));
      const ended = Date.now();
      const components = new Set(written.map((m) => m.component));
      expect([...components].sort()).to.deep.equal(['command', 'connection', 'serverSelection', 'topology']);
      const off = written.filter((m) => m.time < stepped - 5 || m.time > ended + 5).map((m) => `${m.component}: ${String(m.fields.message)} ${Math.round(m.time - stepped)} ms from the step`);
      expect(off, 'messages stamped off the wall clock').to.deep.equal([]);
    });
  }
});

describe('Client: its own waits keep a script alive', function () {
  this.timeout(30_000);

  it('a script that awaits a command with no server to reach: the process stays until the selection fails at serverSelectionTimeoutMS, rather than exiting with the command unsettled', async function () {
    const port = await closedPort();
    // The monitor's sleep between checks holds no process alive (heartbeatFrequencyMS 60 s): only the selection's wait can.
    const script = [
      "const { connect } = require('./lib');",
      `const client = connect('mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=1500&heartbeatFrequencyMS=60000&connectTimeoutMS=500');`,
      "client.command('admin', { ping: 1 }).then(() => console.log('answered'), (e) => console.log('failed ' + e.name)).finally(() => client.close());",
    ].join('\n');
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], { cwd: path.resolve(__dirname, '../..'), env: process.env });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    expect(stdout.trim()).to.equal('failed ServerSelectionError');
    expect(code).to.equal(0);
  });
});
