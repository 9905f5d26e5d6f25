import { expect } from 'chai';
import { compressWith, compressorUnavailable, decompressWith } from '../../lib/connection/op-compressed';
import { WireProtocolError } from '../../lib/errors';

for (const name of ['snappy', 'zstd'] as const) {
  describe(`OP_COMPRESSED ${name} codec`, function () {
    beforeEach(function () {
      const why = compressorUnavailable(name);
      if (why !== undefined) this.skip(); // e.g. zstd on Node.js 20: `why` names the reason
    });
    const body = Buffer.from('{"insert":"c","documents":[' + '"abcdefgh",'.repeat(10000) + ']}');

    it('round-trips a body', () => {
      const c = compressWith(name, body);
      expect(c.length).to.be.lessThan(body.length / 10);
      expect(decompressWith(name, c, body.length).equals(body)).to.equal(true);
    });
    it('refuses data announced smaller than it inflates', () => {
      expect(() => decompressWith(name, compressWith(name, body), body.length - 1)).to.throw(WireProtocolError);
    });
    it('refuses data announced larger than it holds', () => {
      expect(() => decompressWith(name, compressWith(name, body), body.length + 1)).to.throw(WireProtocolError);
    });
    it('refuses garbage', () => {
      expect(() => decompressWith(name, Buffer.from([0x10, 1, 2, 3, 4, 5, 6]), 16)).to.throw(WireProtocolError);
    });
    it('refuses a huge announced size without allocating it', () => {
      expect(() => decompressWith(name, compressWith(name, Buffer.from('x')), 47_000_000)).to.throw(WireProtocolError);
    });
  });
}
