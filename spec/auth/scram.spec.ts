import { expect } from 'chai';
import { inspect } from 'node:util';
import { Binary, type Document } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import { AuthenticationError, MongoCredentials, MongoServerError, connectionFactory } from '../../lib';
import { WireProtocolError } from '../../lib/connection/wire-protocol';
import { startTestEndpoint } from '../support/endpoint';
import { MAX_ITERATIONS, MIN_ITERATIONS, scramAuthenticate } from '../../lib/auth/scram';
import { spyOnDerivations, ticker } from '../support/derivations';
import { withPollutedPrototype } from '../support/prototype-pollution';

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
    await scramAuthenticate(server.run, creds, 'SCRAM-SHA-1', { clientNonce: 'fyko+d2lbbFgONRv9qkxdawL' });
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
    await scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', { clientNonce: 'rOprNGfwEbeRWgbNEkqO' });
    expect(server.sent[1]).to.equal(
      'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
    );
  });

  it('takes one empty round trip after the server signature when the server asks for it, and refuses a second', async function () {
    // The SCRAM-SHA-256 conversation of the auth spec, from a server that ignores skipEmptyExchange.
    const first = 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096';
    const final = 'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=';
    for (const endsAfter of [1, Infinity]) {
      const sent: string[] = [];
      const run = async (_db: string, cmd: Document): Promise<Document> => {
        sent.push(Buffer.from((cmd.payload as Binary).buffer).toString());
        const payload = new Binary(Buffer.from(cmd.saslStart ? first : sent.length === 2 ? final : ''));
        return { conversationId: 1, done: sent.length - 2 >= endsAfter, payload, ok: 1 };
      };
      const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
      const error = await scramAuthenticate(run, creds, 'SCRAM-SHA-256', { clientNonce: 'rOprNGfwEbeRWgbNEkqO' }).catch((e: unknown) => e);
      expect(sent.slice(2), `ends after ${endsAfter} empty round trips`).to.deep.equal(['']);
      if (endsAfter === 1) {
        expect(error).to.equal(undefined);
      } else {
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.equal(
          'Authentication failed for user "user" on "admin" with SCRAM-SHA-256: the server did not end the conversation after the empty round trip that may follow its signature',
        );
      }
    }
  });

  it('takes no clientNonce or speculativeReply from a polluted Object.prototype: a fresh random nonce, its own saslStart', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const firsts: string[] = [];
    const run = async (_db: string, cmd: Document): Promise<Document> => {
      firsts.push(Buffer.from((cmd.payload as Binary).buffer).toString());
      throw new MongoServerError({ ok: 0, errmsg: 'stop here', code: 18 });
    };
    const speculativeReply = { conversationId: 1, done: false, payload: new Binary(Buffer.from('r=known-nonce-and-more,s=c2FsdA==,i=4096')), ok: 1 };
    const errors = await withPollutedPrototype({ clientNonce: 'known-nonce', speculativeReply }, () =>
      Promise.all([0, 1].map(() => scramAuthenticate(run, creds, 'SCRAM-SHA-256', {}).catch((e: unknown) => e))),
    );
    for (const error of errors) expect((error as Error).message).to.match(/stop here/);
    expect(firsts, 'each conversation sent its own saslStart').to.have.length(2);
    const nonces = firsts.map((first) => /,r=([^,]*)$/.exec(first)?.[1]);
    expect(nonces[0]).to.not.equal('known-nonce');
    expect(nonces[0], 'a fresh nonce each time').to.not.equal(nonces[1]);
    expect(Buffer.from(nonces[0] ?? '', 'base64')).to.have.length(24);
  });

  it('caches the salted password under a digest of the salt, so a long salt chosen by the server is not kept', async function () {
    const salt = Buffer.alloc(1 << 20, 7).toString('base64'); // 1 MiB of salt, 1.4 MB of base64
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const keys: string[] = [];
    const saltedPassword = creds.saltedPassword.bind(creds);
    creds.saltedPassword = (key, derive) => {
      keys.push(key);
      return saltedPassword(key, derive);
    };
    for (let i = 0; i < 2; i++) {
      await scramAuthenticate(scripted(`r=abcXYZ,s=${salt},i=4096`, 'v=AAAA').run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch(() => undefined);
    }
    expect(keys).to.have.length(2);
    expect(keys[0]).to.equal(keys[1]);
    expect(keys[0]).to.match(/^SCRAM-SHA-256:[A-Za-z0-9+/]{43}=:4096$/);
  });

  it('rejects an iteration count below 4096, a foreign nonce and a bad server signature', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const cases: [string, string, RegExp][] = [
      ['r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095', 'v=x', /fewer than the minimum 4096/],
      ['r=zzzXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', 'v=x', /nonce/],
      ['r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', 'v=AAAA', /signature does not verify/],
    ];
    for (const [first, final, message] of cases) {
      const error = await scramAuthenticate(scripted(first, final).run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e) => e);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(error.message).to.match(message);
      expect(error.message).to.not.include('pencil');
    }
  });

  it('refuses a password SASLprep prohibits with an AuthenticationError that does not show it, before saslStart', async function () {
    const cases: [string, RegExp][] = [
      ['se\u0007cret', /Prohibited character/],
      ['se\u0627cret', /RandALCat/],
    ];
    for (const [password, reason] of cases) {
      const creds = new MongoCredentials({ username: 'user', password });
      const server = scripted('r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', 'v=x');
      const error = await scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message).to.match(
        /^Authentication failed for user "user" on "admin" with SCRAM-SHA-256: the password cannot be prepared with SASLprep \(RFC 4013\), as SCRAM-SHA-256 requires: /,
      );
      expect((error as Error).message).to.match(reason);
      expect((error as Error).message).to.not.include(password);
      expect(inspect(error)).to.not.include('cret');
      expect(server.sent).to.deep.equal([]);
    }
  });

  it('refuses a server-first message with a mandatory extension (m=), or a salt that is not base64 or is empty, before deriving any key', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const derivations = spyOnDerivations(creds, { ticks: 0 });
    const cases: [string, RegExp][] = [
      ['m=ext,r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', /the server-first message has a mandatory extension \(m=\), which this client does not support/],
      ['r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,m=ext', /mandatory extension \(m=\)/],
      ['r=abcXYZ,s=***not base64***,i=4096', /the server sent a salt that is not base64: "\*\*\*not base64\*\*\*"/],
      ['r=abcXYZ,s=!!!!,i=4096', /the server sent a salt that is not base64: "!!!!"/],
      ['r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ,i=4096', /the server sent a salt that is not base64/],
      ['r=abcXYZ,s====,i=4096', /the server sent a salt that is not base64/],
    ];
    for (const [first, message] of cases) {
      const server = scripted(first, 'v=x');
      const error = await scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e: unknown) => e);
      expect(error, first).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message, first).to.match(message);
      expect(server.sent, first).to.have.length(1); // saslStart only: no proof
    }
    expect(derivations).to.have.length(0);
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

  it('refuses credentials without a user name and password (MONGODB-X509 ones) before sending anything', async function () {
    const sent: Document[] = [];
    const run = async (_db: string, command: Document): Promise<Document> => (sent.push(command), { ok: 1 });
    const error = await scramAuthenticate(run, new MongoCredentials({ mechanism: 'MONGODB-X509' }), 'SCRAM-SHA-256').catch((e) => e);
    expect(error).to.be.instanceOf(AuthenticationError);
    expect(error.message).to.equal('Authentication failed for no user name on "$external" with SCRAM-SHA-256: SCRAM needs a user name and a password, and these credentials have none (they are for MONGODB-X509)');
    expect(sent).to.deep.equal([]);
  });

  it('names a reply that cannot be read as the step that failed, not as one that could not be sent (cause: its error)', async function () {
    const unreadable = new WireProtocolError('the reply on connection 1 to h:1 holds a value that cannot be read (Invalid UTF-8 string in BSON document), so it cannot be returned');
    const error = await scramAuthenticate(async () => Promise.reject(unreadable), new MongoCredentials({ username: 'u', password: 'p' }), 'SCRAM-SHA-1').catch((e) => e);
    expect(error).to.be.instanceOf(AuthenticationError);
    expect(error.message).to.equal(`Authentication failed for user "u" on "admin" with SCRAM-SHA-1: the saslStart failed: ${unreadable.message}`);
    expect(error.cause).to.equal(unreadable);
  });

  it('accepts iteration counts from 4096 to 1,000,000', function () {
    expect(MIN_ITERATIONS).to.equal(4096);
    expect(MAX_ITERATIONS).to.equal(1_000_000);
  });

  it('refuses more than 1,000,000 iterations (and a malformed count) at once, before deriving any key', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const derivations = spyOnDerivations(creds, { ticks: 0 });
    const cases: [string, RegExp][] = [
      ['30000000', /asked for 30000000 iterations, more than the maximum 1000000/],
      ['1000001', /asked for 1000001 iterations, more than the maximum 1000000/],
      ['9'.repeat(400), /asked for 99999999999999999999\.\.\. iterations, more than the maximum 1000000/],
      ['1e7', /invalid iteration count "1e7"/],
      ['', /invalid iteration count ""/],
    ];
    for (const [count, message] of cases) {
      const server = scripted(`r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=${count}`, 'v=x');
      const started = performance.now();
      const error = await scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e) => e);
      // Deriving 30,000,000 iterations takes some 6 s (1,000,001 some 0.2 s, which the spy sees): 2 s leaves a loaded
      // machine's pauses room, and no such derivation.
      expect(performance.now() - started).to.be.below(2000);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(error.message).to.match(message);
      expect(error.message).to.not.include('pencil');
      expect(server.sent).to.have.length(1); // saslStart only: no proof
    }
    expect(derivations).to.have.length(0);
  });

  it('derives the key off the event loop; an abort mid-derivation rejects at once with its reason and sends nothing more', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const tick = ticker();
    try {
      const derivations = spyOnDerivations(creds, tick);
      const server = scripted(`r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=${MAX_ITERATIONS}`, 'v=x');
      const controller = new AbortController();
      const reason = new Error('establishment ended');
      const outcome = scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc', signal: controller.signal }).catch(
        (e) => e,
      );
      const aborted = new Promise<number>((resolve) =>
        setTimeout(() => {
          controller.abort(reason);
          resolve(tick.ticks);
        }, 20),
      );
      expect(await outcome).to.equal(reason);
      expect(await aborted).to.be.above(0); // timers fired while the key was being derived
      expect(derivations).to.have.length(1);
      expect(derivations[0].settled).to.equal(false); // rejected before the derivation ended
      await derivations[0].done;
      expect(derivations[0].ticksWhileRunning).to.be.at.least(5);
      expect(server.sent).to.have.length(1); // saslStart only: no proof after the abort
    } finally {
      tick.stop();
    }
  });

  it('a server nonce too long for the client-final message to be sent fails with AuthenticationError (cause: the size error), sending nothing', async function () {
    // Connection.command refuses a command over maxBsonObjectSize + 16 KiB before sending it.
    // Against MONGODB_URI's server when it is set, else the embedded endpoint; the saslStart reply is scripted.
    const endpoint = await startTestEndpoint();
    const [host, port] = endpoint.address.split(':');
    const factory = connectionFactory({ ...endpoint.connectionOptions, credentials: undefined, host, port: Number(port) });
    const connection = await firstValueFrom(from(factory({ id: 1, generation: 0, address: endpoint.address, signal: new AbortController().signal })));
    try {
      const first = `r=abc${'x'.repeat(17 * 1024 * 1024)},s=c2FsdA==,i=4096`;
      const sent: string[] = [];
      const run = (db: string, cmd: Document): Promise<Document> => {
        if (cmd.saslStart) return Promise.resolve({ conversationId: 1, done: false, payload: new Binary(Buffer.from(first)), ok: 1 });
        sent.push(Object.keys(cmd)[0]);
        return connection.command(db, cmd);
      };
      const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
      const error = await scramAuthenticate(run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as AuthenticationError).cause).to.be.instanceOf(WireProtocolError);
      expect((error as Error).message).to.match(/^Authentication failed for user "user" on "admin" with SCRAM-SHA-256: the saslContinue failed: the command document is \d+ bytes, more than maxBsonObjectSize/);
      expect(sent).to.deep.equal(['saslContinue']);
      expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 }); // nothing was sent: still usable
    } finally {
      connection.destroy();
      await endpoint.stop();
    }
  });

  it('shows at most 300 characters of the server\'s e= error text, and how many more there were', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const text = 'E'.repeat(100_000);
    const long = await scramAuthenticate(scripted('r=abcXYZ,s=c2FsdA==,i=4096', `e=${text}`).run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e: unknown) => e);
    expect(long).to.be.instanceOf(AuthenticationError);
    expect((long as Error).message).to.equal(
      `Authentication failed for user "user" on "admin" with SCRAM-SHA-256: the server said: ${'E'.repeat(300)}... (99700 more characters)`,
    );
    const short = await scramAuthenticate(scripted('r=abcXYZ,s=c2FsdA==,i=4096', 'e=invalid-proof').run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e: unknown) => e);
    expect((short as Error).message).to.equal('Authentication failed for user "user" on "admin" with SCRAM-SHA-256: the server said: invalid-proof');
  });

  it('refuses a server-first message whose nonce does not extend the client nonce, or without a salt, naming each; shows at most 20 characters of a bad salt or count', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const cases: [string, string][] = [
      // RFC 5802: the server appends its own part to the client nonce; an echo alone is no server nonce.
      ['r=abc,s=c2FsdA==,i=4096', 'the server nonce does not extend the client nonce'],
      ['s=c2FsdA==,i=4096', 'the server nonce does not extend the client nonce'],
      ['r=abcXYZ,i=4096', 'the server sent no salt'],
      ['r=abcXYZ,s=,i=4096', 'the server sent no salt'],
      [`r=abcXYZ,s=${'*'.repeat(20)},i=4096`, `the server sent a salt that is not base64: "${'*'.repeat(20)}" (a salt is base64 of at least one byte, padded)`],
      [`r=abcXYZ,s=${'*'.repeat(21)},i=4096`, `the server sent a salt that is not base64: "${'*'.repeat(20)}..." (a salt is base64 of at least one byte, padded)`],
      [`r=abcXYZ,s=c2FsdA==,i=${'9'.repeat(20)}`, `the server asked for ${'9'.repeat(20)} iterations, more than the maximum 1000000`],
      [`r=abcXYZ,s=c2FsdA==,i=${'9'.repeat(21)}`, `the server asked for ${'9'.repeat(20)}... iterations, more than the maximum 1000000`],
    ];
    for (const [first, why] of cases) {
      const server = scripted(first, 'v=x');
      const error = await scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e: unknown) => e);
      expect(error, first).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message, first).to.equal(`Authentication failed for user "user" on "admin" with SCRAM-SHA-256: ${why}`);
      expect(server.sent, first).to.have.length(1); // saslStart only: no proof
    }
  });

  it("shows the server's e= text whole at exactly 300 characters", async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const text = 'E'.repeat(300);
    const error = await scramAuthenticate(scripted('r=abcXYZ,s=c2FsdA==,i=4096', `e=${text}`).run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc' }).catch((e: unknown) => e);
    expect((error as Error).message).to.equal(`Authentication failed for user "user" on "admin" with SCRAM-SHA-256: the server said: ${text}`);
  });

  it('refuses a speculativeAuthenticate that is null, sending nothing', async function () {
    const creds = new MongoCredentials({ username: 'user', password: 'pencil' });
    const server = scripted('r=abcXYZ,s=c2FsdA==,i=4096', 'v=x');
    const error = await scramAuthenticate(server.run, creds, 'SCRAM-SHA-256', { clientNonce: 'abc', speculativeReply: null }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(AuthenticationError);
    expect((error as Error).message).to.match(/the speculativeAuthenticate of the handshake reply is not a document$/);
    expect(server.sent).to.deep.equal([]);
  });
});
