/**
 * topologyVersion: reading one from a reply, and comparing two (server monitoring spec, "topologyVersion"; SDAM spec,
 * "topologyVersion Comparison").
 */
import { deserialize, Double, Int32, Long, ObjectId, serialize } from 'bson';
import { expect } from 'chai';
import { asTopologyVersion, compareTopologyVersion } from '../../lib/monitor/topology-version';

describe('topologyVersion', function () {
  const processId = new ObjectId();

  it('asTopologyVersion keeps an int64 counter, makes a safe integer one, and refuses anything else', function () {
    expect(asTopologyVersion({ processId, counter: Long.fromNumber(7) })).to.deep.equal({ processId, counter: Long.fromNumber(7) });
    const made = asTopologyVersion({ processId, counter: 7 });
    expect(Long.isLong(made?.counter), 'sent back as an int64, as the server requires').to.equal(true);
    expect(String(made?.counter)).to.equal('7');
    for (const value of [undefined, null, 7, 'x', { counter: 1 }, { processId, counter: 1.5 }, { processId, counter: '1' }, { processId }]) {
      expect(asTopologyVersion(value), JSON.stringify(value)).to.equal(undefined);
    }
  });

  it('asTopologyVersion reads a counter as the wire delivers it: int32, double or int64 as an int64, an unsafe double refused', function () {
    const read = (counter: unknown) => asTopologyVersion(deserialize(serialize({ topologyVersion: { processId, counter } })).topologyVersion);
    const counters = [new Int32(7), new Double(7), Long.fromNumber(7), Long.fromString('9223372036854775807'), new Double(2 ** 53 + 2), new Double(7.5)].map(read);
    expect(counters.map((v) => (v === undefined ? undefined : [Long.isLong(v.counter), String(v.counter), (v.processId as ObjectId).equals(processId)]))).to.deep.equal([
      [true, '7', true],
      [true, '7', true],
      [true, '7', true],
      [true, '9223372036854775807', true],
      undefined,
      undefined,
    ]);
  });

  it('compareTopologyVersion orders counters of one process, and takes the second as newer across processes or when either is missing', function () {
    const v = (counter: unknown, id = processId) => ({ processId: id, counter });
    expect(compareTopologyVersion(v(Long.fromNumber(2)), v(3))).to.equal(-1);
    expect(compareTopologyVersion(v(3n), v(Long.fromNumber(3)))).to.equal(0);
    expect(compareTopologyVersion(v(Long.fromString('9223372036854775807')), v(Long.fromString('9223372036854775806')))).to.equal(1);
    expect(compareTopologyVersion(v(5), v(1, new ObjectId())), 'a restarted server').to.equal(-1);
    expect(compareTopologyVersion(undefined, v(1))).to.equal(-1);
    expect(compareTopologyVersion(v(1), undefined)).to.equal(-1);
    expect(compareTopologyVersion(v(1.5), v(1)), 'a counter that is not an integer').to.equal(-1);
    expect(compareTopologyVersion({ processId: 'not an ObjectId', counter: 1 }, { processId: 'not an ObjectId', counter: 1 })).to.equal(-1);
  });

  it('compareTopologyVersion never throws for a processId that is not an ObjectId: those are never the same process', function () {
    // What a server (or a proxy) may send: asTopologyVersion keeps any processId but undefined, null too.
    const other = { toHexString: () => processId.toHexString() };
    expect(compareTopologyVersion({ processId: other, counter: 1 }, { processId, counter: 1 }), 'the same toHexString()').to.equal(0);
    for (const id of [null, undefined, {}, { toHexString: 'x' }, 42, 'x', Long.fromNumber(1)]) {
      const v = { processId: id, counter: 1 };
      expect(compareTopologyVersion(v, v), `${String(id)} against itself`).to.equal(-1);
      expect(compareTopologyVersion(v, { processId, counter: 1 }), `${String(id)} against an ObjectId`).to.equal(-1);
      expect(compareTopologyVersion({ processId, counter: 1 }, v), `an ObjectId against ${String(id)}`).to.equal(-1);
    }
  });
});
