/**
 * MONGODB-OIDC, human workflow (auth spec, "Human Authentication Flow", "OIDC Human Callback", "Two-Step",
 * "Credential Caching", "Speculative Authentication", "Reauthentication", ALLOWED_HOSTS): the prose tests of the auth
 * spec's mongodb-oidc.md "Human Authentication Flow Prose Tests" that the endpoint can play, numbered as there, and
 * this library's own. No test may find an access or refresh token in an error, event, log message, inspection or JSON.
 */
import { expect } from 'chai';
import { inspect } from 'node:util';
import { BSON, type Document } from 'bson';
import { AuthenticationError, ConnectionPool, InvalidOptionError, MongoCredentials, connect, type CredentialsInit, type LogSink } from '../../lib';
import { parseConnectionString } from '../../lib/connection-string';
import { cachedOidcToken, OIDC_DEFAULT_ALLOWED_HOSTS, OIDC_HUMAN_CALLBACK_TIMEOUT_MS, OidcHostNotAllowedError, oidcHostAllowed, type OidcHumanCallback, type OidcHumanCallbackParams, type OidcHumanCredential } from '../../lib/auth/oidc';
import { EmbeddedServer, signOidcToken } from '../../lib/testing';
import { establishOne } from '../support/endpoint';

const KEY = 'idp-signing-key';
const TOKEN = signOidcToken(KEY, { sub: 'user1' });
const TOKEN2 = signOidcToken(KEY, { sub: 'user2' });
const BAD_TOKEN = signOidcToken('another-key', { sub: 'user1' });
const REFRESH = 'refresh-token-secret-1';
const IDP1 = { issuer: 'https://idp1.invalid', clientId: 'client1', requestScopes: ['openid', 'offline_access'] };
const IDP2 = { issuer: 'https://idp2.invalid', clientId: 'client2' };

const shown = (value: unknown): string => `${value instanceof Error ? value.message : ''} ${inspect(value, { depth: 8 })} ${JSON.stringify(value) ?? ''}`;
const rejection = (work: Promise<unknown>): Promise<unknown> => work.then(() => undefined, (e: unknown) => e);

/** A human callback recording its calls (a copy of each params, with when it was called) and returning `answer(params, n)`. */
function human(answer: (params: OidcHumanCallbackParams, call: number) => OidcHumanCredential = () => ({ accessToken: TOKEN, refreshToken: REFRESH })): OidcHumanCallback & { calls: (OidcHumanCallbackParams & { at: number })[] } {
  const calls: (OidcHumanCallbackParams & { at: number })[] = [];
  return Object.assign((params: OidcHumanCallbackParams) => {
    calls.push({ ...params, at: performance.now() });
    return answer(params, calls.length);
  }, { calls });
}

const credentialsOf = (callback: OidcHumanCallback, init: Partial<CredentialsInit> = {}, properties: Record<string, unknown> = {}): MongoCredentials =>
  new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { OIDC_HUMAN_CALLBACK: callback, ...properties }, ...init } as CredentialsInit);

const fail391 = { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 391 } };

describe('MONGODB-OIDC human workflow (auth spec, "Human Authentication Flow")', function () {
  this.timeout(10_000);
  let server: EmbeddedServer;
  /** The OIDC saslStart / saslContinue payloads (decoded) the endpoint received, with the command name. */
  let received: { name: string; payload: Document | undefined; speculative: boolean }[];

  const start = async (options: ConstructorParameters<typeof EmbeddedServer>[0] = { oidc: { signingKey: KEY, idpInfo: IDP1 } }): Promise<void> => {
    server = new EmbeddedServer(options);
    received = [];
    const target = server as unknown as { authenticateOidc: (...args: unknown[]) => Document };
    const original = target.authenticateOidc.bind(server);
    target.authenticateOidc = (o: unknown, name: unknown, db: unknown, c: unknown, client: unknown) => {
      const command = c as Document;
      const p = command.payload as { buffer: Uint8Array; position: number } | undefined;
      let payload: Document | undefined;
      try {
        payload = p === undefined ? undefined : BSON.deserialize(Buffer.from(p.buffer.buffer, p.buffer.byteOffset, p.position));
      } catch {
        payload = undefined;
      }
      received.push({ name: name as string, payload, speculative: 'db' in command });
      return original(o, name, db, command, client);
    };
    await server.start();
  };
  afterEach(async function () {
    await server?.stop();
  });

  describe('(1) OIDC Human Callback Authentication', function () {
    beforeEach(() => start());

    it('1.1 single principal, implicit user name: the principal step has no n; the callback gets the IdpInfo; find succeeds', async function () {
      const cb = human();
      const c = await establishOne(server.address, { credentials: credentialsOf(cb) });
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(received.map((r) => r.name)).to.deep.equal(['saslstart', 'saslcontinue']);
      expect(received[0]!.payload).to.deep.equal({});
      expect(received[1]!.payload).to.deep.equal({ jwt: TOKEN });
      expect(cb.calls).to.have.length(1);
      expect({ ...cb.calls[0]!.idpInfo }).to.deep.equal(IDP1);
      c.destroy();
    });

    it('1.2 single principal, explicit user name: n is the user name', async function () {
      const cb = human();
      const c = await establishOne(server.address, { credentials: credentialsOf(cb, { username: 'user1@idp' }) });
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(received[0]!.payload).to.deep.equal({ n: 'user1@idp' });
      expect(cb.calls[0]!.username).to.equal('user1@idp');
      c.destroy();
    });
  });

  describe('(1) multiple principals', function () {
    beforeEach(() => start({ oidc: { signingKey: KEY, idpInfo: (n) => (n === 'user1@idp' ? IDP1 : n === 'user2@idp' ? IDP2 : undefined) } }));

    it('1.3 / 1.4 each user gets its own IdP and authenticates; 1.5 no user name fails (18)', async function () {
      for (const [user, idp, token] of [['user1@idp', IDP1, TOKEN], ['user2@idp', IDP2, TOKEN2]] as const) {
        const cb = human(() => ({ accessToken: token }));
        const c = await establishOne(server.address, { credentials: credentialsOf(cb, { username: user }) });
        expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
        expect(cb.calls[0]!.idpInfo.issuer).to.equal(idp.issuer);
        c.destroy();
      }
      const cb = human();
      const error = await rejection(establishOne(server.address, { credentials: credentialsOf(cb) }));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(cb.calls).to.have.length(0);
    });
  });

  describe('(1) ALLOWED_HOSTS', function () {
    beforeEach(() => start());

    it('1.6 an empty ALLOWED_HOSTS, or one without the host, fails client-side naming the host: no callback, nothing sent', async function () {
      for (const allowed of [[], ['example.com']]) {
        const cb = human();
        const error = await rejection(establishOne(server.address, { credentials: credentialsOf(cb, {}, { ALLOWED_HOSTS: allowed }) }));
        expect(error).to.be.instanceOf(OidcHostNotAllowedError);
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as OidcHostNotAllowedError).host).to.equal(server.address.split(':')[0]);
        expect((error as Error).message).to.include(server.address.split(':')[0]);
        expect(cb.calls).to.have.length(0);
      }
      expect(received).to.have.length(0);
    });

    it('1.6 the host is checked before a cached token is sent speculatively or reused', async function () {
      const credentials = credentialsOf(human(), {}, { ALLOWED_HOSTS: ['localhost', '127.0.0.1'] });
      (await establishOne(server.address, { credentials })).destroy();
      expect(cachedOidcToken(credentials)).to.equal(TOKEN);
      (credentials.mechanismProperties.ALLOWED_HOSTS as string[]).length = 0;
      const before = received.length;
      expect(await rejection(establishOne(server.address, { credentials }))).to.be.instanceOf(OidcHostNotAllowedError);
      expect(received.length).to.equal(before);
    });

    it('a host with a NUL (the resolver reads only what precedes it) is refused: "127.0.0.1\\0.mongodb.net" gets no sign-in, no token', async function () {
      const port = server.address.split(':')[1];
      for (const host of ['127.0.0.1\u0000.mongodb.net', '127.0.0.1\u0001.mongodb.net', 'localhost\u007f.mongodb.net']) {
        expect(oidcHostAllowed(host, OIDC_DEFAULT_ALLOWED_HOSTS), JSON.stringify(host)).to.equal(false);
        const cb = human();
        const error = await rejection(Promise.resolve().then(() => establishOne(`${host}:${port}`, { credentials: credentialsOf(cb) })));
        expect(error, JSON.stringify(host)).to.be.instanceOf(Error);
        expect(cb.calls, JSON.stringify(host)).to.have.length(0);
        expect(() => parseConnectionString(`mongodb://${encodeURIComponent(host)}:${port}/`), JSON.stringify(host)).to.throw(InvalidOptionError);
      }
      expect(received).to.have.length(0);
    });

    it('1.7 ALLOWED_HOSTS in the connection string is a configuration error', function () {
      expect(() => parseConnectionString('mongodb+srv://example.com/?authMechanism=MONGODB-OIDC&authMechanismProperties=ALLOWED_HOSTS:%5B%22example.com%22%5D')).to.throw(InvalidOptionError);
      expect(() => parseConnectionString('mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ALLOWED_HOSTS:example.com')).to.throw(InvalidOptionError);
    });

    it('matches as the spec says: exact names and addresses, "*." any subdomain depth (not the domain itself), any case; the default list', function () {
      expect([...OIDC_DEFAULT_ALLOWED_HOSTS]).to.deep.equal(['*.mongodb.net', '*.mongodb-qa.net', '*.mongodb-dev.net', '*.mongodbgov.net', 'localhost', '127.0.0.1', '::1', '*.mongo.com']);
      const d = OIDC_DEFAULT_ALLOWED_HOSTS;
      for (const host of ['localhost', '127.0.0.1', '::1', '[::1]', 'a.mongodb.net', 'x.y.mongodb.net', 'C.MongoDB.Net', 'a.mongodb-qa.net', 'a.mongodb-dev.net', 'a.mongodbgov.net', 'a.mongo.com']) {
        expect(oidcHostAllowed(host, d), host).to.equal(true);
      }
      for (const host of ['mongodb.net', 'evilmongodb.net', 'mongodb.net.evil.com', 'example.com', '127.0.0.2', 'localhost.evil', '']) {
        expect(oidcHostAllowed(host, d), host).to.equal(false);
      }
      expect(oidcHostAllowed('example.com', ['example.com'])).to.equal(true);
      expect(oidcHostAllowed('a.example.com', ['example.com'])).to.equal(false);
      expect(oidcHostAllowed('a.b.example.com', ['*.example.com'])).to.equal(true);
      expect(oidcHostAllowed('anything', [])).to.equal(false);
      // IPv6 addresses compare as addresses: any spelling of the pattern matches the host's canonical form.
      expect(oidcHostAllowed('::1', ['[::1]'])).to.equal(true);
      expect(oidcHostAllowed('::1', ['0:0:0:0:0:0:0:1'])).to.equal(true);
      expect(oidcHostAllowed('2001:db8::1', ['2001:DB8:0:0:0:0:0:1'])).to.equal(true);
      expect(oidcHostAllowed('2001:db8::2', ['2001:db8::1'])).to.equal(false);
      expect(oidcHostAllowed('::ffff:7f00:1', OIDC_DEFAULT_ALLOWED_HOSTS)).to.equal(false);
    });

    it('OIDC_CALLBACK and OIDC_HUMAN_CALLBACK together, or with ENVIRONMENT, are refused; ALLOWED_HOSTS must be strings', function () {
      const cb = human();
      expect(() => credentialsOf(cb, {}, { OIDC_CALLBACK: () => ({ accessToken: TOKEN }) })).to.throw(InvalidOptionError, /OIDC_HUMAN_CALLBACK/);
      expect(() => credentialsOf(cb, {}, { ENVIRONMENT: 'test' })).to.throw(InvalidOptionError, /OIDC_HUMAN_CALLBACK/);
      expect(() => credentialsOf(cb, {}, { ALLOWED_HOSTS: 'localhost' })).to.throw(InvalidOptionError, /ALLOWED_HOSTS/);
      expect(() => credentialsOf(cb, {}, { ALLOWED_HOSTS: [''] })).to.throw(InvalidOptionError, /ALLOWED_HOSTS/);
      expect(() => credentialsOf('x' as unknown as OidcHumanCallback)).to.throw(InvalidOptionError, /OIDC_HUMAN_CALLBACK/);
      expect(() => parseConnectionString('mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=OIDC_HUMAN_CALLBACK:x')).to.throw(InvalidOptionError);
    });
  });

  describe('(1.8) an IdP without clientId (a machine user with a human callback)', function () {
    beforeEach(() => start({ oidc: { signingKey: KEY, idpInfo: { issuer: 'https://machine.invalid' } } }));
    it('authenticates; the callback gets clientId undefined', async function () {
      const cb = human(() => ({ accessToken: TOKEN }));
      const c = await establishOne(server.address, { credentials: credentialsOf(cb, { username: 'test_machine' }) });
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(cb.calls[0]!.idpInfo).to.deep.include({ issuer: 'https://machine.invalid', clientId: undefined });
      c.destroy();
    });
  });

  describe('an IdpInfo the auth spec does not allow (issuer: a URL; clientId, when given: an id)', function () {
    const cases: [string, Document, RegExp][] = [
      ['an empty issuer', { issuer: '', clientId: 'client1' }, /IdpInfo's issuer is empty: it must be the URL of the identity provider/],
      ['an issuer of spaces', { issuer: '  ', clientId: 'client1' }, /IdpInfo's issuer is empty: it must be the URL of the identity provider/],
      ['an issuer that is not a URL', { issuer: 'idp1', clientId: 'client1' }, /IdpInfo's issuer is not a URL: it must be the URL of the identity provider/],
      ['an empty clientId', { issuer: 'https://idp1.invalid', clientId: '' }, /IdpInfo's clientId is empty: it must be absent or the client's id at the identity provider/],
    ];
    for (const [what, idpInfo, message] of cases) {
      it(`${what}: refused with an AuthenticationError saying so, the callback never called, no token in it`, async function () {
        await start({ oidc: { signingKey: KEY, idpInfo: idpInfo as never } });
        const cb = human();
        const error = await rejection(establishOne(server.address, { credentials: credentialsOf(cb) }));
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.match(message);
        expect(cb.calls, 'the human callback').to.have.length(0);
        expect(shown(error)).to.not.include(TOKEN).and.not.include(REFRESH);
        await server.stop();
      });
    }
  });

  describe('(2) OIDC Human Callback Validation', function () {
    beforeEach(() => start());

    it('2.1 the callback gets idpInfo, refreshToken undefined, timeoutContext, timeoutMS 300000 (no deadline), username, version 1', async function () {
      const cb = human();
      const c = await establishOne(server.address, { credentials: credentialsOf(cb, { username: 'u' }), connectTimeoutMS: 0 });
      const p = cb.calls[0]!;
      expect(p.version).to.equal(1);
      expect(p.username).to.equal('u');
      expect(p.refreshToken).to.equal(undefined);
      expect(p.timeoutMS).to.equal(OIDC_HUMAN_CALLBACK_TIMEOUT_MS).and.to.equal(300_000);
      expect(p.timeoutContext).to.be.instanceOf(AbortSignal);
      expect(p.timeoutContext.aborted).to.equal(false);
      expect({ ...p.idpInfo }).to.deep.equal(IDP1);
      c.destroy();
    });

    it('2.1 connectTimeoutMS does not shorten the callback (5 minutes): a 1500 ms sign-in with connectTimeoutMS 1000 succeeds, the deadline resumes after it', async function () {
      const slow = human((params, call) => {
        void params;
        void call;
        return new Promise<OidcHumanCredential>((resolve) => setTimeout(() => resolve({ accessToken: TOKEN, refreshToken: REFRESH }), 1500)) as unknown as OidcHumanCredential;
      });
      const c = await establishOne(server.address, { credentials: credentialsOf(slow), connectTimeoutMS: 1000 });
      expect(slow.calls[0]!.timeoutMS).to.equal(OIDC_HUMAN_CALLBACK_TIMEOUT_MS);
      expect(slow.calls[0]!.timeoutContext.aborted).to.equal(false);
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      c.destroy();
      // After the sign-in, the JWT step is bounded by what connectTimeoutMS had left: a server that never answers it
      // fails the establishment about 1000 ms (not 1500 + 1000 ms) after the start, less the time before the callback.
      const target = server as unknown as { authenticateOidc: (...args: unknown[]) => Document | Promise<Document> };
      const original = target.authenticateOidc;
      target.authenticateOidc = (...args: unknown[]) => (args[1] === 'saslcontinue' ? new Promise<Document>(() => undefined) : original(...args));
      const again = human((params, call) => {
        void params;
        void call;
        return new Promise<OidcHumanCredential>((resolve) => setTimeout(() => resolve({ accessToken: TOKEN }), 1500)) as unknown as OidcHumanCredential;
      });
      const began = performance.now();
      const error = await rejection(establishOne(server.address, { credentials: credentialsOf(again), connectTimeoutMS: 1000 }));
      const took = performance.now() - began;
      expect((error as Error).message).to.match(/timed out after 1000 ms \(during auth\)/);
      // 3500 ms if the JWT step had connectTimeoutMS whole again; the upper bound leaves a loaded machine 1000 ms of lag.
      expect(took).to.be.within(2300, 3300);
    });

    it('2.2 a callback returning no accessToken, an empty one, a bad expiry or a bad refreshToken fails authentication', async function () {
      for (const answer of [{}, { accessToken: '' }, { accessToken: TOKEN, expiresInSeconds: -1 }, { accessToken: TOKEN, refreshToken: 5 }]) {
        const error = await rejection(establishOne(server.address, { credentials: credentialsOf(human(() => answer as OidcHumanCredential)) }));
        expect(error, JSON.stringify(answer)).to.be.instanceOf(AuthenticationError);
      }
    });

    it('2.3 the refresh token is given to the callback on reauthentication (391)', async function () {
      const cb = human();
      const c = await establishOne(server.address, { credentials: credentialsOf(cb) });
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      await c.command('admin', fail391);
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(cb.calls).to.have.length(2);
      expect(cb.calls.map((p) => p.refreshToken)).to.deep.equal([undefined, REFRESH]);
      // The refresh used the cached IdpInfo: one principal step only.
      expect(server.oidc!.principalSteps).to.equal(1);
      expect({ ...cb.calls[1]!.idpInfo }).to.deep.equal(IDP1);
      c.destroy();
    });
  });

  describe('(3) Speculative Authentication', function () {
    beforeEach(() => start());

    it('3.1 uses speculative authentication once a token is cached: a saslStart fail point does not stop it', async function () {
      const cb = human();
      const credentials = credentialsOf(cb);
      (await establishOne(server.address, { credentials })).destroy();
      const c = await establishOne(server.address, { credentials });
      await c.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['saslStart'], errorCode: 18 } });
      const d = await establishOne(server.address, { credentials });
      expect((await d.command('test', { find: 'c' })).ok).to.equal(1);
      expect(received.filter((r) => r.speculative).map((r) => r.payload)).to.deep.equal([{ jwt: TOKEN }, { jwt: TOKEN }]);
      expect(cb.calls).to.have.length(1);
      c.destroy();
      d.destroy();
    });

    it('3.2 does not use speculative authentication without a cached token: a saslStart fail point fails it', async function () {
      const admin = await establishOne(server.address, { credentials: credentialsOf(human()) });
      await admin.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['saslStart'], errorCode: 18 } });
      const error = await rejection(establishOne(server.address, { credentials: credentialsOf(human()) }));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(received.filter((r) => r.speculative)).to.have.length(0);
      admin.destroy();
    });
  });

  describe('(4) Reauthentication', function () {
    beforeEach(() => start());

    it('4.1 succeeds: the callback called twice (with the refresh token), find retried once', async function () {
      const cb = human();
      const c = await establishOne(server.address, { credentials: credentialsOf(cb) });
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(cb.calls).to.have.length(1);
      await c.command('admin', fail391);
      const before = received.length;
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(cb.calls).to.have.length(2);
      // One one-step saslStart (the refreshed token), no principal step.
      expect(received.slice(before).map((r) => [r.name, r.payload])).to.deep.equal([['saslstart', { jwt: TOKEN }]]);
      c.destroy();
    });

    it('a command\'s timeoutMS does not shorten the callback on reauthentication: an 800 ms refresh within timeoutMS 500 succeeds', async function () {
      const cb = human((params, call) => {
        void params;
        if (call === 1) return { accessToken: TOKEN, refreshToken: REFRESH };
        return new Promise<OidcHumanCredential>((resolve) => setTimeout(() => resolve({ accessToken: TOKEN2 }), 800)) as unknown as OidcHumanCredential;
      });
      const c = await establishOne(server.address, { credentials: credentialsOf(cb) });
      await c.command('admin', fail391);
      expect((await c.command('test', { find: 'c' }, { timeoutMS: 500 })).ok).to.equal(1);
      expect(cb.calls).to.have.length(2);
      expect(cb.calls[1]!.timeoutMS).to.equal(OIDC_HUMAN_CALLBACK_TIMEOUT_MS);
      expect(cb.calls[1]!.refreshToken).to.equal(REFRESH);
      c.destroy();
    });

    it('4.2 succeeds without a refresh token: a new two-step conversation, no refresh token given', async function () {
      const cb = human(() => ({ accessToken: TOKEN }));
      const c = await establishOne(server.address, { credentials: credentialsOf(cb) });
      await c.command('admin', fail391);
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(cb.calls).to.have.length(2);
      expect(cb.calls.map((p) => p.refreshToken)).to.deep.equal([undefined, undefined]);
      expect(server.oidc!.principalSteps).to.equal(2);
      c.destroy();
    });

    it('4.3 succeeds after the refresh fails (refreshed token refused, 18): a fresh sign-in without the refresh token', async function () {
      const cb = human((p) => ({ accessToken: p.refreshToken === undefined ? TOKEN : BAD_TOKEN, refreshToken: 'bad-refresh-token' }));
      const c = await establishOne(server.address, { credentials: credentialsOf(cb) });
      await c.command('admin', fail391);
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      expect(cb.calls.map((p) => p.refreshToken)).to.deep.equal([undefined, 'bad-refresh-token', undefined]);
      expect(server.oidc!.principalSteps).to.equal(2);
      c.destroy();
    });

    it('4.4 fails when the refreshed and the fresh token are refused: three calls, spaced 100 ms at least, one at a time', async function () {
      let running = 0;
      let overlap = false;
      const cb = human((_, n) => {
        overlap ||= running > 0;
        return { accessToken: n === 1 ? TOKEN : BAD_TOKEN, refreshToken: 'bad-refresh-token' };
      });
      const credentials = credentialsOf(cb);
      const c = await establishOne(server.address, { credentials });
      expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      await c.command('admin', fail391);
      const error = await rejection(c.command('test', { find: 'c' }));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(cb.calls).to.have.length(3);
      for (let i = 1; i < cb.calls.length; i++) expect(cb.calls[i]!.at - cb.calls[i - 1]!.at).to.be.at.least(99);
      expect(overlap).to.equal(false);
      expect(cachedOidcToken(credentials)).to.equal(undefined);
      c.destroy();
    });

    it('an expiring token: the endpoint answers 391 once it expires, and the connection refreshes', async function () {
      await server.stop();
      const expiring = 'expiring-access-token';
      const fresh = 'fresh-access-token';
      const expiresAtMS = Date.now() + 60_000;
      await start({ oidc: { tokens: { [expiring]: { user: 'user1', expiresAtMS } , [fresh]: { user: 'user1' } }, idpInfo: IDP1 } });
      const cb = human((p) => ({ accessToken: p.refreshToken === undefined ? expiring : fresh, refreshToken: REFRESH }));
      const c = await establishOne(server.address, { credentials: credentialsOf(cb) });
      // The endpoint reads the expiry on Date.now(): moved past it rather than waited for (timers keep real time).
      const now = Date.now;
      const aheadMS = expiresAtMS + 1 - now();
      Date.now = () => now() + aheadMS;
      try {
        expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
      } finally {
        Date.now = now;
      }
      expect(cb.calls.map((p) => p.refreshToken)).to.deep.equal([undefined, REFRESH]);
      c.destroy();
    });
  });

  describe('caching and secrets', function () {
    beforeEach(() => start());

    it('connections of one credentials object share one sign-in (one call, one principal step)', async function () {
      const cb = human();
      const credentials = credentialsOf(cb);
      const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials }, maxPoolSize: 5, minPoolSize: 0 });
      pool.ready();
      // Each connection is held until all five are checked out: five connections, each authenticated.
      const used = new Set<unknown>();
      let allCheckedOut!: () => void;
      const five = new Promise<void>((resolve) => (allCheckedOut = resolve));
      try {
        await Promise.all(Array.from({ length: 5 }, () => pool.withConnection(async (c) => {
          used.add(c);
          if (used.size === 5) allCheckedOut();
          await five;
          return c.command('test', { find: 'c' });
        })));
      } finally {
        pool.close();
      }
      expect(used.size).to.equal(5);
      expect(cb.calls).to.have.length(1);
      expect(server.oidc!.principalSteps).to.equal(1);
    });

    it('the user name of credentials that signed in cannot be changed: their cached tokens are never sent for another user', async function () {
      const cb = human();
      const credentials = credentialsOf(cb, { username: 'user1' });
      (await establishOne(server.address, { credentials })).destroy();
      expect(() => {
        (credentials as { username: string | undefined }).username = 'user2';
      }).to.throw(TypeError);
      expect(() => {
        (credentials as { source: string }).source = 'admin';
      }).to.throw(TypeError);
      expect(credentials.username).to.equal('user1');
      expect(credentials.source).to.equal('$external');
    });

    it('a server echoing the token in its refusal of the JWT step: the error shows it not', async function () {
      const target = server as unknown as { authenticateOidc: (...args: unknown[]) => Document };
      const original = target.authenticateOidc;
      target.authenticateOidc = (...args: unknown[]) => {
        const reply = original(...args);
        const last = received.at(-1);
        return last?.name === 'saslcontinue' ? { ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: `token ${String(last.payload?.jwt)} refused` } : reply;
      };
      const error = await rejection(establishOne(server.address, { credentials: credentialsOf(human()) }));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(shown(error)).to.include('refused').and.not.include(TOKEN);
    });

    it('a server refusing the handshake that carried the token speculatively, quoting it: no error, event or log message shows it', async function () {
      const messages: string[] = [];
      const sink: LogSink = { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) };
      const credentials = credentialsOf(human());
      const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials }, logging: { componentSeverities: { connection: 'debug' }, path: sink } });
      const texts: string[] = [];
      pool.events$.subscribe((e) => texts.push(shown(e)));
      pool.ready();
      try {
        await pool.withConnection((c) => c.command('test', { find: 'c' }));
        pool.clear();
        pool.ready();
        const target = server as unknown as { helloReply: (legacy: boolean, command: Document, client: unknown) => Document };
        target.helloReply = (_legacy, command) => {
          const p = (command.speculativeAuthenticate as Document | undefined)?.payload as { buffer: Uint8Array; position: number } | undefined;
          const jwt = p === undefined ? '' : String(BSON.deserialize(Buffer.from(p.buffer.buffer, p.buffer.byteOffset, p.position)).jwt);
          return { ok: 0, code: 8000, codeName: 'AtlasError', errmsg: `bad handshake ${jwt}` };
        };
        const error = await rejection(pool.withConnection((c) => c.command('test', { find: 'c' })));
        expect(shown(error)).to.include('bad handshake');
        texts.push(shown(error), String((error as Error).stack));
      } finally {
        pool.close();
      }
      expect(messages.join('\n')).to.include('bad handshake');
      for (const text of [...texts, ...messages]) expect(text).to.not.include(TOKEN);
    });

    it('a server accepting the handshake that carried the token speculatively, quoting it in its reply: the connection keeps no copy, nor any event or log message', async function () {
      const messages: string[] = [];
      const sink: LogSink = { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) };
      const credentials = credentialsOf(human());
      const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials }, logging: { componentSeverities: { connection: 'debug', command: 'debug' }, path: sink } });
      const texts: string[] = [];
      pool.events$.subscribe((e) => texts.push(shown(e)));
      pool.commandEvents$.subscribe((e) => texts.push(shown(e)));
      pool.ready();
      try {
        await pool.withConnection((c) => c.command('test', { find: 'c' }));
        pool.clear();
        pool.ready();
        const target = server as unknown as { helloReply: (legacy: boolean, command: Document, client: unknown) => Document };
        const original = target.helloReply.bind(server);
        target.helloReply = (legacy, command, client) => {
          const reply = original(legacy, command, client);
          const p = (command.speculativeAuthenticate as Document | undefined)?.payload as { buffer: Uint8Array; position: number } | undefined;
          if (p === undefined) return reply;
          const jwt = String(BSON.deserialize(Buffer.from(p.buffer.buffer, p.buffer.byteOffset, p.position)).jwt);
          // A buggy proxy echoing what it was sent: in the speculative reply, and beside it.
          return { ...reply, speculativeAuthenticate: { ...(reply.speculativeAuthenticate as Document), echo: jwt }, note: `received ${jwt}`, tags: [{ jwt }] };
        };
        await pool.withConnection(async (c) => {
          expect(received.filter((r) => r.speculative).map((r) => r.payload), 'sent speculatively').to.deep.equal([{ jwt: TOKEN }]);
          expect((await c.command('test', { find: 'c' })).ok).to.equal(1);
          expect(c.hello, 'the speculative reply: used by the authentication, not kept').to.not.have.property('speculativeAuthenticate');
          expect(c.hello.note).to.equal('received <access token not shown>');
          expect(c.hello.maxWireVersion, 'the rest kept').to.equal(c.server.maxWireVersion).and.be.above(0);
          texts.push(shown(c.hello), shown(c), shown(c.server));
        });
      } finally {
        pool.close();
      }
      for (const text of [...texts, ...messages]) expect(text).to.not.include(TOKEN);
    });

    it('no access or refresh token shows in an error, event, log message, inspection or JSON', async function () {
      const messages: string[] = [];
      const sink: LogSink = { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) };
      const texts: string[] = [];
      for (const token of [TOKEN, BAD_TOKEN]) {
        const credentials = credentialsOf(human(() => ({ accessToken: token, refreshToken: REFRESH })));
        const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials }, logging: { componentSeverities: { connection: 'debug' }, path: sink } });
        pool.events$.subscribe((e) => texts.push(shown(e)));
        pool.ready();
        const result = await pool.withConnection(async (c) => {
          await c.command('admin', fail391);
          return c.command('test', { find: 'c' });
        }).catch((e: unknown) => e);
        texts.push(shown(result), shown(credentials), shown(pool));
        pool.close();
      }
      const client = connect(`mongodb://${server.address}/?directConnection=true`, {
        credentials: { mechanism: 'MONGODB-OIDC', mechanismProperties: { OIDC_HUMAN_CALLBACK: () => ({ accessToken: TOKEN, refreshToken: REFRESH }) } },
        logging: { componentSeverities: { default: 'debug' }, path: sink },
      } as Parameters<typeof connect>[1]);
      client.events$.subscribe((e) => texts.push(shown(e)));
      try {
        const status = await client.command('admin', { connectionStatus: 1 });
        expect(status.authInfo.authenticatedUsers).to.deep.equal([{ user: 'user1', db: '$external' }]);
        texts.push(shown(client));
      } finally {
        await client.close();
      }
      for (const text of [...texts, ...messages]) {
        for (const secret of [TOKEN, BAD_TOKEN, REFRESH]) expect(text).to.not.include(secret);
      }
      expect(messages.join('\n')).to.include('Authentication failed');
    });
  });
});
