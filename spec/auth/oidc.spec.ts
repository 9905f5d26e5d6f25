/**
 * MONGODB-OIDC, machine workflow (auth spec, "MONGODB-OIDC"): the one-step saslStart and its speculative form, the
 * token cache shared by the connections of one credentials object, the callback's parameters, errors and timeout,
 * reauthentication on ReauthenticationRequired (391), the built-in environments against local files and a local HTTP
 * server standing for the metadata services, pools and connect(). No test may find a token in an error, event, log
 * message or inspection.
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { Binary, BSON, type Document } from 'bson';
import { AuthenticationError, ConnectionPool, InvalidOptionError, MongoCredentials, MongoNetworkTimeoutError, MongoServerError, connect, type CredentialsInit, type LogSink } from '../../lib';
import { speculativeStart } from '../../lib/auth/authenticate';
import { parseConnectionString } from '../../lib/connection-string';
import { cachedOidcToken, OIDC_CALLBACK_TIMEOUT_MS, oidcAuthenticate, oidcMetadataEndpoints, type OidcCallback, type OidcCallbackParams } from '../../lib/auth/oidc';
import { EmbeddedServer, signOidcToken } from '../../lib/testing';
import { establishOne } from '../support/endpoint';
import { timersArmedBy } from '../support/timers-armed';

const KEY = 'idp-signing-key';
const TOKEN = signOidcToken(KEY, { sub: 'svc' });
const BAD_TOKEN = signOidcToken('another-key', { sub: 'svc' });

/** Everything a value shows: its message, its inspection (causes included) and its JSON. */
const shown = (value: unknown): string => `${value instanceof Error ? value.message : ''} ${inspect(value, { depth: 8 })} ${JSON.stringify(value) ?? ''}`;
const rejection = (work: Promise<unknown>): Promise<unknown> => work.then(() => undefined, (e: unknown) => e);

/** The fail point that fails the next `times` find commands with `errorCode` (391: ReauthenticationRequired). */
function failFind(errorCode: number, times = 1): Document {
  return { configureFailPoint: 'failCommand', mode: { times }, data: { failCommands: ['find'], errorCode } };
}

/**
 * Runs `work` with the wall clock (Date.now(), which the endpoint reads a token's expiry on) moved just past `exp`
 * (epoch seconds): a token expiring then has expired, without waiting for it. Timers and performance.now() keep
 * real time.
 */
async function withClockPast<T>(exp: number, work: () => Promise<T>): Promise<T> {
  const now = Date.now;
  const aheadMS = exp * 1000 + 1 - now();
  Date.now = () => now() + aheadMS;
  try {
    return await work();
  } finally {
    Date.now = now;
  }
}

/** A counting callback returning `tokens()` each call. */
function counting(tokens: () => string): OidcCallback & { calls: OidcCallbackParams[] } {
  const calls: OidcCallbackParams[] = [];
  const callback = Object.assign((params: OidcCallbackParams) => {
    calls.push(params);
    return { accessToken: tokens() };
  }, { calls });
  return callback;
}

const oidc = (callback: OidcCallback, init: Partial<CredentialsInit> = {}): MongoCredentials =>
  new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { OIDC_CALLBACK: callback }, ...init } as CredentialsInit);

describe('MONGODB-OIDC (auth spec, "MONGODB-OIDC")', function () {
  this.timeout(10_000);
  let server: EmbeddedServer;
  /** The saslStart (and speculative) commands the endpoint received. */
  let received: Document[];

  beforeEach(async function () {
    server = new EmbeddedServer({ oidc: { signingKey: KEY } });
    received = [];
    const original = (server as unknown as { authenticateOidc: (...args: unknown[]) => Document }).authenticateOidc.bind(server);
    (server as unknown as { authenticateOidc: (...args: unknown[]) => Document }).authenticateOidc = (o, name, db, command, client) => {
      received.push(command as Document);
      return original(o, name, db, command, client);
    };
    await server.start();
  });
  afterEach(async function () {
    await server.stop();
  });

  describe('credentials', function () {
    it('take no password, only $external, and one callback: OIDC_CALLBACK and OIDC_HUMAN_CALLBACK together are refused', function () {
      const cb = counting(() => TOKEN);
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', password: 'x', mechanismProperties: { OIDC_CALLBACK: cb } } as CredentialsInit)).to.throw(InvalidOptionError, /password/);
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', source: 'admin', mechanismProperties: { OIDC_CALLBACK: cb } } as CredentialsInit)).to.throw(InvalidOptionError, /authSource/);
      expect(oidc(cb).source).to.equal('$external');
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { OIDC_HUMAN_CALLBACK: cb, OIDC_CALLBACK: cb } } as CredentialsInit)).to.throw(InvalidOptionError, /OIDC_HUMAN_CALLBACK/);
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC' } as CredentialsInit)).to.throw(InvalidOptionError, /ENVIRONMENT/);
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { OIDC_CALLBACK: cb, ENVIRONMENT: 'test' } } as CredentialsInit)).to.throw(InvalidOptionError, /OIDC_CALLBACK/);
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { ALLOWED_HOSTS: [1], OIDC_HUMAN_CALLBACK: cb } } as CredentialsInit)).to.throw(InvalidOptionError, /ALLOWED_HOSTS/);
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { ENVIRONMENT: 'azure' } } as CredentialsInit)).to.throw(InvalidOptionError, /TOKEN_RESOURCE/);
      expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { ENVIRONMENT: 'test', TOKEN_RESOURCE: 'x' } } as CredentialsInit)).to.throw(InvalidOptionError, /TOKEN_RESOURCE/);
    });
  });

  describe('the connection string (auth spec tests, MONGODB-OIDC)', function () {
    const credentialsOf = (uri: string): MongoCredentials => parseConnectionString(uri).connectionOptions.credentials as MongoCredentials;
    it('takes ENVIRONMENT and TOKEN_RESOURCE (colons kept), $external as the source whatever the database, and no password', function () {
      const c = credentialsOf('mongodb://localhost/db?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:azure,TOKEN_RESOURCE:api://x:1');
      expect(c.mechanism).to.equal('MONGODB-OIDC');
      expect(c.source).to.equal('$external');
      expect({ ...c.mechanismProperties }).to.deep.equal({ ENVIRONMENT: 'azure', TOKEN_RESOURCE: 'api://x:1' });
      expect(credentialsOf('mongodb://client@localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:azure,TOKEN_RESOURCE:r').username).to.equal('client');
      expect(credentialsOf('mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:k8s').mechanismProperties.ENVIRONMENT).to.equal('k8s');
      for (const bad of [
        'mongodb://localhost/?authMechanism=MONGODB-OIDC',
        'mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:invalid',
        'mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:gcp',
        'mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test,TOKEN_RESOURCE:r',
        'mongodb://user@localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test',
        'mongodb://user@localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:gcp,TOKEN_RESOURCE:r',
        'mongodb://user:pass@localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:azure,TOKEN_RESOURCE:r',
        'mongodb://localhost/?authMechanism=MONGODB-OIDC&authSource=admin&authMechanismProperties=ENVIRONMENT:test',
        'mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test,ALLOWED_HOSTS:x',
        'mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test,OIDC_CALLBACK:x',
      ]) {
        expect(() => parseConnectionString(bad), bad).to.throw(InvalidOptionError);
      }
      // A malformed list is ignored (with a warning); the credentials' error then says why ENVIRONMENT is missing.
      for (const list of ['ENVIRONMENT:test,', 'ENVIRONMENT:test,ENVIRONMENT:k8s']) {
        expect(() => parseConnectionString(`mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=${list}`), list)
          .to.throw(InvalidOptionError, /authMechanismProperties\.ENVIRONMENT.*the URI's authMechanismProperties=<not shown> is ignored: authMechanismProperties must be a list of KEY:value pairs/);
      }
    });

    it('refuse an empty TOKEN_RESOURCE for azure and gcp (no token can be had for an empty resource or audience), in the URI and the option', function () {
      for (const environment of ['azure', 'gcp']) {
        const uri = `mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:${environment},TOKEN_RESOURCE:`;
        expect(() => parseConnectionString(uri), uri).to.throw(InvalidOptionError, /authMechanismProperties\.TOKEN_RESOURCE.*non-empty/);
        expect(() => new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { ENVIRONMENT: environment, TOKEN_RESOURCE: '' } } as CredentialsInit), environment)
          .to.throw(InvalidOptionError, /authMechanismProperties\.TOKEN_RESOURCE.*non-empty/);
      }
    });
  });

  describe('authentication against the endpoint', function () {
    it('sends the one-step saslStart { jwt } on $external; the callback gets version 1, the username, 60000 ms (connectTimeoutMS 0) and a signal', async function () {
      const cb = counting(() => TOKEN);
      const connection = await establishOne(server.address, { credentials: oidc(cb, { username: 'svc' }), connectTimeoutMS: 0 });
      const status = await connection.command('admin', { connectionStatus: 1 });
      expect(status.authInfo.authenticatedUsers).to.deep.equal([{ user: 'svc', db: '$external' }]);
      expect(received).to.have.length(1);
      expect(received[0]).to.include({ saslStart: 1, mechanism: 'MONGODB-OIDC', $db: '$external' });
      expect(Object.keys(received[0]!)).to.deep.equal(['saslStart', 'mechanism', 'payload', '$db']);
      const payload = Buffer.from((received[0]!.payload as Binary).buffer);
      expect(payload.equals(Buffer.from(BSON.serialize({ jwt: TOKEN })))).to.equal(true);
      expect(cb.calls).to.have.length(1);
      expect(cb.calls[0]).to.include({ version: 1, username: 'svc', timeoutMS: 60_000 });
      expect(cb.calls[0]!.timeoutContext).to.be.instanceOf(AbortSignal);
      connection.destroy();
    });

    it('calls the callback once for many connections of one credentials object, which then authenticate speculatively', async function () {
      const cb = counting(() => TOKEN);
      const credentials = oidc(cb);
      const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials }, maxPoolSize: 10 });
      pool.ready();
      try {
        await Promise.all(Array.from({ length: 10 }, () => pool.withConnection((c) => c.command('admin', { ping: 1 }))));
        expect(cb.calls).to.have.length(1);
        const first = await establishOne(server.address, { credentials });
        expect(received.at(-1)).to.include({ saslStart: 1, db: '$external' });
        expect(speculativeStart(credentials)).to.include({ mechanism: 'MONGODB-OIDC' });
        expect(cb.calls).to.have.length(1);
        first.destroy();
      } finally {
        pool.close();
      }
      expect(server.oidc!.refusals).to.equal(0);
    });

    it('sends no speculative saslStart without a cached token', async function () {
      const cb = counting(() => TOKEN);
      const credentials = oidc(cb);
      expect(speculativeStart(credentials)).to.equal(undefined);
      const c = await establishOne(server.address, { credentials });
      expect(received[0]).to.not.have.property('db');
      c.destroy();
    });

    it('a bad token fails with the server\'s AuthenticationFailed (18), the token not shown', async function () {
      const cb = counting(() => BAD_TOKEN);
      const error = await rejection(establishOne(server.address, { credentials: oidc(cb) }));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).cause).to.be.instanceOf(MongoServerError).with.property('code', 18);
      expect(shown(error)).to.not.include(BAD_TOKEN);
    });

    it('a server that echoes the token in its refusal has it replaced in the error and its cause', async function () {
      const run = async (_db: string, cmd: Document): Promise<Document> => {
        const jwt = BSON.deserialize(Buffer.from((cmd.payload as Binary).buffer)).jwt as string;
        throw new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: `bad token ${jwt}` });
      };
      const error = await rejection(oidcAuthenticate(run, oidc(counting(() => TOKEN))));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(shown(error)).to.include('bad token <access token not shown>');
      expect(shown(error)).to.not.include(TOKEN);
    });

    it('a cached token the server refuses is invalidated and the callback called again (18 on the one-step conversation)', async function () {
      let token = TOKEN;
      const cb = counting(() => token);
      const credentials = oidc(cb);
      (await establishOne(server.address, { credentials })).destroy();
      await server.stop();
      server = new EmbeddedServer({ port: Number(server.address.split(':')[1]), oidc: { signingKey: 'rotated' } });
      await server.start();
      token = signOidcToken('rotated', { sub: 'svc' });
      // The callback's 100 ms between calls: waited by the token cache itself.
      const c = await establishOne(server.address, { credentials });
      expect(cb.calls).to.have.length(2);
      expect(cachedOidcToken(credentials)).to.equal(token);
      c.destroy();
    });

    it('reauthenticates on ReauthenticationRequired (391) and retries once: the failed token invalidated, the callback called again', async function () {
      const cb = counting(() => TOKEN);
      const credentials = oidc(cb);
      const connection = await establishOne(server.address, { credentials });
      await connection.command('admin', failFind(391));
      // The callback's 100 ms between calls: waited by the token cache itself.
      const before = received.length;
      const reply = await connection.command('test', { find: 'c' });
      expect(reply.ok).to.equal(1);
      expect(received.length - before).to.equal(1);
      expect(received.at(-1)).to.not.have.property('db');
      expect(cb.calls).to.have.length(2);
      connection.destroy();
    });

    it('reauthentication leaves a newer cached token alone: the callback is not called again', async function () {
      let n = 0;
      const tokens = [signOidcToken(KEY, { sub: 'svc', exp: 2e9 }), signOidcToken(KEY, { sub: 'svc', exp: 2e9 + 1 })];
      const cb = counting(() => tokens[n++]!);
      const credentials = oidc(cb);
      const a = await establishOne(server.address, { credentials });
      const b = await establishOne(server.address, { credentials });
      const failOnce = failFind(391);
      await a.command('admin', failOnce);
      // The callback's 100 ms between calls: waited by the token cache itself.
      await a.command('test', { find: 'c' });
      expect(cb.calls).to.have.length(2);
      // b's token is the first one: no longer the cached one, so the cache keeps the second.
      await b.command('admin', failOnce);
      await b.command('test', { find: 'c' });
      expect(cb.calls).to.have.length(2);
      expect(cachedOidcToken(credentials)).to.equal(tokens[1]);
      a.destroy();
      b.destroy();
    });

    it('retries once only: a second 391 is the command\'s error', async function () {
      const cb = counting(() => TOKEN);
      const connection = await establishOne(server.address, { credentials: oidc(cb) });
      await connection.command('admin', failFind(391, 2));
      const before = received.length;
      expect(await rejection(connection.command('test', { find: 'c' }))).to.be.instanceOf(MongoServerError).with.property('code', 391);
      expect(received.length - before).to.equal(1);
      expect((await connection.command('test', { find: 'c' })).ok).to.equal(1);
      connection.destroy();
    });

    it('reauthenticates on 391 only: a command failing with another server error, or an exhaustAllowed command failing with 391 (its stream is the caller\'s), fails as it came, no SASL sent, the callback not called again', async function () {
      const cb = counting(() => TOKEN);
      const connection = await establishOne(server.address, { credentials: oidc(cb) });
      await connection.command('admin', failFind(2));
      const before = received.length;
      expect(await rejection(connection.command('test', { find: 'c' }))).to.be.instanceOf(MongoServerError).with.property('code', 2);
      await connection.command('admin', failFind(391));
      expect(await rejection(connection.command('test', { find: 'c' }, { exhaustAllowed: true }))).to.be.instanceOf(MongoServerError).with.property('code', 391);
      expect(received.length - before, 'SASL commands sent').to.equal(0);
      expect(cb.calls).to.have.length(1);
      expect((await connection.command('test', { find: 'c' })).ok).to.equal(1);
      connection.destroy();
    });

    it('stops listening to the command\'s signal and ends the reauthentication\'s deadline once a reauthenticated command settled: a later abort leaves the connection usable', async function () {
      const cb = counting(() => TOKEN);
      const connection = await establishOne(server.address, { credentials: oidc(cb) });
      await connection.command('admin', failFind(391));
      const controller = new AbortController();
      // Only the timers this command arms are counted, not those of the server or of whatever else runs meanwhile.
      const { value: reply, armed, left } = await timersArmedBy(() => connection.command('test', { find: 'c' }, { signal: controller.signal, timeoutMS: 5000 }));
      expect(reply.ok).to.equal(1);
      expect(cb.calls).to.have.length(2);
      expect(getEventListeners(controller.signal, 'abort'), 'listeners left on the signal').to.have.length(0);
      // The reauthentication armed its deadline (the 5 s), and did not leave it armed: no timer holding the process
      // for the rest of the 5 s.
      expect(armed, 'timers armed').to.be.greaterThan(0);
      expect(left, 'timers left armed').to.equal(0);
      controller.abort();
      expect(connection.errored).to.equal(false);
      expect((await connection.command('test', { find: 'c' })).ok).to.equal(1);
      connection.destroy();
    });

    it('a signal that refuses its listener as the reauthentication would begin fails the command with that Error; nothing is reauthenticated', async function () {
      const cb = counting(() => TOKEN);
      const connection = await establishOne(server.address, { credentials: oidc(cb) });
      await connection.command('admin', failFind(391));
      // A signal of AbortSignal's shape that takes its first listener (the command's send and reply) and refuses the next.
      const refused = new Error('no second listener');
      let adds = 0;
      const signal = { aborted: false, addEventListener: () => { if (++adds > 1) throw refused; }, removeEventListener: () => undefined } as unknown as AbortSignal;
      const before = received.length;
      expect(await rejection(connection.command('test', { find: 'c' }, { signal }))).to.equal(refused);
      expect(adds).to.equal(2);
      expect(received.length - before, 'SASL commands sent').to.equal(0);
      expect(cb.calls).to.have.length(1);
      connection.destroy();
    });

    it('an expired token makes the endpoint answer 391, and the connection reauthenticates with a fresh one', async function () {
      let exp = Math.floor(Date.now() / 1000) + 60;
      const cb = counting(() => signOidcToken(KEY, { sub: 'svc', exp }));
      const connection = await establishOne(server.address, { credentials: oidc(cb) });
      exp += 3600;
      await withClockPast(exp - 3600, async () => {
        expect((await connection.command('test', { find: 'c' })).ok).to.equal(1);
      });
      expect(cb.calls).to.have.length(2);
      connection.destroy();
    });

    it('the command\'s timeoutMS bounds a reauthentication whose callback hangs, and one waiting for another connection\'s call', async function () {
      let n = 0;
      const signals: AbortSignal[] = [];
      let calledAgain!: () => void;
      const secondCall = new Promise<void>((resolve) => (calledAgain = resolve));
      const cb: OidcCallback = ({ timeoutContext }) => {
        if (++n === 1) return { accessToken: TOKEN };
        signals.push(timeoutContext);
        calledAgain();
        return new Promise(() => undefined);
      };
      const credentials = oidc(cb);
      const a = await establishOne(server.address, { credentials });
      const b = await establishOne(server.address, { credentials });
      const fail391 = failFind(391, 2);
      await a.command('admin', fail391);
      // The callback's 100 ms between calls: waited by the token cache itself, within a's 300 ms.
      const started = performance.now();
      const settled: string[] = [];
      const [ea, eb] = await Promise.all([
        rejection(a.command('test', { find: 'c' }, { timeoutMS: 300 })).finally(() => settled.push('a')),
        // b waits for a's call of the callback (one at a time), with its own, shorter timeoutMS: b's command starts
        // as a's call does (in the same turn, not at a later poll: its deadline stays well before a's).
        secondCall.then(() => rejection(b.command('test', { find: 'c' }, { timeoutMS: 150 }))).finally(() => settled.push('b')),
      ]);
      // b's own timeoutMS ended its wait, not the end of a's call.
      expect(settled).to.deep.equal(['b', 'a']);
      const elapsed = performance.now() - started;
      expect(ea).to.be.instanceOf(AuthenticationError).with.property('message').that.includes('300 ms');
      expect(eb).to.be.instanceOf(AuthenticationError).with.property('message').that.includes('150 ms');
      expect(elapsed).to.be.lessThan(1000);
      expect(n).to.equal(2);
      expect(signals[0]!.aborted).to.equal(true);
      a.destroy();
      b.destroy();
    });

    it('the command\'s timeoutMS bounds each SASL round trip of its reauthentication: a saslStart the server holds fails the command by then', async function () {
      // The 391 comes of the token's expiry (the endpoint's one fail point then holds the saslStart).
      const exp = Math.floor(Date.now() / 1000) + 60;
      const cb = counting(() => signOidcToken(KEY, { sub: 'svc', exp: cb.calls.length > 1 ? exp + 3600 : exp }));
      const connection = await establishOne(server.address, { credentials: oidc(cb) });
      await connection.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['saslStart'], blockConnection: true, blockTimeMS: 1500 } });
      const started = performance.now();
      const error = await withClockPast(exp, () => rejection(connection.command('test', { find: 'c' }, { timeoutMS: 200 })));
      const elapsed = performance.now() - started;
      expect(elapsed, 'ms to the rejection (the server holds the saslStart 1500 ms)').to.be.below(1000);
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect((error as Error).message).to.match(/^connection 1 to .* timed out after 200 ms waiting for a reply$/);
      connection.destroy();
    });

    it('a command failing with 391 on a connection of another mechanism is not retried', async function () {
      const s = new EmbeddedServer();
      await s.start();
      try {
        const c = await establishOne(s.address);
        await c.command('admin', failFind(391));
        expect(await rejection(c.command('test', { find: 'c' }))).to.be.instanceOf(MongoServerError).with.property('code', 391);
        c.destroy();
      } finally {
        await s.stop();
      }
    });
  });

  describe('the callback', function () {
    it('its error fails authentication as an AuthenticationError with it as the cause', async function () {
      const thrown = new Error('no token today');
      const error = await rejection(establishOne(server.address, { credentials: oidc(() => { throw thrown; }) }));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message).to.include('no token today');
      expect((error as Error).cause).to.equal(thrown);
    });

    it('a negative expiresInSeconds or no accessToken is an error', async function () {
      for (const result of [{ accessToken: TOKEN, expiresInSeconds: -1 }, { accessToken: '' }, {}]) {
        const error = await rejection(establishOne(server.address, { credentials: oidc(() => result as { accessToken: string }) }));
        expect(error).to.be.instanceOf(AuthenticationError);
        expect(shown(error)).to.not.include(TOKEN);
      }
    });

    it('times out after 60000 ms (virtual time): its signal aborts and authentication fails', async function () {
      let signal: AbortSignal | undefined;
      const original = globalThis.setTimeout;
      const delays: number[] = [];
      // Virtual time: the callback's 60000 ms timer fires at once.
      globalThis.setTimeout = ((fn: () => void, ms?: number) => {
        delays.push(ms ?? 0);
        return original(fn, ms === OIDC_CALLBACK_TIMEOUT_MS ? 0 : ms);
      }) as typeof setTimeout;
      try {
        const error = await rejection(establishOne(server.address, { connectTimeoutMS: 0, credentials: oidc(({ timeoutContext }) => { signal = timeoutContext; return new Promise(() => undefined); }) }));
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.include('within 60000 ms');
      } finally {
        globalThis.setTimeout = original;
      }
      expect(delays).to.include(60_000);
      expect(signal?.aborted).to.equal(true);
    });

    it('gets as timeoutMS what connectTimeoutMS, or on 391 the command\'s timeoutMS, has left (virtual clock), 60000 at most; its signal aborts with that deadline', async function () {
      const realNow = performance.now.bind(performance);
      const originalSetTimeout = globalThis.setTimeout;
      const serverHello = server as unknown as { helloReply: (...args: unknown[]) => Document };
      const hello = serverHello.helloReply.bind(server);
      let offset = 0;
      let jump = 0;
      const delays: number[] = [];
      // Virtual clock: it jumps `jump` ms while the server answers a hello.
      serverHello.helloReply = (...args: unknown[]) => {
        offset += jump;
        return hello(...args);
      };
      performance.now = () => realNow() + offset;
      globalThis.setTimeout = ((fn: () => void, ms?: number) => {
        delays.push(ms ?? 0);
        return originalSetTimeout(fn, ms);
      }) as typeof setTimeout;
      try {
        // 1500 of connectTimeoutMS's 2000 ms spent in the hello: the callback gets what is left, its signal's timer too.
        jump = 1500;
        // Less the real time up to the call too, which a loaded machine's pause lengthens: measured, not assumed short.
        const calledAt: number[] = [];
        const cb = counting(() => (calledAt.push(realNow()), TOKEN));
        let before = realNow();
        const c = await establishOne(server.address, { credentials: oidc(cb), connectTimeoutMS: 2000 });
        const first = cb.calls[0]!.timeoutMS;
        expect(Number.isInteger(first)).to.equal(true);
        expect(first).to.be.within(Math.floor(500 - (calledAt[0] - before)) - 1, 500);
        // Its signal aborts with connectTimeoutMS's: no 60000 ms timer of the callback's own.
        expect(delays).to.not.include(60_000);
        // Reauthentication on 391: what the command's timeoutMS has left.
        jump = 0;
        await c.command('admin', failFind(391));
        before = realNow();
        expect((await c.command('test', { find: 'c' }, { timeoutMS: 3000 })).ok).to.equal(1);
        const second = cb.calls[1]!.timeoutMS;
        expect(Number.isInteger(second)).to.equal(true);
        expect(second).to.be.within(Math.floor(3000 - (calledAt[1] - before)) - 1, 3000);
        expect(delays).to.not.include(60_000);
        c.destroy();
        // No deadline (connectTimeoutMS 0), or a later one: 60000.
        for (const connectTimeoutMS of [0, 120_000]) {
          const other = counting(() => TOKEN);
          (await establishOne(server.address, { credentials: oidc(other), connectTimeoutMS })).destroy();
          expect(other.calls[0]!.timeoutMS).to.equal(60_000);
        }
      } finally {
        serverHello.helloReply = hello;
        performance.now = realNow;
        globalThis.setTimeout = originalSetTimeout;
      }
    });

    it('is called at least 100 ms after its last call, even by a timer that fires early', async function () {
      const times: number[] = [];
      const cb = counting(() => {
        times.push(performance.now());
        return times.length === 1 ? BAD_TOKEN : TOKEN;
      });
      const credentials = oidc(cb);
      const first = await rejection(establishOne(server.address, { credentials }));
      expect(first).to.be.instanceOf(AuthenticationError);
      // Node's timers can fire a little early on performance.now()'s clock: here, the waits of 50 ms or more by 5 ms.
      const originalSetTimeout = globalThis.setTimeout;
      globalThis.setTimeout = ((handler: () => void, delay?: number) => originalSetTimeout(handler, delay !== undefined && delay >= 50 ? delay - 5 : delay)) as typeof setTimeout;
      try {
        // The refused token stays cached until the server refuses it as a cached one; then a new call comes.
        (await establishOne(server.address, { credentials })).destroy();
      } finally {
        globalThis.setTimeout = originalSetTimeout;
      }
      expect(times).to.have.length(2);
      expect(times[1]! - times[0]!).to.be.at.least(100);
    });
  });

  describe('built-in environments', function () {
    let dir: string;
    let metadata: http.Server;
    let requests: http.IncomingMessage[];
    let answer: { status: number; body: string };
    const saved = { ...oidcMetadataEndpoints };
    const env = { ...process.env };

    beforeEach(async function () {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'oidc-'));
      requests = [];
      answer = { status: 200, body: '' };
      metadata = http.createServer((req, res) => {
        requests.push(req);
        res.writeHead(answer.status).end(answer.body);
      });
      await new Promise<void>((r) => metadata.listen(0, '127.0.0.1', r));
      const base = `http://127.0.0.1:${(metadata.address() as { port: number }).port}`;
      oidcMetadataEndpoints.azure = base;
      oidcMetadataEndpoints.gcp = base;
    });
    afterEach(async function () {
      Object.assign(oidcMetadataEndpoints, saved);
      for (const k of ['OIDC_TOKEN_FILE', 'AZURE_FEDERATED_TOKEN_FILE', 'AWS_WEB_IDENTITY_TOKEN_FILE']) if (env[k] === undefined) delete process.env[k];
      await new Promise((r) => metadata.close(r));
      fs.rmSync(dir, { recursive: true });
    });

    const env_ = (properties: Record<string, string>, init: Partial<CredentialsInit> = {}): MongoCredentials =>
      new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: properties, ...init } as CredentialsInit);

    it('test: reads OIDC_TOKEN_FILE', async function () {
      const file = path.join(dir, 'token');
      fs.writeFileSync(file, TOKEN);
      process.env.OIDC_TOKEN_FILE = file;
      const c = await establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'test' }) });
      expect(server.oidc!.authentications).to.equal(1);
      c.destroy();
      delete process.env.OIDC_TOKEN_FILE;
      const error = await rejection(establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'test' }) }));
      expect((error as Error).message).to.include('OIDC_TOKEN_FILE is not set');
    });

    it('test and k8s: a token file that is a FIFO, a device or over 64 KiB fails the establishment at once, unread (a FIFO no one wrote to held it past connectTimeoutMS, /dev/zero filled the memory)', async function () {
      if (process.platform === 'win32') this.skip();
      const fifo = path.join(dir, 'fifo');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      (require('node:child_process') as typeof import('node:child_process')).execFileSync('mkfifo', [fifo]);
      const large = path.join(dir, 'large');
      fs.writeFileSync(large, 'x'.repeat(65_537));
      const cases: [string, string, string, string][] = [
        ['test', 'OIDC_TOKEN_FILE', fifo, 'is not a regular file'],
        ['test', 'OIDC_TOKEN_FILE', '/dev/zero', 'is not a regular file'],
        ['test', 'OIDC_TOKEN_FILE', large, 'holds more than 65536 bytes'],
        ['k8s', 'AWS_WEB_IDENTITY_TOKEN_FILE', fifo, 'is not a regular file'],
      ];
      try {
        for (const [environment, variable, file, why] of cases) {
          process.env[variable] = file;
          const started = Date.now();
          const outcome = establishOne(server.address, { credentials: env_({ ENVIRONMENT: environment }), connectTimeoutMS: 2000 });
          // Opened as a FIFO waits, the establishment would end at connectTimeoutMS (2 s) with a timeout, and the race
          // at 2.5 s; 1.5 s leaves a loaded machine's pauses room.
          const error = await Promise.race([rejection(outcome), new Promise((resolve) => setTimeout(() => resolve('still waiting after 2500 ms'), 2500).unref())]);
          expect(error, `${variable}=${file}`).to.be.instanceOf(AuthenticationError);
          expect((error as Error).message, `${variable}=${file}`).to.include(why);
          expect(Date.now() - started).to.be.below(1500);
          delete process.env[variable];
        }
        expect(server.oidc!.authentications).to.equal(0);
      } finally {
        try {
          fs.closeSync(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
        } catch {
          // no reader left
        }
      }
    });

    it('k8s: AZURE_FEDERATED_TOKEN_FILE, else AWS_WEB_IDENTITY_TOKEN_FILE', async function () {
      fs.writeFileSync(path.join(dir, 'aws'), TOKEN);
      fs.writeFileSync(path.join(dir, 'azure'), BAD_TOKEN);
      process.env.AWS_WEB_IDENTITY_TOKEN_FILE = path.join(dir, 'aws');
      (await establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'k8s' }) })).destroy();
      process.env.AZURE_FEDERATED_TOKEN_FILE = path.join(dir, 'azure');
      expect(await rejection(establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'k8s' }) }))).to.be.instanceOf(AuthenticationError);
    });

    it('azure: GET the IMDS token with the spec\'s headers, resource and client_id; a non-200 answer quotes its body', async function () {
      answer = { status: 200, body: JSON.stringify({ access_token: TOKEN, expires_in: '3599' }) };
      (await establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'azure', TOKEN_RESOURCE: 'api://a,b:c' }, { username: 'client-1' }) })).destroy();
      const url = new URL(requests[0]!.url!, 'http://x');
      expect(url.pathname).to.equal('/metadata/identity/oauth2/token');
      expect(Object.fromEntries(url.searchParams)).to.deep.equal({ 'api-version': '2018-02-01', resource: 'api://a,b:c', client_id: 'client-1' });
      expect(requests[0]!.headers).to.include({ accept: 'application/json', metadata: 'true' });
      answer = { status: 400, body: 'identity not found' };
      const error = await rejection(establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'azure', TOKEN_RESOURCE: 'r' }) }));
      expect((error as Error).message).to.include('HTTP 400: identity not found');
      expect(new URL(requests[1]!.url!, 'http://x').searchParams.has('client_id')).to.equal(false);
    });

    it('gcp: GET the identity with audience and Metadata-Flavor: Google; the body is the token', async function () {
      answer = { status: 200, body: TOKEN };
      (await establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'gcp', TOKEN_RESOURCE: 'aud' }) })).destroy();
      const url = new URL(requests[0]!.url!, 'http://x');
      expect(url.pathname).to.equal('/computeMetadata/v1/instance/service-accounts/default/identity');
      expect(url.searchParams.get('audience')).to.equal('aud');
      expect(requests[0]!.headers['metadata-flavor']).to.equal('Google');
      answer = { status: 404, body: 'no such audience' };
      expect(((await rejection(establishOne(server.address, { credentials: env_({ ENVIRONMENT: 'gcp', TOKEN_RESOURCE: 'aud' }) }))) as Error).message).to.include('HTTP 404: no such audience');
    });

    it('azure and gcp follow no redirect: the answer is a non-200 one, and no other host is asked (nor sent the Metadata headers)', async function () {
      const elsewhere: http.IncomingMessage[] = [];
      const other = http.createServer((req, res) => {
        elsewhere.push(req);
        res.end(req.url!.startsWith('/metadata') ? JSON.stringify({ access_token: TOKEN }) : TOKEN);
      });
      await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
      try {
        const port = (other.address() as { port: number }).port;
        for (const properties of [{ ENVIRONMENT: 'azure', TOKEN_RESOURCE: 'r' }, { ENVIRONMENT: 'gcp', TOKEN_RESOURCE: 'aud' }]) {
          metadata.removeAllListeners('request');
          metadata.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
            requests.push(req);
            res.writeHead(307, { location: `http://127.0.0.1:${port}${req.url}` }).end();
          });
          const error = await rejection(establishOne(server.address, { credentials: env_(properties) }));
          expect(error, properties.ENVIRONMENT).to.be.instanceOf(AuthenticationError).with.property('message').that.includes('HTTP 307');
        }
        expect(elsewhere).to.have.length(0);
      } finally {
        await new Promise((r) => other.close(r));
      }
    });

    it('azure and gcp read at most 1 MiB of an answer: a larger one is an error, its rest never read', async function () {
      let written = 0;
      metadata.removeAllListeners('request');
      metadata.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
        requests.push(req);
        res.writeHead(200);
        const chunk = Buffer.alloc(64 * 1024, 97);
        const more = (): void => {
          while (written < 64 * 1024 * 1024) {
            written += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', more);
          }
          res.end();
        };
        res.on('close', () => res.destroy());
        more();
      });
      for (const properties of [{ ENVIRONMENT: 'azure', TOKEN_RESOURCE: 'r' }, { ENVIRONMENT: 'gcp', TOKEN_RESOURCE: 'aud' }]) {
        written = 0;
        const error = await rejection(establishOne(server.address, { credentials: env_(properties) }));
        expect(error, properties.ENVIRONMENT).to.be.instanceOf(AuthenticationError).with.property('message').that.includes('more than 1048576 bytes');
        expect(written, properties.ENVIRONMENT).to.be.lessThan(16 * 1024 * 1024);
      }
    });

  });

  describe('the endpoint', function () {
    it('answers a saslStart without jwt with the IdP info (two-step), then takes the jwt in saslContinue; table tokens expire with 18', async function () {
      const s = new EmbeddedServer({ oidc: { tokens: { 'tok-1': { user: 'u1' }, 'tok-old': { user: 'u2', expiresAtMS: Date.now() - 1 } }, idpInfo: { issuer: 'https://issuer', clientId: 'abcd' } } });
      await s.start();
      try {
        const c = await establishOne(s.address);
        const start = await c.command('$external', { saslStart: 1, mechanism: 'MONGODB-OIDC', payload: new Binary(BSON.serialize({ n: 'u1' })) });
        expect(start).to.include({ done: false, conversationId: 1 });
        expect(BSON.deserialize(Buffer.from((start.payload as Binary).buffer))).to.deep.equal({ issuer: 'https://issuer', clientId: 'abcd' });
        const next = await c.command('$external', { saslContinue: 1, conversationId: 1, payload: new Binary(BSON.serialize({ jwt: 'tok-1' })) });
        expect(next).to.include({ done: true });
        expect((await c.command('admin', { connectionStatus: 1 })).authInfo.authenticatedUsers).to.deep.equal([{ user: 'u1', db: '$external' }]);
        const old = await rejection(c.command('$external', { saslStart: 1, mechanism: 'MONGODB-OIDC', payload: new Binary(BSON.serialize({ jwt: 'tok-old' })) }));
        expect(old).to.be.instanceOf(MongoServerError).with.property('code', 18);
        const admin = await rejection(c.command('admin', { saslStart: 1, mechanism: 'MONGODB-OIDC', payload: new Binary(BSON.serialize({ jwt: 'tok-1' })) }));
        expect(admin).to.be.instanceOf(MongoServerError);
        expect(s.oidc).to.include({ authentications: 1, refusals: 1 });
        c.destroy();
      } finally {
        await s.stop();
      }
    });
  });

  describe('pools and connect()', function () {
    it('the token shows in no event, log message, error or inspection, and connect() authenticates through the URI', async function () {
      const messages: string[] = [];
      const sink: LogSink = { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) };
      const texts: string[] = [];
      for (const token of [TOKEN, BAD_TOKEN]) {
        const credentials = oidc(() => ({ accessToken: token }));
        const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials }, logging: { componentSeverities: { connection: 'debug' }, path: sink } });
        pool.events$.subscribe((e) => texts.push(shown(e)));
        pool.ready();
        const result = await pool.withConnection((c) => c.command('admin', { ping: 1 })).catch((e: unknown) => e);
        texts.push(shown(result), shown(credentials), shown(pool));
        pool.close();
      }
      const file = path.join(os.tmpdir(), `oidc-${process.pid}`);
      fs.writeFileSync(file, TOKEN);
      process.env.OIDC_TOKEN_FILE = file;
      const client = connect(`mongodb://${server.address}/?directConnection=true&authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test`, {
        logging: { componentSeverities: { default: 'debug' }, path: sink },
      });
      client.events$.subscribe((e) => texts.push(shown(e)));
      try {
        const status = await client.command('admin', { connectionStatus: 1 });
        expect(status.authInfo.authenticatedUsers).to.deep.equal([{ user: 'svc', db: '$external' }]);
        texts.push(shown(client));
      } finally {
        await client.close();
        delete process.env.OIDC_TOKEN_FILE;
        fs.rmSync(file);
      }
      for (const text of [...texts, ...messages]) {
        expect(text).to.not.include(TOKEN);
        expect(text).to.not.include(BAD_TOKEN);
      }
      expect(messages.join('\n')).to.include('Authentication failed');
    });
  });
});

describe('MONGODB-OIDC against MONGODB_URI', function () {
  it('authenticates a pool\'s connections through the URI\'s ENVIRONMENT when MONGODB_URI uses MONGODB-OIDC', async function () {
    const uri = process.env.MONGODB_URI;
    const parsed = uri === undefined ? undefined : parseConnectionString(uri);
    const credentials = parsed?.connectionOptions.credentials;
    if (credentials?.mechanism !== 'MONGODB-OIDC') {
      console.log('      skipped: MONGODB_URI is unset or does not authenticate with MONGODB-OIDC (ENVIRONMENT in its authMechanismProperties)');
      this.skip();
    }
    const pool = new ConnectionPool({ address: parsed!.hosts[0], connectionOptions: parsed!.connectionOptions, maxPoolSize: 3 });
    pool.ready();
    try {
      // Three connections at once: one token for all of them.
      const statuses = await Promise.all([1, 2, 3].map(() => pool.withConnection((c) => c.command('admin', { connectionStatus: 1 }))));
      for (const status of statuses) expect(status.authInfo.authenticatedUsers[0].db).to.equal('$external');
      expect(credentials).to.be.instanceOf(MongoCredentials);
      expect(cachedOidcToken(credentials as MongoCredentials)).to.be.a('string');
    } finally {
      pool.close();
    }
  });
});

