import { Binary } from 'bson';
import { expect } from 'chai';
import { keptHelloReply } from '../../lib/connection/kept-hello';

describe('keptHelloReply', function () {
  const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.e30.secret';

  it('leaves out speculativeAuthenticate, whatever the mechanism, and leaves the reply it was given as it was', function () {
    const reply = { isWritablePrimary: true, maxWireVersion: 25, speculativeAuthenticate: { conversationId: 1, done: false, payload: new Binary(Buffer.from('r=nonce,s=salt,i=4096')) } };
    const kept = keptHelloReply(reply);
    expect(kept).to.deep.equal({ isWritablePrimary: true, maxWireVersion: 25 });
    expect(reply, 'the reply the authentication reads').to.have.property('speculativeAuthenticate');
  });

  it('returns the reply itself when there is nothing to take out', function () {
    const reply = { isWritablePrimary: true, note: 'nothing secret' };
    expect(keptHelloReply(reply)).to.equal(reply);
    expect(keptHelloReply(reply, TOKEN)).to.equal(reply);
  });

  it('replaces every quotation of the access token sent speculatively: strings, keys, binary values, at any depth', function () {
    const reply = { ok: 1, note: `got ${TOKEN}`, [TOKEN]: 1, nested: [{ deep: { jwt: TOKEN } }], raw: new Binary(Buffer.from(`jwt=${TOKEN}`)), speculativeAuthenticate: { echo: TOKEN } };
    const kept = keptHelloReply(reply, TOKEN);
    const text = JSON.stringify(kept) + Buffer.from((kept.raw as Binary).buffer).toString('utf8');
    expect(text).to.not.include(TOKEN);
    expect(kept.note).to.equal('got <access token not shown>');
    expect(kept.nested).to.deep.equal([{ deep: { jwt: '<access token not shown>' } }]);
    expect(kept).to.have.property('<access token not shown>', 1);
    expect(kept).to.not.have.property('speculativeAuthenticate');
  });
});
