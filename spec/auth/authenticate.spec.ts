import { expect } from 'chai';
import { MongoCredentials } from '../../lib';
import { saslSupportedMechsRequest, selectMechanism } from '../../lib/auth/authenticate';

describe('mechanism negotiation (auth spec, "Mechanism Negotiation via Handshake", "Default Authentication Methods")', function () {
  it('asks for the mechanisms of <source>.<username>, the user name as given (never SASLprep\'d), only when none is set', function () {
    // SASLprep would map U+2168 (ROMAN NUMERAL NINE) to "IX" and drop the soft hyphen U+00AD.
    expect(saslSupportedMechsRequest(new MongoCredentials({ username: '\u2168', password: 'p' }))).to.equal('admin.\u2168');
    expect(saslSupportedMechsRequest(new MongoCredentials({ username: 'I\u00ADX', password: 'p', source: 'sales' }))).to.equal('sales.I\u00ADX');
    expect(saslSupportedMechsRequest(new MongoCredentials({ username: 'u', password: 'p', mechanism: 'SCRAM-SHA-1' }))).to.equal(undefined);
  });

  it('picks SCRAM-SHA-256 when listed, else SCRAM-SHA-1 (listed or not), ignoring unknown names and malformed lists', function () {
    const negotiated = new MongoCredentials({ username: 'u', password: 'p' });
    const cases: [unknown, string][] = [
      [['SCRAM-SHA-1', 'SCRAM-SHA-256'], 'SCRAM-SHA-256'],
      [['SCRAM-SHA-256'], 'SCRAM-SHA-256'],
      [['SCRAM-SHA-1'], 'SCRAM-SHA-1'],
      [[], 'SCRAM-SHA-1'],
      [undefined, 'SCRAM-SHA-1'],
      [['PLAIN', 'GSSAPI'], 'SCRAM-SHA-1'], // never another mechanism as the default
      [['SCRAM-SHA-512', 42, null, { x: 1 }, 'SCRAM-SHA-256'], 'SCRAM-SHA-256'], // unknown entries are no error
      ['SCRAM-SHA-256', 'SCRAM-SHA-1'], // not a list: not validated, not an error
      [{ 0: 'SCRAM-SHA-256' }, 'SCRAM-SHA-1'],
    ];
    for (const [listed, expected] of cases) {
      const reply = listed === undefined ? { ok: 1 } : { ok: 1, saslSupportedMechs: listed };
      expect(selectMechanism(negotiated, reply), JSON.stringify(listed)).to.equal(expected);
    }
  });

  it('honours a mechanism the user set, whatever the server lists', function () {
    const sha1 = new MongoCredentials({ username: 'u', password: 'p', mechanism: 'SCRAM-SHA-1' });
    expect(selectMechanism(sha1, { ok: 1, saslSupportedMechs: ['SCRAM-SHA-256'] })).to.equal('SCRAM-SHA-1');
    const sha256 = new MongoCredentials({ username: 'u', password: 'p', mechanism: 'SCRAM-SHA-256' });
    expect(selectMechanism(sha256, { ok: 1, saslSupportedMechs: ['SCRAM-SHA-1'] })).to.equal('SCRAM-SHA-256');
    expect(selectMechanism(sha256, { ok: 1 })).to.equal('SCRAM-SHA-256');
  });
});
