import { expect } from 'chai';
import * as net from 'node:net';
import type { Document } from 'bson';
import { EmbeddedServer } from '../../lib/testing';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import { decodeOpReply, encodeOpQuery } from '../../lib/connection/op-query';
import { MessageFramer, OpCode } from '../../lib/connection/wire-protocol';
import { compressMessage } from '../../lib/connection/op-compressed';
import { eventually } from '../support/endpoint';

/** A bare client: one socket, raw OP_MSG, no pool and no handshake. */
async function rawClient(address: string): Promise<{ socket: net.Socket; send(doc: Document): Promise<Document>; close(): void }> {
  const [host, port] = address.split(':');
  const socket = net.connect({ host, port: Number(port) });
  await new Promise((r) => socket.once('connect', r));
  const framer = new MessageFramer();
  let requestId = 100;
  return {
    socket,
    send(doc) {
      return new Promise((resolve) => {
        socket.once('data', (chunk: Buffer) => resolve(decodeOpMsg(framer.push(chunk)[0].body).document));
        socket.write(encodeOpMsg(++requestId, 0, doc));
      });
    },
    close: () => socket.destroy(),
  };
}

describe('EmbeddedServer', function () {
  let server: EmbeddedServer;
  beforeEach(async function () {
    server = await new EmbeddedServer().start();
  });
  afterEach(async function () {
    await server.stop();
  });

  it('answers hello with isWritablePrimary and legacy isMaster with ismaster, each with its connectionId', async function () {
    const a = await rawClient(server.address);
    const b = await rawClient(server.address);
    const hello = await a.send({ hello: 1, $db: 'admin' });
    const legacy = await b.send({ isMaster: 1, helloOk: true, $db: 'admin' });
    expect(hello).to.include({ isWritablePrimary: true, helloOk: true, ok: 1, connectionId: 1 });
    expect(legacy).to.include({ ismaster: true, ok: 1, connectionId: 2 });
    expect(legacy.maxWireVersion).to.be.a('number');
    a.close();
    b.close();
  });

  it('answers ping, buildInfo and unknown commands', async function () {
    const c = await rawClient(server.address);
    expect(await c.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(await c.send({ buildInfo: 1, $db: 'admin' })).to.include({ version: '8.0.0', ok: 1 });
    expect(await c.send({ find: 'things', $db: 'test' })).to.deep.equal({ ok: 1 });
    c.close();
  });

  it('counts its open connections', async function () {
    expect(server.openConnections).to.equal(0);
    const c = await rawClient(server.address);
    expect(await eventually(() => server.openConnections === 1)).to.equal(true);
    c.close();
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
    expect(server.connectionsAccepted).to.equal(1);
  });

  it('answers a legacy OP_QUERY hello with OP_REPLY, and closes the connection on any other OP_QUERY', async function () {
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const reply = await new Promise<{ opCode: number; doc: Document }>((resolve) => {
      socket.once('data', (chunk: Buffer) => {
        const m = new MessageFramer().push(chunk)[0];
        resolve({ opCode: m.header.opCode, doc: decodeOpReply(m.body) });
      });
      socket.write(encodeOpQuery(1, 'admin.$cmd', { isMaster: 1, helloOk: true, client: { application: { name: 'legacy' } } }));
    });
    expect(reply.opCode).to.equal(OpCode.OP_REPLY);
    expect(reply.doc).to.include({ ismaster: true, helloOk: true, ok: 1 });
    const closed = new Promise((r) => socket.once('close', r));
    socket.write(encodeOpQuery(2, 'test.things', { find: 'things' }));
    await closed;
  });

  it('closes client connections from the server side: those selected (by appName), or all, and keeps listening', async function () {
    const a = await rawClient(server.address);
    const b = await rawClient(server.address);
    const c = await rawClient(server.address);
    await a.send({ hello: 1, client: { application: { name: 'victim' } }, $db: 'admin' });
    await b.send({ hello: 1, client: { application: { name: 'bystander' } }, $db: 'admin' });
    await c.send({ hello: 1, client: { application: { name: 'victim' } }, $db: 'admin' });

    expect(server.closeConnections((client) => client.appName === 'victim')).to.equal(2);
    expect(await eventually(() => a.socket.destroyed && c.socket.destroyed)).to.equal(true);
    expect(b.socket.destroyed).to.equal(false);
    expect(await b.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(await eventually(() => server.openConnections === 1)).to.equal(true);
    expect(server.closeConnections((client) => client.appName === 'victim')).to.equal(0);

    const d = await rawClient(server.address); // still listening
    expect(await d.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(server.closeConnections()).to.equal(2);
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('negotiates only the compressors it accepts', async function () {
    const c = await rawClient(server.address);
    expect((await c.send({ hello: 1, compression: ['snappy', 'zlib'], $db: 'admin' })).compression).to.deep.equal(['zlib']);
    c.close();
  });

  it('accepts a compressed request only once a compressor was negotiated, as a mongod does', async function () {
    const ping = (requestId: number): Buffer => compressMessage(encodeOpMsg(requestId, 0, { ping: 1, $db: 'admin' }));
    const negotiated = await rawClient(server.address);
    await negotiated.send({ hello: 1, compression: ['zlib'], $db: 'admin' });
    const reply = new Promise<Buffer>((resolve) => negotiated.socket.once('data', resolve));
    negotiated.socket.write(ping(7));
    expect((await reply).readInt32LE(12), 'an OP_COMPRESSED reply').to.equal(OpCode.OP_COMPRESSED);
    negotiated.close();

    const plain = await rawClient(server.address);
    await plain.send({ hello: 1, $db: 'admin' }); // no compression offered
    const closed = new Promise((resolve) => plain.socket.once('close', resolve));
    plain.socket.write(ping(8));
    await closed; // refused: the endpoint closes the connection
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });
});

