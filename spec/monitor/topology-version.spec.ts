/**
 * topologyVersion: reading one from a reply, and comparing two (server monitoring spec, "topologyVersion"; SDAM spec,
 * "topologyVersion Comparison").
 */
import { Long, ObjectId } from 'bson';
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
});
