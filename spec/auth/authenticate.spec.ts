import { expect } from 'chai';
import { Binary, type Document } from 'bson';
import { MongoCredentials } from '../../lib';
import { authenticate, saslSupportedMechsRequest, selectMechanism, speculativeStart } from '../../lib/auth/authenticate';
import type { ScramStart } from '../../lib/auth/scram';

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

describe('speculative authentication (handshake spec, "Speculative Authentication")', function () {
  it('speculates with the mechanism set, else SCRAM-SHA-256; the saslStart plus db (the credentials\' source)', function () {
    const negotiated = speculativeStart(new MongoCredentials({ username: 'u,=', password: 'p', source: 'sales' })) as ScramStart;
    expect(negotiated.mechanism).to.equal('SCRAM-SHA-256');
    expect(negotiated.speculativeAuthenticate).to.include({ saslStart: 1, mechanism: 'SCRAM-SHA-256', autoAuthorize: 1, db: 'sales' });
    expect(negotiated.speculativeAuthenticate.options).to.deep.equal({ skipEmptyExchange: true });
    expect(Buffer.from((negotiated.speculativeAuthenticate.payload as Binary).buffer).toString()).to.equal(`n,,n=u=2C=3D,r=${negotiated.clientNonce}`);
    expect(negotiated.command).to.not.have.property('db');
    const sha1 = speculativeStart(new MongoCredentials({ username: 'u', password: 'p', mechanism: 'SCRAM-SHA-1' }))!;
    expect(sha1.speculativeAuthenticate.mechanism).to.equal('SCRAM-SHA-1');
  });

  it('does not speculate with SCRAM-SHA-256 for a password SASLprep refuses, which a negotiated SCRAM-SHA-1 may still use', function () {
    // U+0007 (BELL) is a prohibited character (RFC 4013, section 2.3).
    expect(speculativeStart(new MongoCredentials({ username: 'u', password: 'bell\u0007' }))).to.equal(undefined);
    expect(speculativeStart(new MongoCredentials({ username: 'u', password: 'bell\u0007', mechanism: 'SCRAM-SHA-1' }))).to.not.equal(undefined);
  });

  it('goes on from the speculative answer only for the mechanism selected; otherwise the whole conversation runs', async function () {
    const credentials = new MongoCredentials({ username: 'u', password: 'p' });
    const speculative = speculativeStart(credentials) as ScramStart;
    const answer = { conversationId: 1, done: false, payload: new Binary(Buffer.from(`r=${speculative.clientNonce}xyz,s=c2FsdA==,i=4096`)) };
    const sent: string[] = [];
    const run = async (_db: string, cmd: Document): Promise<Document> => {
      sent.push(Object.keys(cmd)[0]);
      return { ok: 0, code: 18, errmsg: 'Authentication failed.' };
    };
    // SCRAM-SHA-256 listed: the answer is used, and the next command is saslContinue.
    await authenticate(run, credentials, { ok: 1, saslSupportedMechs: ['SCRAM-SHA-256'], speculativeAuthenticate: answer }, undefined, speculative).catch(() => undefined);
    // SCRAM-SHA-256 not listed: SCRAM-SHA-1 is selected, and its conversation starts anew.
    await authenticate(run, credentials, { ok: 1, saslSupportedMechs: ['SCRAM-SHA-1'], speculativeAuthenticate: answer }, undefined, speculative).catch(() => undefined);
    // No answer: the whole conversation.
    await authenticate(run, credentials, { ok: 1, saslSupportedMechs: ['SCRAM-SHA-256'] }, undefined, speculative).catch(() => undefined);
    expect(sent).to.deep.equal(['saslContinue', 'saslStart', 'saslStart']);
  });

  it('an aborted signal ends the whole conversation too (no speculative answer): nothing is sent', async function () {
    const credentials = new MongoCredentials({ username: 'u', password: 'p' });
    const sent: string[] = [];
    const run = async (_db: string, cmd: Document): Promise<Document> => {
      sent.push(Object.keys(cmd)[0]);
      const nonce = /r=([^,]+)/.exec(Buffer.from((cmd.payload as Binary).buffer).toString())![1];
      return { ok: 1, conversationId: 1, done: false, payload: new Binary(Buffer.from(`r=${nonce}xyz,s=c2FsdA==,i=4096`)) };
    };
    const controller = new AbortController();
    const reason = new Error('establishment ended');
    controller.abort(reason);
    const error = await authenticate(run, credentials, { ok: 1, saslSupportedMechs: ['SCRAM-SHA-256'] }, controller.signal).catch((e: unknown) => e);
    expect(error).to.equal(reason);
    expect(sent).to.deep.equal([]);
  });
});

