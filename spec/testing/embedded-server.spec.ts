import { expect } from 'chai';
import * as net from 'node:net';
import type { Document } from 'bson';
import { EmbeddedServer } from '../../lib/testing';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import { decodeOpReply, encodeOpQuery } from '../../lib/connection/op-query';
import { MessageFramer, OpCode } from '../../lib/connection/wire-protocol';
import { eventually } from '../support/endpoint';

/** A bare client: one socket, raw OP_MSG, no pool and no handshake. */
async function rawClient(address: string): Promise<{ send(doc: Document): Promise<Document>; close(): void }> {
  const [host, port] = address.split(':');
  const socket = net.connect({ host, port: Number(port) });
  await new Promise((r) => socket.once('connect', r));
  const framer = new MessageFramer();
  let requestId = 100;
  return {
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

  it('negotiates only the compressors it accepts', async function () {
    const c = await rawClient(server.address);
    expect((await c.send({ hello: 1, compression: ['snappy', 'zlib'], $db: 'admin' })).compression).to.deep.equal(['zlib']);
    c.close();
  });
});

