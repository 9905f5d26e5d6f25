/**
 * MONGODB-AWS: the conversation and its bytes, the checks of the server's answer, the region, the SigV4 signer against
 * AWS's published examples, each credential source in the spec's order (local HTTP servers in place of STS, ECS and
 * EC2), the cache and its expiry (an injected clock), and pools and connect() against the embedded endpoint (which
 * verifies the signature in place of STS). No test may find the secret access key or the session token in an error,
 * event, log message or inspection.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { Binary, deserialize, serialize, type Document } from 'bson';
import { AuthenticationError, ConnectionPool, InvalidOptionError, MongoCredentials, MongoServerError, connect, type LogSink } from '../../lib';
import { speculativeStart } from '../../lib/auth/authenticate';
import { awsAuthenticate, awsCredentials, awsRegion, awsSignedRequest, setAwsEnvironmentForTests, sigV4Authorization, type AwsCredentials } from '../../lib/auth/aws';
import { parseConnectionString, parseConnectionStringWithCredentials } from '../../lib/connection-string';
import { EmbeddedServer } from '../../lib/testing';

const SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY';
const TOKEN = 'session-token-not-to-show';
const KEY_ID = 'AKIAICGVLKOKZVY3X3DA';

const shown = (value: unknown): string => `${value instanceof Error ? value.message : ''} ${inspect(value, { depth: 8, showHidden: true })} ${JSON.stringify(value) ?? ''}`;
const rejection = (work: Promise<unknown>): Promise<unknown> => work.then(() => undefined, (e: unknown) => e);
const aws = (properties?: Record<string, unknown>): MongoCredentials => new MongoCredentials({ mechanism: 'MONGODB-AWS', ...(properties ? { mechanismProperties: properties } : {}) });
const env = (vars: Record<string, string>, now?: () => number): void => setAwsEnvironmentForTests({ env: vars, ...(now ? { now } : {}) });

/** A RunCommand recording the commands; answers the saslStart with `first(clientNonce)`, the saslContinue with done. */
function fakeServer(first: (clientNonce: Buffer) => Document): { run: (db: string, c: Document) => Promise<Document>; commands: [string, Document][] } {
  const commands: [string, Document][] = [];
  return {
    commands,
    run: async (db, command) => {
      commands.push([db, command]);
      if ('saslStart' in command) {
        const r = deserialize(Buffer.from((command.payload as Binary).buffer)).r as Binary;
        return { conversationId: 1, done: false, payload: new Binary(serialize(first(Buffer.from(r.buffer)))), ok: 1 };
      }
      return { conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 };
    },
  };
}
const goodFirst = (host = 'sts.amazonaws.com') => (nonce: Buffer): Document => ({ s: new Binary(Buffer.concat([nonce, Buffer.alloc(32, 7)])), h: host });

afterEach(function () {
  setAwsEnvironmentForTests();
});

describe('MONGODB-AWS (auth spec, "MONGODB-AWS")', function () {
  describe('region calculation', function () {
    it('follows the spec\'s table', function () {
      const table: [string, string | undefined][] = [
        ['sts.amazonaws.com', 'us-east-1'], ['aws.amazonaws.com', 'us-east-1'], ['sts.us-west-2.amazonaws.com', 'us-west-2'], ['sts.us-west-2.amazonaws.com.ch', 'us-west-2'],
        ['example.com', 'com'], ['localhost', 'us-east-1'], ['sts..com', undefined], ['.amazonaws.com', undefined], ['sts.amazonaws.', undefined], ['', undefined],
        ['a'.repeat(256), undefined], ['a'.repeat(255), 'us-east-1'], ['é'.repeat(128), undefined],
      ];
      for (const [host, region] of table) expect(awsRegion(host), host).to.equal(region);
    });
  });

  describe('the SigV4 signer', function () {
    it('gives AWS\'s published signatures: the get-vanilla suite test and the IAM ListUsers example the spec quotes', function () {
      const key = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: SECRET };
      expect(sigV4Authorization({ method: 'GET', path: '/', query: '', headers: { Host: 'example.amazonaws.com', 'X-Amz-Date': '20150830T123600Z' }, body: '', region: 'us-east-1', service: 'service', amzDate: '20150830T123600Z' }, key)).to.equal(
        'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31',
      );
      expect(sigV4Authorization({
        method: 'GET', path: '/', query: 'Action=ListUsers&Version=2010-05-08',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8', Host: 'iam.amazonaws.com', 'X-Amz-Date': '20150830T123600Z' },
        body: '', region: 'us-east-1', service: 'iam', amzDate: '20150830T123600Z',
      }, key)).to.equal('AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7');
    });
  });

  describe('the GetCallerIdentity signature', function () {
    it('is the official driver\'s for the same key, token, host, server nonce and date (its aws4 signer, run here)', async function () {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { aws4Sign } = require('mongodb/lib/cmap/auth/aws4') as { aws4Sign: (o: object, c: object) => Promise<Record<string, string>> };
      const nonce = Buffer.from(Array.from({ length: 64 }, (_, i) => i));
      for (const [host, token] of [['sts.amazonaws.com', undefined], ['sts.us-west-2.amazonaws.com', TOKEN]] as const) {
        const body = 'Action=GetCallerIdentity&Version=2011-06-15';
        const driver = await aws4Sign({
          method: 'POST', host, region: awsRegion(host), service: 'sts', path: '/', body, date: new Date(Date.UTC(2019, 10, 7, 0, 26, 7)),
          headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': body.length, 'X-MongoDB-Server-Nonce': nonce.toString('base64'), 'X-MongoDB-GS2-CB-Flag': 'n' },
        }, { accessKeyId: KEY_ID, secretAccessKey: SECRET, ...(token ? { sessionToken: token } : {}) });
        expect(sigV4Authorization(awsSignedRequest(host, nonce, '20191107T002607Z', token), { accessKeyId: KEY_ID, secretAccessKey: SECRET }), host).to.equal(driver.Authorization);
      }
    });
  });

  describe('the conversation', function () {
    it('sends the spec\'s client-first bytes, then a, d and t on $external; not speculative', async function () {
      // The spec's example saslStart payload, and the client nonce it holds.
      const example = Buffer.from('NAAAAAVyACAAAAAAWj0lSjp8M0BMKGU+QVAzRSpWfk0hJigqO1V+b0FaVz4QcABuAAAAAA==', 'base64');
      const nonce = Buffer.from((deserialize(example).r as Binary).buffer);
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET, AWS_SESSION_TOKEN: TOKEN }, () => Date.UTC(2019, 10, 7, 0, 26, 7));
      const server = fakeServer(goodFirst('sts.us-west-2.amazonaws.com'));
      await awsAuthenticate(server.run, aws(), { clientNonce: nonce });
      expect(server.commands.map(([db, c]) => [db, Object.keys(c)])).to.deep.equal([['$external', ['saslStart', 'mechanism', 'payload']], ['$external', ['saslContinue', 'conversationId', 'payload']]]);
      expect(Buffer.from((server.commands[0][1].payload as Binary).buffer).equals(example)).to.equal(true);
      const second = deserialize(Buffer.from((server.commands[1][1].payload as Binary).buffer));
      expect(Object.keys(second)).to.deep.equal(['a', 'd', 't']);
      expect(second.d).to.equal('20191107T002607Z');
      expect(second.t).to.equal(TOKEN);
      expect(second.a).to.match(/^AWS4-HMAC-SHA256 Credential=AKIAICGVLKOKZVY3X3DA\/20191107\/us-west-2\/sts\/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-date;x-amz-security-token;x-mongodb-gs2-cb-flag;x-mongodb-server-nonce, Signature=[0-9a-f]{64}$/);
      expect(speculativeStart(aws())).to.equal(undefined);
    });

    it('omits t and x-amz-security-token for long-term credentials; a random 32-byte nonce each time', async function () {
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET });
      const server = fakeServer(goodFirst());
      await awsAuthenticate(server.run, aws());
      await awsAuthenticate(server.run, aws());
      const second = deserialize(Buffer.from((server.commands[1][1].payload as Binary).buffer));
      expect(Object.keys(second)).to.deep.equal(['a', 'd']);
      expect(second.a).to.include('SignedHeaders=content-length;content-type;host;x-amz-date;x-mongodb-gs2-cb-flag;x-mongodb-server-nonce,');
      const nonces = [0, 2].map((i) => Buffer.from((deserialize(Buffer.from((server.commands[i][1].payload as Binary).buffer)).r as Binary).buffer));
      expect(nonces[0]).to.have.length(32);
      expect(nonces[0].equals(nonces[1])).to.equal(false);
      expect(deserialize(Buffer.from((server.commands[0][1].payload as Binary).buffer)).p).to.equal(110);
    });

    it('refuses a server nonce that is not 64 bytes starting with the client nonce, and each invalid STS host, sending no saslContinue', async function () {
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET });
      const answers: [string, (n: Buffer) => Document][] = [
        ['nonce 63 bytes', (n) => ({ s: new Binary(Buffer.concat([n, Buffer.alloc(31)])), h: 'sts.amazonaws.com' })],
        ['nonce 65 bytes', (n) => ({ s: new Binary(Buffer.concat([n, Buffer.alloc(33)])), h: 'sts.amazonaws.com' })],
        ['nonce of another client', (n) => ({ s: new Binary(Buffer.concat([Buffer.from(n).reverse(), Buffer.alloc(32)])), h: 'sts.amazonaws.com' })],
        ['nonce not binary', () => ({ s: 'x'.repeat(64), h: 'sts.amazonaws.com' })],
        ...['', '.amazonaws.com', 'sts.amazonaws.', 'sts..com', 'a'.repeat(256)].map((h): [string, (n: Buffer) => Document] => [`host ${JSON.stringify(h.slice(0, 20))}`, goodFirst(h)]),
        ['host not a string', (n) => ({ s: new Binary(Buffer.concat([n, Buffer.alloc(32)])), h: 5 })],
      ];
      for (const [name, first] of answers) {
        const server = fakeServer(first);
        const error = await rejection(awsAuthenticate(server.run, aws()));
        expect(error, name).to.be.instanceOf(AuthenticationError);
        expect(server.commands, name).to.have.length(1);
      }
    });
    it('shows no session token a server echoes in its refusal, in the error or its cause', async function () {
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET, AWS_SESSION_TOKEN: TOKEN });
      const echo = async (db: string, command: Document): Promise<Document> => {
        if ('saslStart' in command) return fakeServer(goodFirst()).run(db, command);
        const { t } = deserialize(Buffer.from((command.payload as Binary).buffer));
        throw new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: `token ${t} is not valid`, errInfo: { token: t } });
      };
      const error = await rejection(awsAuthenticate(echo, aws()));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: token <session token> is not valid');
      const cause = (error as Error).cause as MongoServerError;
      expect(cause).to.be.instanceOf(MongoServerError);
      expect([cause.code, cause.codeName, cause.message]).to.deep.equal([18, 'AuthenticationFailed', 'token <session token> is not valid']);
      expect(shown(error)).to.not.include(TOKEN);
      expect(inspect(cause.response, { depth: 8 })).to.not.include(TOKEN);
    });
    it('shows no session token a server echoes as the payload it was sent (BinData), in the cause', async function () {
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET, AWS_SESSION_TOKEN: TOKEN });
      const echo = async (db: string, command: Document): Promise<Document> => {
        if ('saslStart' in command) return fakeServer(goodFirst()).run(db, command);
        throw new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'refused', errorLabels: ['Probe'], errInfo: { tried: command.payload } });
      };
      const error = await rejection(awsAuthenticate(echo, aws()));
      expect(error).to.be.instanceOf(AuthenticationError);
      const cause = (error as Error).cause as MongoServerError;
      expect([cause.code, cause.message, cause.hasErrorLabel('Probe')]).to.deep.equal([18, 'refused', true]);
      const tried = (cause.response.errInfo as { tried: Binary }).tried;
      const bytes = Buffer.from(tried.buffer.buffer, tried.buffer.byteOffset, tried.position).toString('utf8');
      expect(bytes).to.include('<session token>').and.not.include(TOKEN);
    });
  });

  describe('credentials', function () {
    it('are refused in the URI and the credentials option; authSource must be $external; AWS_CREDENTIAL_PROVIDER only as an option', function () {
      for (const make of [
        () => parseConnectionString(`mongodb://${KEY_ID}:${encodeURIComponent(SECRET)}@h/?authMechanism=MONGODB-AWS`),
        () => parseConnectionString(`mongodb://${KEY_ID}@h/?authMechanism=MONGODB-AWS`),
        () => new MongoCredentials({ mechanism: 'MONGODB-AWS', username: KEY_ID, password: SECRET }),
        () => new MongoCredentials({ mechanism: 'MONGODB-AWS', password: SECRET }),
        () => new MongoCredentials({ mechanism: 'MONGODB-AWS', source: 'admin' }),
        () => parseConnectionString('mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_CREDENTIAL_PROVIDER:x'),
        () => aws({ AWS_SESSION_TOKEN: TOKEN }),
        () => aws({ AWS_CREDENTIAL_PROVIDER: 'not a function' }),
      ]) {
        let error: unknown;
        try {
          make();
        } catch (e) {
          error = e;
        }
        expect(error, make.toString()).to.be.instanceOf(InvalidOptionError);
        expect(shown(error)).to.not.include(SECRET).and.not.include(TOKEN);
      }
      expect(() => parseConnectionString('mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_CREDENTIAL_PROVIDER:x')).to.throw(
        InvalidOptionError,
        'Invalid authMechanismProperties.AWS_CREDENTIAL_PROVIDER: "<not shown>" (authMechanismProperties.AWS_CREDENTIAL_PROVIDER must be given in the credentials option of connect() (mechanismProperties), never in the connection string)',
      );
      const parsed = parseConnectionString('mongodb://h/?authMechanism=MONGODB-AWS').connectionOptions.credentials!;
      expect((parsed as MongoCredentials).toJSON()).to.deep.equal({ source: '$external', mechanism: 'MONGODB-AWS' });
      const provider = async (): Promise<AwsCredentials> => ({ accessKeyId: KEY_ID, secretAccessKey: SECRET });
      const merged = parseConnectionStringWithCredentials('mongodb://h/?authMechanism=MONGODB-AWS', { mechanismProperties: { AWS_CREDENTIAL_PROVIDER: provider } } as never);
      expect((merged.connectionOptions.credentials as MongoCredentials).mechanismProperties.AWS_CREDENTIAL_PROVIDER).to.equal(provider);
      expect(shown(merged.connectionOptions.credentials)).to.not.include('AWS_CREDENTIAL_PROVIDER');
      // The option's properties take the place of the URI's, which are ignored with a warning (not checked).
      const both = parseConnectionStringWithCredentials('mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_CREDENTIAL_PROVIDER:x', { mechanismProperties: { AWS_CREDENTIAL_PROVIDER: provider } } as never);
      expect(both.warnings).to.deep.equal(['authMechanismProperties is ignored: the credentials option sets its own mechanismProperties']);
      expect((both.connectionOptions.credentials as MongoCredentials).mechanismProperties.AWS_CREDENTIAL_PROVIDER).to.equal(provider);
      // A MongoCredentials instance given is kept as it is.
      const instance = aws({ AWS_CREDENTIAL_PROVIDER: provider });
      expect(parseConnectionStringWithCredentials('mongodb://h/?authMechanism=MONGODB-AWS', instance).connectionOptions.credentials).to.equal(instance);
    });

    it('come from the provider first, then the environment (read at each authentication), never cached', async function () {
      const vars: Record<string, string> = { AWS_ACCESS_KEY_ID: 'env-key', AWS_SECRET_ACCESS_KEY: 'env-secret' };
      env(vars);
      let calls = 0;
      const provider = async (): Promise<AwsCredentials> => ({ accessKeyId: `p${++calls}`, secretAccessKey: SECRET, sessionToken: TOKEN });
      expect(await awsCredentials(aws({ AWS_CREDENTIAL_PROVIDER: provider }))).to.deep.equal({ accessKeyId: 'p1', secretAccessKey: SECRET, sessionToken: TOKEN });
      expect((await awsCredentials(aws({ AWS_CREDENTIAL_PROVIDER: provider }))).accessKeyId).to.equal('p2');
      expect(await awsCredentials(aws())).to.deep.equal({ accessKeyId: 'env-key', secretAccessKey: 'env-secret' });
      vars.AWS_ACCESS_KEY_ID = 'env-key-2';
      vars.AWS_SESSION_TOKEN = 'tok';
      expect(await awsCredentials(aws())).to.deep.equal({ accessKeyId: 'env-key-2', secretAccessKey: 'env-secret', sessionToken: 'tok' });
      const failed = await rejection(awsCredentials(aws({ AWS_CREDENTIAL_PROVIDER: async () => Promise.reject(new Error(`boom ${SECRET}`)) })));
      expect(failed).to.be.instanceOf(AuthenticationError);
      expect(shown(failed)).to.not.include(SECRET);
      // A result whose fields cannot be read (a getter that throws) fails the same way, its error not shown.
      const unreadable = await rejection(awsCredentials(aws({ AWS_CREDENTIAL_PROVIDER: async () => ({ get accessKeyId(): string { throw new Error(`getter ${SECRET}`); }, secretAccessKey: SECRET }) })));
      expect(unreadable).to.be.instanceOf(AuthenticationError);
      expect((unreadable as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: the AWS_CREDENTIAL_PROVIDER gave a result that cannot be read');
      expect(shown(unreadable)).to.not.include(SECRET);
    });

    describe('from AWS endpoints (local HTTP servers)', function () {
      let server: http.Server;
      let base: string;
      const requests: { method: string; url: string; headers: http.IncomingHttpHeaders }[] = [];
      let answer: (req: http.IncomingMessage) => [number, string] = () => [404, ''];
      before(async function () {
        server = http.createServer((req, res) => {
          requests.push({ method: req.method!, url: req.url!, headers: req.headers });
          const [status, body] = answer(req);
          res.writeHead(status).end(body);
        });
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      });
      after(function () {
        server.close();
      });
      beforeEach(function () {
        requests.length = 0;
      });
      const creds = (expiration: string) => JSON.stringify({ AccessKeyId: 'tmp-key', SecretAccessKey: SECRET, Token: TOKEN, Expiration: expiration });

      it('AssumeRoleWithWebIdentity with the token file, role ARN and session name, before ECS and EC2', async function () {
        const file = path.join(os.tmpdir(), `aws-token-${process.pid}`);
        fs.writeFileSync(file, 'the-web-token\n');
        answer = () => [200, JSON.stringify({ AssumeRoleWithWebIdentityResponse: { AssumeRoleWithWebIdentityResult: { Credentials: { AccessKeyId: 'web-key', SecretAccessKey: SECRET, SessionToken: TOKEN, Expiration: 4102444800 } } } })];
        setAwsEnvironmentForTests({ sts: base, ecs: base, ec2: base, env: { AWS_WEB_IDENTITY_TOKEN_FILE: file, AWS_ROLE_ARN: 'arn:aws:iam::1:role/r', AWS_ROLE_SESSION_NAME: 's1', AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/ecs' } });
        const got = await awsCredentials(aws());
        fs.rmSync(file);
        expect(got).to.deep.include({ accessKeyId: 'web-key', secretAccessKey: SECRET, sessionToken: TOKEN });
        expect(got.expiration!.toISOString()).to.equal('2100-01-01T00:00:00.000Z');
        expect(requests).to.have.length(1);
        expect(requests[0].method).to.equal('POST');
        const query = new URL(requests[0].url, base).searchParams;
        expect(Object.fromEntries(query)).to.deep.equal({ Action: 'AssumeRoleWithWebIdentity', RoleSessionName: 's1', RoleArn: 'arn:aws:iam::1:role/r', WebIdentityToken: 'the-web-token', Version: '2011-06-15' });
        expect(requests[0].headers.accept).to.equal('application/json');
      });

      it('the ECS endpoint when AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is set', async function () {
        answer = () => [200, creds('2100-01-01T00:00:00Z')];
        setAwsEnvironmentForTests({ ecs: base, ec2: `${base}/ec2`, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/v2/credentials/abc' } });
        expect(await awsCredentials(aws())).to.deep.include({ accessKeyId: 'tmp-key', sessionToken: TOKEN });
        expect(requests.map((r) => `${r.method} ${r.url}`)).to.deep.equal(['GET /v2/credentials/abc']);
      });

      it('EC2 with IMDSv2: a PUT for a token, the role name, its credentials, each with the token', async function () {
        answer = (req) => (req.method === 'PUT' ? [200, 'imds-token'] : req.url!.endsWith('/security-credentials/') ? [200, 'my-role'] : [200, creds('2100-01-01T00:00:00Z')]);
        setAwsEnvironmentForTests({ ec2: base, env: {} });
        expect(await awsCredentials(aws())).to.deep.include({ accessKeyId: 'tmp-key' });
        expect(requests.map((r) => `${r.method} ${r.url}`)).to.deep.equal(['PUT /latest/api/token', 'GET /latest/meta-data/iam/security-credentials/', 'GET /latest/meta-data/iam/security-credentials/my-role']);
        expect(requests[0].headers['x-aws-ec2-metadata-token-ttl-seconds']).to.equal('30');
        // Each request's socket is closed once answered: none is kept alive in a shared agent after the fetch.
        await new Promise((resolve) => setImmediate(resolve));
        expect(await new Promise((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))))).to.equal(0);
        expect(requests.slice(1).map((r) => r.headers['x-aws-ec2-metadata-token'])).to.deep.equal(['imds-token', 'imds-token']);
      });

      it('caches them until five minutes before they expire, even once environment variables appear; a failed authentication clears the cache', async function () {
        let now = Date.UTC(2030, 0, 1, 0, 0, 0);
        answer = () => [200, creds('2030-01-01T00:10:00Z')];
        const vars: Record<string, string> = { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/c' };
        setAwsEnvironmentForTests({ ecs: base, env: vars, now: () => now });
        await awsCredentials(aws());
        vars.AWS_ACCESS_KEY_ID = 'env-key';
        vars.AWS_SECRET_ACCESS_KEY = 'env-secret';
        now += 4 * 60_000 + 59_000; // 5 min 1 s before expiry: still valid
        expect((await awsCredentials(aws())).accessKeyId).to.equal('tmp-key');
        expect(requests).to.have.length(1);
        now += 1000; // exactly 5 min before: no longer valid; the environment now comes first, and is not cached
        expect((await awsCredentials(aws())).accessKeyId).to.equal('env-key');
        delete vars.AWS_ACCESS_KEY_ID;
        delete vars.AWS_SECRET_ACCESS_KEY;
        answer = () => [200, creds('2030-01-01T01:00:00Z')];
        await awsCredentials(aws());
        expect(requests).to.have.length(2);
        await awsCredentials(aws());
        expect(requests).to.have.length(2);
        const refused = await rejection(awsAuthenticate(() => Promise.reject(new Error('connection reset')), aws()));
        expect((refused as Error).message).to.equal('connection reset');
        await awsCredentials(aws());
        expect(requests).to.have.length(3);
      });

      it('stops reading an answer over 64 KiB (a credential answer is a few KiB): an endpoint cannot fill the memory', async function () {
        const big = ' '.repeat(8 << 20);
        answer = () => [200, big];
        setAwsEnvironmentForTests({ ecs: base, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/c' } });
        const error = await rejection(awsCredentials(aws()));
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: the ECS endpoint answered with more than 65536 bytes');
        // Just under the limit, padded JSON is still read.
        answer = () => [200, creds('2100-01-01T00:00:00Z') + ' '.repeat(65536 - creds('2100-01-01T00:00:00Z').length)];
        expect(await awsCredentials(aws())).to.deep.include({ accessKeyId: 'tmp-key' });
      });

      it('ends with the abort\'s reason once the signal aborts, while a provider or an endpoint has not answered', async function () {
        const within = (work: Promise<unknown>): Promise<unknown> => Promise.race([rejection(work), new Promise((resolve) => setTimeout(() => resolve('still waiting after 500 ms'), 500))]);
        let controller = new AbortController();
        const reason = new Error('establishment ended');
        setTimeout(() => controller.abort(reason), 20);
        const never = aws({ AWS_CREDENTIAL_PROVIDER: () => new Promise<AwsCredentials>(() => undefined) });
        expect(await within(awsAuthenticate(fakeServer(goodFirst()).run, never, { signal: controller.signal }))).to.equal(reason);
        answer = () => [200, creds('2100-01-01T00:00:00Z')];
        const silent = http.createServer(() => undefined);
        await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
        try {
          setAwsEnvironmentForTests({ ecs: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/c' } });
          controller = new AbortController();
          setTimeout(() => controller.abort(reason), 20);
          expect(await within(awsAuthenticate(fakeServer(goodFirst()).run, aws(), { signal: controller.signal }))).to.equal(reason);
        } finally {
          silent.closeAllConnections();
          silent.close();
        }
      });

      it('ends each request at its deadline (10 s; 150 ms here): an endpoint silent, or trickling its answer a byte at a time', async function () {
        const within = (work: Promise<unknown>): Promise<unknown> => Promise.race([rejection(work), new Promise((resolve) => setTimeout(() => resolve('still waiting after 1500 ms'), 1500))]);
        const trickled: number[] = [];
        const slow = http.createServer((req, res) => {
          if (req.url === '/silent') return;
          res.writeHead(200);
          // A byte every 40 ms: never 150 ms of silence, and the answer never ends.
          const timer = setInterval(() => res.write(' ', () => trickled.push(Date.now())), 40);
          res.on('close', () => clearInterval(timer));
        });
        await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
        try {
          const at = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
          for (const uri of ['/silent', '/trickle']) {
            setAwsEnvironmentForTests({ ecs: at, timeoutMs: 150, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: uri } });
            const started = Date.now();
            const error = await within(awsCredentials(aws()));
            const took = Date.now() - started;
            expect(error, uri).to.be.instanceOf(AuthenticationError);
            expect((error as Error).message, uri).to.equal('Authentication failed on "$external" with MONGODB-AWS: the ECS endpoint did not answer within 150 ms');
            expect(took, uri).to.be.within(140, 600);
          }
          expect(trickled.length).to.be.greaterThan(1);
          // The socket is closed at the deadline: no byte is sent on it after.
          const sent = trickled.length;
          await new Promise((resolve) => setTimeout(resolve, 120));
          expect(trickled.length).to.equal(sent);
        } finally {
          slow.closeAllConnections();
          slow.close();
        }
        // An answer within the deadline is read; the deadline's timer does not outlive it (the default is 10 s).
        answer = () => [200, creds('2100-01-01T00:00:00Z')];
        setAwsEnvironmentForTests({ ecs: base, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/c' } });
        const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
        expect(await awsCredentials(aws())).to.deep.include({ accessKeyId: 'tmp-key' });
        expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).to.equal(before);
      });

      it('fails naming the source, never a secret, for an HTTP error or no endpoint', async function () {
        answer = () => [500, SECRET];
        setAwsEnvironmentForTests({ ec2: base, env: {} });
        const error = await rejection(awsCredentials(aws()));
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.include('EC2 instance metadata endpoint answered with HTTP status 500');
        expect(shown(error)).to.not.include(SECRET);
      });
    });
  });

  describe('against the endpoint', function () {
    let endpoint: EmbeddedServer;
    before(async function () {
      endpoint = new EmbeddedServer({ aws: { credentials: [{ accessKeyId: KEY_ID, secretAccessKey: SECRET, sessionToken: TOKEN }] } });
      await endpoint.start();
    });
    after(async function () {
      await endpoint.stop();
    });

    it('a pool authenticates, and a wrong secret fails with AuthenticationFailed; no secret in any event, log or error', async function () {
      const messages: string[] = [];
      const sink: LogSink = { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) };
      const run = async (): Promise<{ events: string[]; result: unknown }> => {
        const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: { credentials: aws() }, logging: { componentSeverities: { connection: 'debug' }, path: sink } });
        const events: string[] = [];
        pool.events$.subscribe((e) => events.push(shown(e)));
        pool.ready();
        try {
          return { events, result: await pool.withConnection((c) => c.command('admin', { connectionStatus: 1 })).catch((e: unknown) => e) };
        } finally {
          pool.close();
        }
      };
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET, AWS_SESSION_TOKEN: TOKEN });
      const ok = await run();
      expect(ok.result).to.not.be.instanceOf(Error);
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: `${SECRET}x`, AWS_SESSION_TOKEN: TOKEN });
      const failed = await run();
      expect(failed.result).to.be.instanceOf(Error);
      expect(shown(failed.result)).to.include('Authentication failed.');
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET, AWS_SESSION_TOKEN: `${TOKEN}-other` });
      const otherToken = await run();
      expect(shown(otherToken.result)).to.include('Authentication failed.');
      env({ AWS_ACCESS_KEY_ID: KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET });
      expect(shown((await run()).result)).to.include('Authentication failed.');
      for (const text of [...ok.events, ...failed.events, ...messages, shown(failed.result)]) {
        expect(text).to.not.include(SECRET).and.not.include(TOKEN);
      }
    });

    it('connect() authenticates with authMechanism=MONGODB-AWS and the provider; the endpoint refuses without auth', async function () {
      const logged: string[] = [];
      const provider = async (): Promise<AwsCredentials> => ({ accessKeyId: KEY_ID, secretAccessKey: SECRET, sessionToken: TOKEN });
      const client = connect(`mongodb://${endpoint.address}/?authMechanism=MONGODB-AWS&directConnection=true`, {
        credentials: { mechanismProperties: { AWS_CREDENTIAL_PROVIDER: provider } } as never,
        logging: { componentSeverities: { default: 'debug' }, path: { write: (m) => void logged.push(m.render()) } },
      });
      const events: string[] = [];
      client.events$.subscribe((e) => events.push(shown(e)));
      try {
        const status = await client.command('admin', { connectionStatus: 1 });
        expect(status.authInfo.authenticatedUsers[0].db).to.equal('$external');
      } finally {
        await client.close();
      }
      expect([...events, ...logged].join('\n')).to.not.include(SECRET).and.not.include(TOKEN);
      const plainClient = connect(`mongodb://${endpoint.address}/?directConnection=true`);
      try {
        expect(shown(await rejection(plainClient.command('admin', { ping: 2 }).then(() => plainClient.command('test', { find: 'x' }))))).to.include('requires authentication');
      } finally {
        await plainClient.close();
      }
    });
  });
});

describe('MONGODB-AWS against MONGODB_URI', function () {
  it('authenticates a pool\'s connections with the credentials of the process environment when MONGODB_URI uses MONGODB-AWS', async function () {
    const uri = process.env.MONGODB_URI;
    const parsed = uri === undefined ? undefined : parseConnectionString(uri);
    if (parsed?.connectionOptions.credentials?.mechanism !== 'MONGODB-AWS') {
      console.log('      skipped: MONGODB_URI is unset or does not authenticate with MONGODB-AWS');
      this.skip();
    }
    setAwsEnvironmentForTests();
    const events: string[] = [];
    const pool = new ConnectionPool({ address: parsed!.hosts[0], connectionOptions: parsed!.connectionOptions });
    pool.events$.subscribe((e) => events.push(shown(e)));
    pool.ready();
    try {
      const status = await pool.withConnection((c) => c.command('admin', { connectionStatus: 1 }));
      expect(status.authInfo.authenticatedUsers).to.have.length.greaterThan(0);
      expect(status.authInfo.authenticatedUsers[0].db).to.equal('$external');
    } finally {
      pool.close();
    }
    const secret = process.env.AWS_SECRET_ACCESS_KEY;
    if (secret !== undefined && secret !== '') expect(events.join('\n')).to.not.include(secret);
  });
});
