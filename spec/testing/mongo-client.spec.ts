/**
 * The embedded endpoint checked by a client nobody here wrote: the official `mongodb` driver's MongoClient connects
 * (with and without authentication), pings, sees the fail points act as a real mongod's would, and discovers and
 * follows a replica set of endpoints (option `replicaSetMember`).
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

  it('a replica set of two endpoints whose primary is the second host: the driver discovers it, writes there, and follows a step down and an election at once', async function () {
    const first = await new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary' } }).start();
    server = await new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'primary' } }).start();
    try {
      const hosts = [first.address, server.address];
      first.setReplicaSetHosts(hosts);
      server.setReplicaSetHosts(hosts);
      const inserts = new Map<EmbeddedServer, number>([[first, 0], [server, 0]]);
      for (const member of [first, server]) member.handle('insert', () => (inserts.set(member, inserts.get(member)! + 1), { n: 1, ok: 1 }));
      const primaries: string[] = [];
      client = new MongoClient(`mongodb://${hosts.join(',')}/?replicaSet=rs0`, { ...clientOptions, retryWrites: false });
      client.on('topologyDescriptionChanged', (event) => {
        for (const [address, description] of event.newDescription.servers) if (description.type === 'RSPrimary') primaries.push(address);
      });
      await client.connect();
      await client.db('test').collection('c').insertOne({ x: 1 });
      expect([inserts.get(first), inserts.get(server)]).to.deep.equal([0, 1]);
      // A secondary read preference reaches the secondary, which runs it.
      const counts = new Map<EmbeddedServer, number>([[first, 0], [server, 0]]);
      for (const member of [first, server]) member.handle('count', () => (counts.set(member, counts.get(member)! + 1), { n: 0, ok: 1 }));
      expect(await client.db('test').command({ count: 'c' }, { readPreference: 'secondary' })).to.include({ ok: 1 });
      expect([counts.get(first), counts.get(server)]).to.deep.equal([1, 0]);

      const started = Date.now();
      server.setReplicaSetMemberState('secondary');
      first.setReplicaSetMemberState('primary');
      while (primaries.at(-1) !== first.address && Date.now() - started < 5_000) await new Promise((r) => setTimeout(r, 10));
      // The streaming monitors hear of it at once, not at the next heartbeat (10 s).
      expect(primaries.at(-1)).to.equal(first.address);
      expect(Date.now() - started).to.be.below(2_000);
      await client.db('test').collection('c').insertOne({ x: 2 });
      expect([inserts.get(first), inserts.get(server)]).to.deep.equal([1, 1]);
      expect(server.openConnections).to.be.above(0);
    } finally {
      await client?.close();
      client = undefined;
      await first.stop();
    }
  });
});
