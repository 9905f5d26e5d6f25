/**
 * Client.appendMetadata() and the `driverInfo` option of connect(): what the server receives in the handshake of the
 * connections made before and after an append, and that an append opens, closes and re-handshakes no connection.
 * Against MONGODB_URI's server when it is set (skipped over TLS, which the proxy reading the handshakes cannot read),
 * else the embedded endpoint.
 */
import { expect } from 'chai';
import type { Document } from 'bson';
import { connect, InvalidOptionError, type Client, type ClientEvent, type ClientOptions, type DriverInfoOptions } from '../../lib';
import { DRIVER_INFO } from '../../lib/version';
import { eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { startWireProxy, type WireProxy } from '../support/wire-proxy';

/** One handshake the server received: the number the proxy gave its connection, and its `client` document. */
interface Handshake {
  readonly connectionId: number;
  readonly client: Document;
}

describe(`Client.appendMetadata() and the driverInfo option (${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
  let endpoint: TestEndpoint | undefined;
  let proxy: WireProxy | undefined;
  let client: Client | undefined;
  /** Every handshake the server received, in order. */
  let handshakes: Handshake[];
  /** `mongodb://<the proxy>/?heartbeatFrequencyMS=500`: every connection of the client goes through the proxy. */
  let uri: string;
  /** The options of connect() the server needs (credentials, TLS), with `extra`. */
  const options = (extra: ClientOptions = {}): ClientOptions => ({ ...endpoint!.connectionOptions, ...extra });
  const accepted = (): number => proxy!.sockets.accepted;
  const open = (): number => proxy!.sockets.accepted - proxy!.sockets.closed;

  beforeEach(async function () {
    endpoint = await startTestEndpoint();
    if (endpoint.connectionOptions.tls) {
      console.log('      skipped: MONGODB_URI uses TLS, which the proxy reading the handshakes cannot read');
      this.skip();
    }
    handshakes = [];
    proxy = await startWireProxy(endpoint.address, {
      request: (command, connection) => {
        if (command.client !== undefined) handshakes.push({ connectionId: connection, client: command.client as Document });
        return command;
      },
    });
    uri = `mongodb://${proxy.address}/?heartbeatFrequencyMS=500`;
  });

  afterEach(async function () {
    await client?.close();
    client = undefined;
    await proxy?.stop();
    proxy = undefined;
    await endpoint?.stop();
    endpoint = undefined;
  });

  const names = (): string[] => handshakes.map((h) => h.client.driver.name as string);

  it('the driverInfo option of connect() reaches the handshakes of pools and monitors alike', async function () {
    client = connect(uri, options({ driverInfo: { name: 'odm', version: '2.1.0', platform: 'edge' } }));
    await client.command('admin', { ping: 1 });
    expect(handshakes).to.have.length(2); // the monitor's connection, then the pool's
    for (const { client: sent } of handshakes) {
      expect(sent.driver).to.deep.equal({ name: `${DRIVER_INFO.name}|odm`, version: `${DRIVER_INFO.version}|2.1.0` });
      expect(sent.platform).to.match(/\|edge$/);
    }
  });

  it("applies to connections created afterwards only: an established one is neither re-handshaken, closed nor replaced", async function () {
    client = connect(uri, options({ driverInfo: { name: 'odm', version: '2.1.0' } }));
    const closed: ClientEvent[] = [];
    client.events$.subscribe((e) => {
      if (e.type === 'ConnectionClosed' || e.type === 'ConnectionCreated') closed.push(e);
    });
    await client.command('admin', { ping: 1 });
    expect(names()).to.deep.equal([`${DRIVER_INFO.name}|odm`, `${DRIVER_INFO.name}|odm`]);
    const acceptedBefore = accepted();
    const openBefore = open();
    const events = closed.length;

    client.appendMetadata({ name: 'framework', version: '3.0', platform: 'edge' });
    // The pooled connection serves the next commands as it is; the monitor keeps its connection.
    await client.command('admin', { ping: 1 });
    await client.command('admin', { ping: 1 });
    expect(accepted()).to.equal(acceptedBefore);
    expect(open()).to.equal(openBefore);
    expect(handshakes).to.have.length(2);
    expect(closed).to.have.length(events);

    // A connection created now sends the appended metadata.
    const pool = [...client.pools.values()][0];
    const held = await pool.checkOut();
    const created = await pool.checkOut();
    pool.checkIn(held);
    pool.checkIn(created);
    expect(accepted()).to.equal(acceptedBefore + 1);
    expect(handshakes).to.have.length(3);
    const last = handshakes[2].client;
    expect(last.driver).to.deep.equal({ name: `${DRIVER_INFO.name}|odm|framework`, version: `${DRIVER_INFO.version}|2.1.0|3.0` });
    expect(last.platform).to.match(/\|edge$/);
    // One handshake per connection, each its first command.
    expect(new Set(handshakes.map((h) => h.connectionId)).size).to.equal(3);
  });

  it("reaches a monitor's next connection too", async function () {
    client = connect(uri, options());
    // Before the monitor's first check (monitors start on the next microtask): its first connection carries it.
    client.appendMetadata({ name: 'odm' });
    await client.command('admin', { ping: 1 });
    expect(names()).to.deep.equal([`${DRIVER_INFO.name}|odm`, `${DRIVER_INFO.name}|odm`]);
  });

  it('appends a driver info equal to one given before (at creation or appended) only once, "" counting as unset', async function () {
    client = connect(uri, options({ driverInfo: { name: 'odm', version: '2.1.0' } }));
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
    client = connect(uri, options());
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
    expect(() => connect(uri, options({ driverInfo: { name: 'a|b' } }))).to.throw(InvalidOptionError, /driverInfo.name/);
    await client.command('admin', { ping: 1 });
    expect(names()).to.deep.equal([DRIVER_INFO.name, DRIVER_INFO.name]);
    await client.close();
    expect(await eventually(() => open() === 0)).to.equal(true);
  });
});
