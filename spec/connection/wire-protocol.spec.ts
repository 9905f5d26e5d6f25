import { expect } from 'chai';
import { serialize } from 'bson';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import { HEADER_LENGTH, MessageFramer, OpCode, WireProtocolError } from '../../lib/connection/wire-protocol';

describe('wire protocol (OP_MSG framing)', function () {
  it('encodes a header and one body section that decode back to the same document', function () {
    const bytes = encodeOpMsg(7, 3, { ping: 1, $db: 'admin' });
    expect(bytes.readInt32LE(0)).to.equal(bytes.length);
    expect(bytes.readInt32LE(4)).to.equal(7);
    expect(bytes.readInt32LE(8)).to.equal(3);
    expect(bytes.readInt32LE(12)).to.equal(OpCode.OP_MSG);
    const msg = decodeOpMsg(bytes.subarray(HEADER_LENGTH));
    expect(msg.document).to.deep.equal({ ping: 1, $db: 'admin' });
    expect(msg.flags).to.equal(0);
  });

  it('decodes document sequences (kind 1) and ignores a trailing checksum', function () {
    const body = Buffer.from(serialize({ insert: 'c' }));
    const docs = [Buffer.from(serialize({ a: 1 })), Buffer.from(serialize({ a: 2 }))];
    const id = Buffer.from('documents\0');
    const seqSize = Buffer.alloc(4);
    seqSize.writeInt32LE(4 + id.length + docs[0].length + docs[1].length);
    const flags = Buffer.alloc(4);
    flags.writeUInt32LE(1); // checksumPresent
    const msg = decodeOpMsg(Buffer.concat([flags, Buffer.from([0]), body, Buffer.from([1]), seqSize, id, ...docs, Buffer.alloc(4)]));
    expect(msg.document).to.deep.equal({ insert: 'c' });
    expect(msg.sequences.get('documents')).to.deep.equal([{ a: 1 }, { a: 2 }]);
  });

  const malformed: [string, Buffer, RegExp][] = [
    ['too short', Buffer.alloc(3), /too short/],
    ['unknown required flag bits', Buffer.concat([Buffer.from([4, 0, 0, 0, 0]), Buffer.from(serialize({ ok: 1 }))]), /unknown required flag/],
    ['an unknown section kind', Buffer.concat([Buffer.alloc(4), Buffer.from([9])]), /unknown section kind 9/],
    ['no body section', Buffer.alloc(4), /too short|no body section/],
    ['two body sections', Buffer.concat([Buffer.alloc(4), Buffer.from([0]), Buffer.from(serialize({})), Buffer.from([0]), Buffer.from(serialize({}))]), /more than one body/],
    ['a document overrunning the message', Buffer.concat([Buffer.alloc(4), Buffer.from([0, 50, 0, 0, 0, 0])]), /invalid size 50/],
    ['invalid BSON', Buffer.concat([Buffer.alloc(4), Buffer.from([0, 8, 0, 0, 0, 0x77, 0x61, 0, 0])]), /invalid BSON/],
  ];
  for (const [what, body, message] of malformed) {
    it(`rejects an OP_MSG with ${what}`, function () {
      expect(() => decodeOpMsg(body)).to.throw(WireProtocolError, message);
    });
  }

  it('frames messages split across chunks and several messages in one chunk', function () {
    const a = encodeOpMsg(1, 0, { a: 'x'.repeat(100) });
    const b = encodeOpMsg(2, 0, { b: 2 });
    const framer = new MessageFramer();
    const all = Buffer.concat([a, b]);
    expect(framer.push(all.subarray(0, 3))).to.have.length(0);
    expect(framer.push(all.subarray(3, 50))).to.have.length(0);
    const out = framer.push(all.subarray(50));
    expect(out.map((m) => m.header.requestId)).to.deep.equal([1, 2]);
    expect(decodeOpMsg(out[0].body).document).to.deep.equal({ a: 'x'.repeat(100) });
  });

  it('rejects a message longer than maxMessageSizeBytes, or shorter than a header', function () {
    const header = Buffer.alloc(16);
    header.writeInt32LE(1001, 0);
    expect(() => new MessageFramer(1000).push(header)).to.throw(WireProtocolError, /outside the allowed range 16\.\.1000/);
    header.writeInt32LE(4, 0);
    expect(() => new MessageFramer().push(header)).to.throw(WireProtocolError, /message length 4/);
  });
});
