/**
 * Client.appendMetadata() and the `driverInfo` option of connect(): what the server receives in the handshake of the
 * connections made before and after an append, and that an append opens, closes and re-handshakes no connection.
 */
import { expect } from 'chai';
import type { Document } from 'bson';
import { connect, InvalidOptionError, type Client, type ClientEvent, type DriverInfoOptions } from '../../lib';
import { DRIVER_INFO } from '../../lib/version';
import { EmbeddedServer } from '../../lib/testing';
import { eventually } from '../support/endpoint';

/** One handshake the server received: the server-side id of its connection and its `client` document. */
interface Handshake {
  readonly connectionId: number;
  readonly client: Document;
}

describe('Client.appendMetadata() and the driverInfo option', function () {
  let server: EmbeddedServer;
  let client: Client | undefined;
  /** Every handshake the server received, in order. */
  let handshakes: Handshake[];

  beforeEach(async function () {
    server = await new EmbeddedServer().start();
    handshakes = [];
    server.handle('ismaster', (command, connection) => {
      handshakes.push({ connectionId: connection.id, client: command.client as Document });
      return { ismaster: true, helloOk: true, maxWireVersion: 21, ok: 1 };
    });
  });

  afterEach(async function () {
    await client?.close();
    client = undefined;
    await server.stop();
  });

  const names = (): string[] => handshakes.map((h) => h.client.driver.name as string);

  it('the driverInfo option of connect() reaches the handshakes of pools and monitors alike', async function () {
    client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500`, { driverInfo: { name: 'odm', version: '2.1.0', platform: 'edge' } });
    await client.command('admin', { ping: 1 });
    expect(handshakes).to.have.length(2); // the monitor's connection, then the pool's
    for (const { client: sent } of handshakes) {
      expect(sent.driver).to.deep.equal({ name: `${DRIVER_INFO.name}|odm`, version: `${DRIVER_INFO.version}|2.1.0` });
      expect(sent.platform).to.match(/\|edge$/);
    }
  });

  it("applies to connections created afterwards only: an established one is neither re-handshaken, closed nor replaced", async function () {
    client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500`, { driverInfo: { name: 'odm', version: '2.1.0' } });
    const closed: ClientEvent[] = [];
    client.events$.subscribe((e) => {
      if (e.type === 'ConnectionClosed' || e.type === 'ConnectionCreated') closed.push(e);
    });
    await client.command('admin', { ping: 1 });
    expect(names()).to.deep.equal([`${DRIVER_INFO.name}|odm`, `${DRIVER_INFO.name}|odm`]);
    const accepted = server.connectionsAccepted;
    const open = server.openConnections;
    const events = closed.length;

    client.appendMetadata({ name: 'framework', version: '3.0', platform: 'edge' });
    // The pooled connection serves the next commands as it is; the monitor keeps its connection.
    await client.command('admin', { ping: 1 });
    await client.command('admin', { ping: 1 });
    expect(server.connectionsAccepted).to.equal(accepted);
    expect(server.openConnections).to.equal(open);
    expect(handshakes).to.have.length(2);
    expect(closed).to.have.length(events);

    // A connection created now sends the appended metadata.
    const pool = [...client.pools.values()][0];
    const held = await pool.checkOut();
    const created = await pool.checkOut();
    pool.checkIn(held);
    pool.checkIn(created);
    expect(server.connectionsAccepted).to.equal(accepted + 1);
    expect(handshakes).to.have.length(3);
    const last = handshakes[2].client;
    expect(last.driver).to.deep.equal({ name: `${DRIVER_INFO.name}|odm|framework`, version: `${DRIVER_INFO.version}|2.1.0|3.0` });
    expect(last.platform).to.match(/\|edge$/);
    // One handshake per connection, each its first command.
    expect(new Set(handshakes.map((h) => h.connectionId)).size).to.equal(3);
  });

  it("reaches a monitor's next connection too", async function () {
    client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500`);
    // Before the monitor's first check (monitors start on the next microtask): its first connection carries it.
    client.appendMetadata({ name: 'odm' });
    await client.command('admin', { ping: 1 });
    expect(names()).to.deep.equal([`${DRIVER_INFO.name}|odm`, `${DRIVER_INFO.name}|odm`]);
  });

  it('appends a driver info equal to one given before (at creation or appended) only once, "" counting as unset', async function () {
    client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500`, { driverInfo: { name: 'odm', version: '2.1.0' } });
    client.appendMetadata({ name: 'odm', version: '2.1.0', platform: '' });
    client.appendMetadata({ name: 'framework', version: '' });
    client.appendMetadata({ name: 'framework' });
    client.appendMetadata({ name: 'framework', version: undefined, platform: '' });
    client.appendMetadata({ name: '', version: '' });
    await client.command('admin', { ping: 1 });
    for (const { client: sent } of handshakes) {
      expect(sent.driver).to.deep.equal({ name: `${DRIVER_INFO.name}|odm|framework`, version: `${DRIVER_INFO.version}|2.1.0` });
    }
    expect(handshakes).to.have.length(2);
  });

  it("refuses a string containing '|' or a value of the wrong type (InvalidOptionError), leaving the metadata unchanged", async function () {
    client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500`);
    const refused = (driverInfo: unknown): InvalidOptionError => {
      try {
        client?.appendMetadata(driverInfo as DriverInfoOptions);
      } catch (error) {
        expect(error).to.be.instanceOf(InvalidOptionError);
        return error as InvalidOptionError;
      }
      throw new Error(`${JSON.stringify(driverInfo)} was appended`);
    };
    expect(refused({ name: 'odm|x' })).to.include({ option: 'driverInfo.name' });
    expect(refused({ name: 'odm', version: '1|2' })).to.include({ option: 'driverInfo.version' });
    expect(refused({ name: 'odm', platform: 'a|b' }).message).to.match(/\(driverInfo.platform must be a string without '\|' \(the delimiter of appended metadata\), or absent\)$/);
    expect(refused({ name: 'odm', version: 2 })).to.include({ option: 'driverInfo.version' });
    expect(refused(undefined)).to.include({ option: 'driverInfo' });
    expect(refused({ name: 'n'.repeat(300), version: 'v'.repeat(200) })).to.include({ option: 'driverInfo' });
    expect(() => connect(`mongodb://${server.address}`, { driverInfo: { name: 'a|b' } })).to.throw(InvalidOptionError, /driverInfo.name/);
    await client.command('admin', { ping: 1 });
    expect(names()).to.deep.equal([DRIVER_INFO.name, DRIVER_INFO.name]);
    await client.close();
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });
});
