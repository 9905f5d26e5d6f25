import { expect } from 'chai';
import { Binary, type Document } from 'bson';
import { AuthenticationError, MongoCredentials, MongoServerError } from '../../lib';
import { scramAuthenticate } from '../../lib/auth/scram';

/** A scripted server: answers saslStart / saslContinue with the given payloads and records what it was sent. */
function scripted(serverFirst: string, serverFinal: string) {
  const sent: string[] = [];
  const run = async (_db: string, cmd: Document): Promise<Document> => {
    sent.push(Buffer.from((cmd.payload as Binary).buffer).toString());
    if (cmd.saslStart) return { conversationId: 1, done: false, payload: new Binary(Buffer.from(serverFirst)), ok: 1 };
    return { conversationId: 1, done: true, payload: new Binary(Buffer.from(serverFinal)), ok: 1 };
  };
  return { run, sent };
}

describe('SCRAM (auth spec conversations)', function () {
  it('SCRAM-SHA-1: reproduces the spec conversation for user/pencil', async function () {
    const server = scripted(
      'r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000',
      'v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=',
    );
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    await scramAuthenticate(server.run, creds, 'SCRAM-SHA-1', 'fyko+d2lbbFgONRv9qkxdawL');
    expect(server.sent).to.deep.equal([
      'n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL',
      'c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,p=MC2T8BvbmWRckDw8oWl5IVghwCY=',
    ]);
  });

  it('SCRAM-SHA-256: reproduces the spec conversation for user/pencil', async function () {
    const server = scripted(
      'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096',
      'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=',
    );
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    await scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', 'rOprNGfwEbeRWgbNEkqO');
    expect(server.sent[1]).to.equal(
      'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
    );
  });

  it('rejects an iteration count below 4096, a foreign nonce and a bad server signature', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const cases: [string, string, RegExp][] = [
      ['r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095', 'v=x', /fewer than the minimum 4096/],
      ['r=zzzXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', 'v=x', /nonce/],
      ['r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', 'v=AAAA', /signature does not verify/],
    ];
    for (const [first, final, message] of cases) {
      const error = await scramAuthenticate(scripted(first, final).run, creds, 'SCRAM-SHA-256', 'abc').catch((e) => e);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(error.message).to.match(message);
      expect(error.message).to.not.include('pencil');
    }
  });

  it('turns a server refusal into an AuthenticationError naming the user but not the password', async function () {
    const creds = new MongoCredentials({ username: 'alice', password: 'hunter2', source: 'app' });
    const refuse = async (): Promise<Document> => {
      throw new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });
    };
    const error = await scramAuthenticate(refuse, creds, 'SCRAM-SHA-1').catch((e) => e);
    expect(error).to.be.instanceOf(AuthenticationError);
    expect(error.message).to.equal('Authentication failed for user "alice" on "app" with SCRAM-SHA-1: Authentication failed.');
    expect(error.cause).to.be.instanceOf(MongoServerError);
  });
});
