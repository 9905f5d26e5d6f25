/**
 * The embedded endpoint checked by a client nobody here wrote: the official `mongodb` driver's MongoClient connects
 * (with and without authentication), pings, and sees the fail points act as a real mongod's would.
 */
import { expect } from 'chai';
import { MongoClient, MongoNetworkError, MongoServerError } from 'mongodb';
import { EmbeddedServer } from '../../lib/testing';

const clientOptions = { serverSelectionTimeoutMS: 3000, connectTimeoutMS: 3000, monitorCommands: false };

describe('EmbeddedServer with the official MongoClient', function () {
  this.timeout(30_000);
  let server: EmbeddedServer;
  let client: MongoClient | undefined;

  afterEach(async function () {
    await client?.close();
    client = undefined;
    await server?.stop();
  });

  it('connects and pings without authentication', async function () {
    server = await new EmbeddedServer().start();
    client = await new MongoClient(server.uri, clientOptions).connect();
    expect(await client.db('admin').command({ ping: 1 })).to.include({ ok: 1 });
    const info = await client.db('admin').command({ buildInfo: 1 });
    expect(info.version).to.equal('8.0.0');
  });

  it('connects with SCRAM authentication, and refuses a wrong password', async function () {
    server = await new EmbeddedServer({ users: [{ username: 'alice', password: 'pencil' }] }).start();
    const uri = (password: string) => `mongodb://alice:${password}@${server.address}/?directConnection=true&authSource=admin`;
    client = await new MongoClient(uri('pencil'), clientOptions).connect();
    expect(await client.db('admin').command({ ping: 1 })).to.include({ ok: 1 });
    await client.close();
    client = new MongoClient(uri('wrong'), clientOptions);
    const error = await client.connect().catch((e) => e);
    expect(error).to.be.instanceOf(Error);
    expect(String(error.message)).to.match(/Authentication failed/);
  });

  it('fails commands through failCommand: errorCode, closeConnection, blockConnection, times and appName', async function () {
    server = await new EmbeddedServer().start();
    client = await new MongoClient(`${server.uri}&appName=victim`, { ...clientOptions, retryReads: false }).connect();
    const admin = client.db('admin');

    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], errorCode: 91 } });
    const failed = await admin.command({ ping: 1 }).catch((e) => e);
    expect(failed).to.be.instanceOf(MongoServerError);
    expect(failed.code).to.equal(91);
    expect(await admin.command({ ping: 1 })).to.include({ ok: 1 }); // times: 1 is used up

    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true } });
    const closed = await admin.command({ ping: 1 }).catch((e) => e);
    expect(closed).to.be.instanceOf(MongoNetworkError);

    await admin.command({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 200 } });
    const started = Date.now();
    expect(await admin.command({ ping: 1 })).to.include({ ok: 1 });
    expect(Date.now() - started).to.be.at.least(190);

    await admin.command({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['ping'], errorCode: 2, appName: 'someone-else' } });
    expect(await admin.command({ ping: 1 })).to.include({ ok: 1 }); // not this client's appName
    await admin.command({ configureFailPoint: 'failCommand', mode: 'off' });
  });
});
