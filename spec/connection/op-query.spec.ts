/**
 * The legacy OP_QUERY request and OP_REPLY reply (lib/connection/op-query.ts): the bytes each encoder writes, as the
 * wire protocol lays them out, and the decoders' refusal of a body cut short or malformed, each with its own message.
 */
import { expect } from 'chai';
import { serialize } from 'bson';
import { decodeOpQuery, decodeOpReply, encodeOpQuery, encodeOpReply } from '../../lib/connection/op-query';
import { HEADER_LENGTH, MessageFramer, OpCode, WireProtocolError } from '../../lib/connection/wire-protocol';

/** The body of the OP_QUERY of `name` and `query`: flags, the NUL-terminated name, skip, return, the document. */
function queryBody(name: Uint8Array, numbers: Uint8Array, query: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([0, 0, 0, 0]), name, numbers, query]);
}

/** `skip` and `return` as the two little-endian int32 after the name. */
function numbers(skip: number, count: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeInt32LE(skip, 0);
  b.writeInt32LE(count, 4);
  return b;
}

/** What `decode` throws for `body`: the WireProtocolError's message. */
function refusal(decode: (body: Buffer) => unknown, body: Buffer): string {
  try {
    decode(body);
  } catch (error) {
    expect(error).to.be.instanceOf(WireProtocolError);
    return (error as Error).message;
  }
  throw new Error('decoded');
}

describe('OP_QUERY and OP_REPLY (legacy opcodes)', function () {
  it('encodes an OP_QUERY as the wire protocol lays it out: header, flags 0, the name and its NUL, skip 0, return -1, the query', function () {
    const query = { isMaster: 1, helloOk: true };
    const message = encodeOpQuery(7, 'admin.$cmd', query);
    const [framed] = new MessageFramer().push(message);
    expect(framed!.header).to.deep.equal({ messageLength: message.length, requestId: 7, responseTo: 0, opCode: OpCode.OP_QUERY });
    const bson = serialize(query);
    expect(message.length).to.equal(HEADER_LENGTH + 4 + 'admin.$cmd\0'.length + 8 + bson.length);
    expect(message.subarray(HEADER_LENGTH)).to.deep.equal(queryBody(Buffer.from('admin.$cmd\0'), numbers(0, -1), bson));
    // And back: what the embedded endpoint reads of it.
    expect(decodeOpQuery(framed!.body)).to.deep.equal({ flags: 0, fullCollectionName: 'admin.$cmd', numberToSkip: 0, numberToReturn: -1, query });
  });

  it('decodes the flags, a name of several UTF-8 bytes, skip and return as written', function () {
    const body = queryBody(Buffer.from('dé.$cmd\0'), numbers(3, 5), serialize({ ping: 1 }));
    body.writeInt32LE(4, 0); // slaveOk
    expect(decodeOpQuery(body)).to.deep.equal({ flags: 4, fullCollectionName: 'dé.$cmd', numberToSkip: 3, numberToReturn: 5, query: { ping: 1 } });
  });

  it('refuses an OP_QUERY body cut short, a name without its NUL, or one with no room for skip and return', function () {
    expect(refusal(decodeOpQuery, Buffer.from([0, 0, 0]))).to.equal('OP_QUERY too short');
    expect(refusal(decodeOpQuery, Buffer.from([0, 0, 0, 0, 0x61, 0x62]))).to.equal('OP_QUERY collection name is not terminated');
    // The flags alone, and a long name without its NUL (as long as skip, return and a document would be).
    expect(refusal(decodeOpQuery, Buffer.alloc(4))).to.equal('OP_QUERY collection name is not terminated');
    expect(refusal(decodeOpQuery, Buffer.concat([Buffer.alloc(4), Buffer.from('abcdefghijklmnop')]))).to.equal('OP_QUERY collection name is not terminated');
    // The NUL with 8 bytes after it and no document: the document is what is missing.
    expect(refusal(decodeOpQuery, queryBody(Buffer.from('a\0'), numbers(0, -1), Buffer.alloc(0)))).to.equal('BSON document overruns the message');
    // The NUL with 7 bytes after it: skip and return do not fit.
    expect(refusal(decodeOpQuery, queryBody(Buffer.from('a\0'), Buffer.alloc(7), Buffer.alloc(0)))).to.equal('OP_QUERY collection name is not terminated');
    // An empty name (the NUL right after the flags) is read as such.
    expect(decodeOpQuery(queryBody(Buffer.from('\0'), numbers(0, 1), serialize({ a: 1 })))).to.include({ fullCollectionName: '', numberToReturn: 1 });
  });

  it('encodes an OP_REPLY of one document: flags 0, cursor 0, from 0, one returned; and decodes it', function () {
    const message = encodeOpReply(9, 7, { ok: 1, n: 2 });
    const [framed] = new MessageFramer().push(message);
    expect(framed!.header).to.deep.equal({ messageLength: message.length, requestId: 9, responseTo: 7, opCode: OpCode.OP_REPLY });
    const body = framed!.body;
    expect([body.readInt32LE(0), body.readBigInt64LE(4), body.readInt32LE(12), body.readInt32LE(16)]).to.deep.equal([0, 0n, 0, 1]);
    expect(decodeOpReply(body)).to.deep.equal({ ok: 1, n: 2 });
  });

  it('refuses an OP_REPLY body cut short or that returns no document', function () {
    expect(refusal(decodeOpReply, Buffer.alloc(19))).to.equal('OP_REPLY too short');
    // 20 bytes, numberReturned 0: none.
    expect(refusal(decodeOpReply, Buffer.alloc(20))).to.equal('OP_REPLY holds no document');
    const none = encodeOpReply(1, 1, { ok: 1 }).subarray(HEADER_LENGTH);
    none.writeInt32LE(0, 16);
    expect(refusal(decodeOpReply, none)).to.equal('OP_REPLY holds no document');
    // 20 bytes that say one is returned, and none follows.
    const promised = Buffer.alloc(20);
    promised.writeInt32LE(1, 16);
    expect(refusal(decodeOpReply, promised)).to.equal('BSON document overruns the message');
  });
});
