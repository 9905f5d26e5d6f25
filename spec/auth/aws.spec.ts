/**
 * MONGODB-AWS: the conversation and its bytes, the checks of the server's answer, the region, the SigV4 signer against
 * AWS's published examples, each credential source in the spec's order (local HTTP servers in place of STS, ECS and
 * EC2) with the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity) where the AWS SDK puts it,
 * each request's deadline, the cache and its expiry (an injected clock), and pools and connect() against the embedded
 * endpoint (which verifies the signature in place of STS). No test may find the secret access key, the session token
 * or the container Authorization token in an error, event, log message or inspection.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { Binary, deserialize, serialize, type Document } from 'bson';
import { AuthenticationError, ConnectionPool, InvalidOptionError, MongoCredentials, MongoServerError, connect, type LogSink } from '../../lib';
import { speculativeStart } from '../../lib/auth/authenticate';
import { awsAuthenticate, awsCredentials, awsRegion, awsSignedRequest, clearAwsCredentialCache, containerEndpoint, setAwsEnvironmentForTests, sigV4Authorization, type AwsCredentials } from '../../lib/auth/aws';
import { parseConnectionString, parseConnectionStringWithCredentials } from '../../lib/connection-string';
import { EmbeddedServer } from '../../lib/testing';
import { eventually } from '../support/endpoint';

const SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY';
const TOKEN = 'session-token-not-to-show';
const KEY_ID = 'AKIAICGVLKOKZVY3X3DA';
/** The container endpoint's Authorization token (EKS Pod Identity's service account token): a secret too. */
const POD_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.pod-identity-token-not-to-show';
/** Long-term keys of a shared credentials file's profile, which only the AWS SDK reads. */
const FILE_KEY_ID = 'AKIAIOSFODNN7PROFILE';
const FILE_SECRET = 'profile/secret+key-not-to-show';

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
/**
 * connectionStatus through a fresh pool on `address` with MONGODB-AWS credentials, its connection log at debug rendered
 * into `messages`: the pool's events (shown as text) and the command's result or error.
 */
async function runPoolOn(address: string, messages: string[]): Promise<{ events: string[]; result: unknown }> {
  const sink: LogSink = { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) };
  const pool = new ConnectionPool({ address, connectionOptions: { credentials: aws() }, logging: { componentSeverities: { connection: 'debug' }, path: sink } });
  const events: string[] = [];
  pool.events$.subscribe((e) => events.push(shown(e)));
  pool.ready();
  try {
    return { events, result: await pool.withConnection((c) => c.command('admin', { connectionStatus: 1 })).catch((e: unknown) => e) };
  } finally {
    pool.close();
  }
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

    it('refuses AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY alone, naming the pair, before any endpoint is asked', async function () {
      for (const vars of [{ AWS_ACCESS_KEY_ID: 'env-key' }, { AWS_SECRET_ACCESS_KEY: SECRET }]) {
        setAwsEnvironmentForTests({ ec2: 'http://127.0.0.1:1', env: vars });
        const error = await rejection(awsCredentials(aws()));
        expect(error, Object.keys(vars)[0]).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together');
        expect(shown(error)).to.not.include(SECRET);
      }
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

      it('reads each answer as the endpoints write it, and refuses what they would not: odd statuses, shapes and fields', async function () {
        const failing = async (status: number, body: string, vars: Record<string, string> = { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: 'v2/c' }): Promise<string> => {
          answer = () => [status, body];
          setAwsEnvironmentForTests({ ecs: base, ec2: base, env: vars });
          const error = await rejection(awsCredentials(aws()));
          expect(error, body).to.be.instanceOf(AuthenticationError);
          expect(shown(error), body).to.not.include(SECRET);
          return (error as Error).message.replace('Authentication failed on "$external" with MONGODB-AWS: ', '');
        };
        // A relative URI without its leading slash is still a path of the ECS address.
        answer = () => [200, creds('2100-01-01T00:00:00Z')];
        setAwsEnvironmentForTests({ ecs: base, ec2: base, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: 'v2/c' } });
        await awsCredentials(aws());
        expect(requests.map((r) => r.url)).to.deep.equal(['/v2/c']);
        expect(await failing(300, creds('2100-01-01T00:00:00Z'))).to.equal('the ECS endpoint answered with HTTP status 300');
        expect(await failing(200, 'null')).to.equal('the ECS endpoint answered with something that is not a JSON object');
        expect(await failing(200, '"text"')).to.equal('the ECS endpoint answered with something that is not a JSON object');
        expect(await failing(200, JSON.stringify({ AccessKeyId: 'k', SecretAccessKey: SECRET, Token: 7 }))).to.equal('the ECS endpoint gave a session token that is not a string');
        expect(await failing(200, JSON.stringify({ AccessKeyId: '', SecretAccessKey: SECRET }))).to.equal('the ECS endpoint gave no access key ID and secret access key');
        // A null or empty session token is no session token.
        for (const Token of [null, '']) {
          answer = () => [200, JSON.stringify({ AccessKeyId: 'k', SecretAccessKey: SECRET, Token })];
          setAwsEnvironmentForTests({ ecs: base, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/c' } });
          expect(await awsCredentials(aws()), String(Token)).to.not.have.property('sessionToken');
        }
        // EC2: the role name as IMDS writes it (a line), and none at all.
        answer = (req) => (req.method === 'PUT' ? [200, 'imds-token'] : req.url!.endsWith('/security-credentials/') ? [200, 'my-role\n'] : [200, creds('2100-01-01T00:00:00Z')]);
        requests.length = 0;
        setAwsEnvironmentForTests({ ec2: base, env: {} });
        await awsCredentials(aws());
        expect(requests.at(-1)!.url).to.equal('/latest/meta-data/iam/security-credentials/my-role');
        answer = (req) => (req.method === 'PUT' ? [200, 'imds-token'] : [200, ' \n']);
        setAwsEnvironmentForTests({ ec2: base, env: {} });
        expect(((await rejection(awsCredentials(aws()))) as Error).message).to.include('the EC2 instance metadata endpoint gave no role name');
        // STS gives its Expiration in seconds since the epoch; a date or milliseconds are read as they are.
        const file = path.join(os.tmpdir(), `aws-token-exp-${process.pid}`);
        fs.writeFileSync(file, 'the-web-token');
        for (const [Expiration, iso] of [[4102444800, '2100-01-01T00:00:00.000Z'], [4102444800000, '2100-01-01T00:00:00.000Z'], ['2100-01-01T00:00:00Z', '2100-01-01T00:00:00.000Z']] as const) {
          answer = () => [200, JSON.stringify({ Credentials: { AccessKeyId: 'web-key', SecretAccessKey: SECRET, SessionToken: TOKEN, Expiration } })];
          setAwsEnvironmentForTests({ sts: base, env: { AWS_WEB_IDENTITY_TOKEN_FILE: file, AWS_ROLE_ARN: 'arn:aws:iam::1:role/r' } });
          expect((await awsCredentials(aws())).expiration!.toISOString(), String(Expiration)).to.equal(iso);
        }
        fs.rmSync(file);
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
        // Without the abort, neither ever ends: 2.5 s leaves a loaded machine's pauses room.
        const within = (work: Promise<unknown>): Promise<unknown> => Promise.race([rejection(work), new Promise((resolve) => setTimeout(() => resolve('still waiting after 2500 ms'), 2500).unref())]);
        let controller = new AbortController();
        const reason = new Error('establishment ended');
        // Aborted once the provider was called, while its answer is awaited.
        const never = aws({ AWS_CREDENTIAL_PROVIDER: () => {
          setImmediate(() => controller.abort(reason));
          return new Promise<AwsCredentials>(() => undefined);
        } });
        expect(await within(awsAuthenticate(fakeServer(goodFirst()).run, never, { signal: controller.signal }))).to.equal(reason);
        answer = () => [200, creds('2100-01-01T00:00:00Z')];
        // Aborted once the endpoint has the request, which it never answers.
        const silent = http.createServer(() => controller.abort(reason));
        await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
        try {
          setAwsEnvironmentForTests({ ecs: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/c' } });
          controller = new AbortController();
          expect(await within(awsAuthenticate(fakeServer(goodFirst()).run, aws(), { signal: controller.signal }))).to.equal(reason);
        } finally {
          silent.closeAllConnections();
          silent.close();
        }
      });

      it('ends each request at its deadline (10 s; 150 ms here): an endpoint silent, or trickling its answer a byte at a time', async function () {
        const guards: NodeJS.Timeout[] = [];
        const within = (work: Promise<unknown>): Promise<unknown> =>
          Promise.race([rejection(work), new Promise((resolve) => guards.push(setTimeout(() => resolve('still waiting after 1500 ms'), 1500)))]);
        const trickled: number[] = [];
        /** The requests whose socket the endpoint saw closed, by URL. */
        const closed: string[] = [];
        const slow = http.createServer((req, res) => {
          res.on('close', () => closed.push(req.url ?? ''));
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
            // Without the deadline, the silent endpoint and the trickle never end (the race ends them at 1.5 s).
            expect(took, uri).to.be.within(140, 1400);
          }
          expect(trickled.length).to.be.greaterThan(1);
          // The socket is closed at the deadline: the endpoint sees it closed (which ends its trickle), and no byte is
          // sent on it after.
          const sent = trickled.length;
          expect(await eventually(() => closed.includes('/trickle')), 'the trickle\'s socket closed').to.equal(true);
          expect(closed).to.have.members(['/silent', '/trickle']);
          expect(trickled.length).to.equal(sent);
        } finally {
          guards.forEach(clearTimeout);
          slow.closeAllConnections();
          slow.close();
        }
        // An answer within the deadline is read; the deadline's timer does not outlive it (the default is 10 s). The
        // request's own timers are followed, not the process's count, which other tests' timers change meanwhile.
        answer = () => [200, creds('2100-01-01T00:00:00Z')];
        setAwsEnvironmentForTests({ ecs: base, env: { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/c' } });
        const armed = new Set<unknown>();
        let deadlines = 0;
        const realSet = globalThis.setTimeout;
        const realClear = globalThis.clearTimeout;
        globalThis.setTimeout = ((fn: () => void, ms?: number, ...rest: unknown[]) => {
          const timer = Reflect.apply(realSet, globalThis, [fn, ms, ...rest]) as NodeJS.Timeout;
          if (ms === 10_000) {
            deadlines += 1;
            armed.add(timer);
          }
          return timer;
        }) as typeof setTimeout;
        globalThis.clearTimeout = ((timer: NodeJS.Timeout | undefined) => {
          armed.delete(timer);
          realClear(timer);
        }) as typeof clearTimeout;
        let credentials: unknown;
        try {
          credentials = await awsCredentials(aws());
        } finally {
          globalThis.setTimeout = realSet;
          globalThis.clearTimeout = realClear;
        }
        expect(credentials).to.deep.include({ accessKeyId: 'tmp-key' });
        expect([deadlines, armed.size]).to.deep.equal([1, 0]);
      });

      describe('the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity; extension, as the AWS SDK)', function () {
        const tokenFile = path.join(os.tmpdir(), `aws-pod-token-${process.pid}`);
        /** Each http.request and https.request call (its URL and headers), passed on to Node's unless `redirect` sends it elsewhere. */
        let calls: { url: string; headers: Record<string, unknown> }[] = [];
        let redirect: string | undefined;
        // Node's own module objects (the namespace imports are read-only views of them).
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const nodeHttp = require('node:http') as { request: typeof http.request };
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const nodeHttps = require('node:https') as { request: typeof https.request };
        const realHttp = nodeHttp.request;
        const realHttps = nodeHttps.request;
        beforeEach(function () {
          calls = [];
          redirect = undefined;
          const spy = (real: typeof http.request) => ((url: URL, options: http.RequestOptions, callback: (res: http.IncomingMessage) => void) => {
            calls.push({ url: url.href, headers: { ...(options.headers as Record<string, unknown>) } });
            return real(redirect === undefined ? url : new URL(`${url.pathname}${url.search}`, redirect), options, callback);
          }) as typeof http.request;
          nodeHttp.request = spy(realHttp);
          nodeHttps.request = spy(realHttps as typeof http.request) as typeof https.request;
        });
        afterEach(function () {
          nodeHttp.request = realHttp;
          nodeHttps.request = realHttps;
          fs.rmSync(tokenFile, { force: true });
        });

        it('fetches from an EKS Pod Identity address with the token file\'s Authorization (read at each fetch), and caches the credentials', async function () {
          answer = (req) => (req.headers.authorization === POD_TOKEN || req.headers.authorization === `${POD_TOKEN}-2` ? [200, creds('2100-01-01T00:00:00Z')] : [403, '']);
          fs.writeFileSync(tokenFile, `${POD_TOKEN}\n`);
          redirect = base;
          setAwsEnvironmentForTests({ ec2: `${base}/ec2`, env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://169.254.170.23/v1/credentials', AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile } });
          expect(await awsCredentials(aws())).to.deep.include({ accessKeyId: 'tmp-key', secretAccessKey: SECRET, sessionToken: TOKEN });
          expect(calls).to.deep.equal([{ url: 'http://169.254.170.23/v1/credentials', headers: { Authorization: POD_TOKEN, 'Content-Length': '0' } }]);
          expect(requests.map((r) => `${r.method} ${r.url} ${r.headers.authorization}`)).to.deep.equal([`GET /v1/credentials ${POD_TOKEN}`]);
          await awsCredentials(aws());
          expect(requests).to.have.length(1);
          // EKS rotates the token: the file is read again at the next fetch.
          fs.writeFileSync(tokenFile, `${POD_TOKEN}-2`);
          clearAwsCredentialCache();
          await awsCredentials(aws());
          expect(requests.map((r) => r.headers.authorization)).to.deep.equal([POD_TOKEN, `${POD_TOKEN}-2`]);
          // Its socket is closed once answered, as the other endpoints'.
          await new Promise((resolve) => setImmediate(resolve));
          expect(await new Promise((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))))).to.equal(0);
        });

        it('sends AWS_CONTAINER_AUTHORIZATION_TOKEN when no token file is named, the file\'s token when both are, and no Authorization with neither', async function () {
          answer = () => [200, creds('2100-01-01T00:00:00Z')];
          const full = `${base}/full`;
          fs.writeFileSync(tokenFile, `  ${POD_TOKEN}-file \r\n`);
          const cases: [Record<string, string>, string | undefined][] = [
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN }, POD_TOKEN],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile }, `${POD_TOKEN}-file`],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile }, `${POD_TOKEN}-file`],
            [{}, undefined],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: '' }, undefined],
          ];
          for (const [vars, sent] of cases) {
            requests.length = 0;
            setAwsEnvironmentForTests({ env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: full, ...vars } });
            expect(await awsCredentials(aws()), JSON.stringify(vars)).to.deep.include({ accessKeyId: 'tmp-key' });
            expect(requests.map((r) => [r.method, r.url, r.headers.authorization]), JSON.stringify(vars)).to.deep.equal([['GET', '/full', sent]]);
          }
        });

        it('comes after the environment, AssumeRoleWithWebIdentity and AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (which also sends the token), and before EC2', async function () {
          answer = (req) => (req.url === '/sts/?' ? [500, ''] : req.method === 'POST' ? [200, JSON.stringify({ Credentials: { AccessKeyId: 'web-key', SecretAccessKey: SECRET } })] : [200, JSON.stringify({ AccessKeyId: `key${req.url}`, SecretAccessKey: SECRET })]);
          const web = path.join(os.tmpdir(), `aws-web-token-${process.pid}`);
          fs.writeFileSync(web, 'the-web-token');
          try {
            const full = { AWS_CONTAINER_CREDENTIALS_FULL_URI: `${base}/full`, AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN };
            const cases: [Record<string, string>, string, string][] = [
              [{ ...full, AWS_ACCESS_KEY_ID: 'env-key', AWS_SECRET_ACCESS_KEY: 'env-secret' }, 'env-key', ''],
              [{ ...full, AWS_WEB_IDENTITY_TOKEN_FILE: web, AWS_ROLE_ARN: 'arn:aws:iam::1:role/r' }, 'web-key', 'POST'],
              [{ ...full, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/relative' }, 'key/relative', `GET /relative ${POD_TOKEN}`],
              [full, 'key/full', `GET /full ${POD_TOKEN}`],
              [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN }, 'EC2', `PUT /ec2/latest/api/token ${undefined}`],
            ];
            for (const [vars, key, first] of cases) {
              requests.length = 0;
              setAwsEnvironmentForTests({ sts: base, ecs: base, ec2: `${base}/ec2`, env: vars });
              const got = await awsCredentials(aws()).catch((e: unknown) => e);
              // EC2 is reached with neither URI (its answers here are no IMDSv2 conversation, which does not matter), and
              // is not sent the container token.
              if (key !== 'EC2') expect((got as AwsCredentials).accessKeyId, JSON.stringify(vars)).to.equal(key);
              expect(requests.map((r) => (r.method === 'POST' ? 'POST' : `${r.method} ${r.url} ${r.headers.authorization}`))[0] ?? '', JSON.stringify(vars)).to.equal(first);
              if (key !== 'EC2') expect(requests.length, JSON.stringify(vars)).to.be.at.most(1);
            }
          } finally {
            fs.rmSync(web);
          }
        });

        it('allows https, and http to loopback, ECS and EKS Pod Identity addresses only', async function () {
          const allowed = [
            'https://example.com/creds', 'https://169.254.169.254/x', 'http://169.254.170.2/v2/credentials/x', 'http://169.254.170.23/v1/credentials',
            'http://[fd00:ec2::23]/v1/credentials', 'http://[fd00:0ec2:0:0:0:0:0:23]/v1/credentials', 'http://127.0.0.1:8080/', 'http://127.255.3.4/', 'http://127.1/', 'http://127.10.200.30/',
            'http://[::1]:1338/', 'http://[0:0:0:0:0:0:0:1]/', 'http://localhost:1338/2016-11-01/credentialprovider/', 'http://LOCALHOST/',
          ];
          for (const url of allowed) expect(() => containerEndpoint(url), url).to.not.throw();
          const refused = [
            'http://example.com/creds', 'http://169.254.169.254/latest/meta-data/iam/security-credentials/r', 'http://169.254.170.3/', 'http://169.254.170.22/',
            'http://10.0.0.1/', 'http://0.0.0.0/', 'http://128.0.0.1/', 'http://[::ffff:127.0.0.1]/', 'http://[fd00:ec2::24]/', 'http://[::2]/',
            'http://127.0.0.1.example.com/', 'http://localhost.example.com/', 'ftp://127.0.0.1/', 'file:///etc/passwd', 'ws://127.0.0.1/', 'not a url', '/v1/credentials',
            `http://example.com/?token=${POD_TOKEN}`,
          ];
          fs.writeFileSync(tokenFile, POD_TOKEN);
          for (const url of refused) {
            setAwsEnvironmentForTests({ ec2: base, env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: url, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile } });
            const error = await rejection(awsCredentials(aws()));
            expect(error, url).to.be.instanceOf(AuthenticationError);
            const why = url === 'not a url' || url === '/v1/credentials' ? 'is not a URL' : 'is not allowed';
            expect((error as Error).message, url).to.equal(
              `Authentication failed on "$external" with MONGODB-AWS: AWS_CONTAINER_CREDENTIALS_FULL_URI ${why}: it must be an https URL, or an http URL to a loopback address (127.0.0.0/8, ::1, localhost), 169.254.170.2 (ECS) or 169.254.170.23 or fd00:ec2::23 (EKS Pod Identity)`,
            );
            expect(shown(error), url).to.not.include(POD_TOKEN).and.not.include('example');
          }
          // The URL is judged first: a token file that cannot be read does not hide a refused URL.
          setAwsEnvironmentForTests({ env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://example.com/', AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: `${tokenFile}-missing` } });
          expect(((await rejection(awsCredentials(aws()))) as Error).message).to.include('AWS_CONTAINER_CREDENTIALS_FULL_URI is not allowed');
          // Refused before any request: to it, or to EC2 in its place.
          expect(calls).to.deep.equal([]);
          expect(requests).to.deep.equal([]);
          // Allowed ones are requested: http to 127.0.0.1 here (the other tests), https to a local port (its TLS handshake then fails).
          let connections = 0;
          const tcp = net.createServer((socket) => {
            connections += 1;
            socket.destroy();
          });
          await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
          try {
            setAwsEnvironmentForTests({ env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: `https://127.0.0.1:${(tcp.address() as net.AddressInfo).port}/creds` } });
            const error = await rejection(awsCredentials(aws()));
            expect((error as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI could not be reached');
            // The system error's code says why (the connection reset during the TLS handshake), its message not shown.
            expect(((error as Error).cause as Error).message).to.equal('Error ECONNRESET (message not shown)');
            expect(connections).to.equal(1);
            expect(calls.map((c) => c.url)).to.deep.equal([`https://127.0.0.1:${(tcp.address() as net.AddressInfo).port}/creds`]);
          } finally {
            tcp.close();
          }
        });

        it('refuses a token holding CR, LF or another character a header cannot carry, an empty or unreadable token file, before any request', async function () {
          const cases: [Record<string, string>, string | undefined, string][] = [
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: `${POD_TOKEN}\r\nX-Injected: 1` }, undefined, 'the token of AWS_CONTAINER_AUTHORIZATION_TOKEN holds a line break or another character an HTTP header cannot carry'],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: `${POD_TOKEN}\nX` }, undefined, 'the token of AWS_CONTAINER_AUTHORIZATION_TOKEN holds a line break or another character an HTTP header cannot carry'],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: `${POD_TOKEN}\rX` }, undefined, 'the token of AWS_CONTAINER_AUTHORIZATION_TOKEN holds a line break or another character an HTTP header cannot carry'],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: `${POD_TOKEN}\u0000` }, undefined, 'the token of AWS_CONTAINER_AUTHORIZATION_TOKEN holds a line break or another character an HTTP header cannot carry'],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN: `${POD_TOKEN}\u2028` }, undefined, 'the token of AWS_CONTAINER_AUTHORIZATION_TOKEN holds a line break or another character an HTTP header cannot carry'],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile }, `${POD_TOKEN}\r\nX-Injected: 1\n`, 'the token of the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names holds a line break or another character an HTTP header cannot carry'],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile, AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN }, ' \n', 'the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names is empty'],
            [{ AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: `${tokenFile}-missing`, AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN }, undefined, 'the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names cannot be read'],
          ];
          for (const [vars, file, why] of cases) {
            if (file !== undefined) fs.writeFileSync(tokenFile, file);
            for (const uri of [{ AWS_CONTAINER_CREDENTIALS_FULL_URI: `${base}/full` }, { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/relative' }]) {
              setAwsEnvironmentForTests({ ecs: base, ec2: base, env: { ...uri, ...vars } });
              const error = await rejection(awsCredentials(aws()));
              expect(error, why).to.be.instanceOf(AuthenticationError);
              expect((error as Error).message, why).to.equal(`Authentication failed on "$external" with MONGODB-AWS: ${why}`);
              expect(shown(error), why).to.not.include(POD_TOKEN);
            }
          }
          expect(calls).to.deep.equal([]);
          expect(requests).to.deep.equal([]);
        });

        it('refuses a token file that is a FIFO, a device or over 64 KiB at once, unread: a FIFO no one writes to held the authentication (and a libuv thread) past every deadline', async function () {
          if (process.platform === 'win32') this.skip();
          const fifo = `${tokenFile}-fifo`;
          fs.rmSync(fifo, { force: true });
          // eslint-disable-next-line @typescript-eslint/no-require-imports
          (require('node:child_process') as typeof import('node:child_process')).execFileSync('mkfifo', [fifo]);
          fs.writeFileSync(tokenFile, 'x'.repeat(65_537));
          const cases: [Record<string, string>, string][] = [
            [{ AWS_CONTAINER_CREDENTIALS_FULL_URI: `${base}/full`, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: fifo }, 'the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names is not a regular file'],
            [{ AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '/relative', AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: '/dev/zero' }, 'the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names is not a regular file'],
            [{ AWS_CONTAINER_CREDENTIALS_FULL_URI: `${base}/full`, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile }, 'the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names holds more than 65536 bytes'],
            [{ AWS_WEB_IDENTITY_TOKEN_FILE: fifo, AWS_ROLE_ARN: 'arn:aws:iam::1:role/r' }, 'the file AWS_WEB_IDENTITY_TOKEN_FILE names is not a regular file'],
            [{ AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ROLE_ARN: 'arn:aws:iam::1:role/r' }, 'the file AWS_WEB_IDENTITY_TOKEN_FILE names holds more than 65536 bytes'],
          ];
          try {
            for (const [vars, why] of cases) {
              setAwsEnvironmentForTests({ sts: base, ecs: base, ec2: base, env: vars });
              const started = Date.now();
              // Opened as a FIFO waits, it would never end (the race ends it at 2.5 s); 1.5 s leaves a loaded machine's
              // pauses room.
              const error = await Promise.race([rejection(awsCredentials(aws())), new Promise((resolve) => setTimeout(() => resolve('still waiting after 2500 ms'), 2500).unref())]);
              expect(error, why).to.be.instanceOf(AuthenticationError);
              expect((error as Error).message, why).to.equal(`Authentication failed on "$external" with MONGODB-AWS: ${why}`);
              expect(Date.now() - started, why).to.be.below(1500);
            }
            expect(calls).to.deep.equal([]);
            expect(requests).to.deep.equal([]);
          } finally {
            // A reader still blocked opening the FIFO: a writer that opens and closes it lets the reader go.
            try {
              fs.closeSync(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
            } catch {
              // no reader left
            }
            fs.rmSync(fifo, { force: true });
          }
        });

        it('shows the Authorization token in no error: an endpoint that echoes it with 401, answers no JSON, or cannot be reached', async function () {
          answer = (req) => (req.url === '/401' ? [401, `bad token ${req.headers.authorization}`] : [200, `not json ${req.headers.authorization}`]);
          const refused = net.createServer();
          await new Promise<void>((resolve) => refused.listen(0, '127.0.0.1', resolve));
          const closed = `http://127.0.0.1:${(refused.address() as net.AddressInfo).port}/x`;
          await new Promise((resolve) => refused.close(resolve));
          const cases: [string, string][] = [
            [`${base}/401`, 'the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI answered with HTTP status 401'],
            [`${base}/200`, 'the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI answered with something that is not JSON'],
            [closed, 'the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI could not be reached'],
          ];
          for (const [url, why] of cases) {
            setAwsEnvironmentForTests({ env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: url, AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN } });
            const error = await rejection(awsAuthenticate(fakeServer(goodFirst()).run, aws()));
            expect((error as Error).message, url).to.equal(`Authentication failed on "$external" with MONGODB-AWS: ${why}`);
            expect(shown(error), url).to.not.include(POD_TOKEN);
          }
          expect(requests.map((r) => r.headers.authorization)).to.deep.equal([POD_TOKEN, POD_TOKEN]);
          // Nor in the credentials obtained.
          answer = () => [200, creds('2100-01-01T00:00:00Z')];
          setAwsEnvironmentForTests({ env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: base, AWS_CONTAINER_AUTHORIZATION_TOKEN: POD_TOKEN } });
          expect(shown(await awsCredentials(aws()))).to.not.include(POD_TOKEN);
        });
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

    const runPool = (messages: string[]): Promise<{ events: string[]; result: unknown }> => runPoolOn(endpoint.address, messages);

    it('a pool authenticates, and a wrong secret fails with AuthenticationFailed; no secret in any event, log or error', async function () {
      const messages: string[] = [];
      const run = (): Promise<{ events: string[]; result: unknown }> => runPool(messages);
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

    it('a pool authenticates with the credentials of AWS_CONTAINER_CREDENTIALS_FULL_URI; the Authorization token in no event, log or error', async function () {
      const seen: (string | undefined)[] = [];
      const agent = http.createServer((req, res) => {
        seen.push(req.headers.authorization);
        if (req.headers.authorization !== POD_TOKEN) return void res.writeHead(401).end(`refused ${req.headers.authorization}`);
        res.writeHead(200).end(JSON.stringify({ AccessKeyId: KEY_ID, SecretAccessKey: SECRET, Token: TOKEN, Expiration: '2100-01-01T00:00:00Z' }));
      });
      await new Promise<void>((resolve) => agent.listen(0, '127.0.0.1', resolve));
      const full = `http://127.0.0.1:${(agent.address() as net.AddressInfo).port}/v1/credentials`;
      const messages: string[] = [];
      const run = (token: string): Promise<{ events: string[]; result: unknown }> => {
        setAwsEnvironmentForTests({ env: { AWS_CONTAINER_CREDENTIALS_FULL_URI: full, AWS_CONTAINER_AUTHORIZATION_TOKEN: token } });
        return runPool(messages);
      };
      try {
        const ok = await run(POD_TOKEN);
        expect(ok.result).to.not.be.instanceOf(Error);
        expect((ok.result as Document).authInfo.authenticatedUsers[0].db).to.equal('$external');
        const failed = await run(`${POD_TOKEN}-wrong`);
        expect(shown(failed.result)).to.include('the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI answered with HTTP status 401');
        expect(seen).to.deep.equal([POD_TOKEN, `${POD_TOKEN}-wrong`]);
        for (const text of [...ok.events, ...failed.events, ...messages, shown(failed.result)]) {
          expect(text).to.not.include(POD_TOKEN).and.not.include(SECRET).and.not.include(TOKEN);
        }
      } finally {
        agent.close();
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

/**
 * Runs `body` with the process's AWS_* variables replaced by `vars`, the shared files pointed at `dir`'s (missing ones
 * unless `vars` names others) and EC2's metadata service off: the AWS SDK reads the process's own environment.
 */
async function withProcessEnv<T>(dir: string, vars: Record<string, string>, body: () => Promise<T>): Promise<T> {
  const saved = Object.entries(process.env).filter(([name]) => name.startsWith('AWS_'));
  for (const [name] of saved) delete process.env[name];
  Object.assign(process.env, { AWS_CONFIG_FILE: path.join(dir, 'no-config'), AWS_SHARED_CREDENTIALS_FILE: path.join(dir, 'no-credentials'), AWS_EC2_METADATA_DISABLED: 'true', ...vars });
  try {
    return await body();
  } finally {
    for (const name of Object.keys(process.env)) if (name.startsWith('AWS_')) delete process.env[name];
    Object.assign(process.env, Object.fromEntries(saved));
  }
}

describe('MONGODB-AWS through the AWS SDK when it is installed (auth spec, "Obtaining Credentials")', function () {
  let dir: string;
  let endpoint: EmbeddedServer;
  before(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-aws-sdk-'));
    endpoint = new EmbeddedServer({ aws: { credentials: [{ accessKeyId: KEY_ID, secretAccessKey: SECRET, sessionToken: TOKEN }, { accessKeyId: FILE_KEY_ID, secretAccessKey: FILE_SECRET }] } });
    await endpoint.start();
  });
  after(async function () {
    await endpoint.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(function () {
    setAwsEnvironmentForTests();
  });

  /** A file of `dir` named `name` holding `text`; its path. */
  const file = (name: string, text: string): string => {
    const at = path.join(dir, name);
    fs.writeFileSync(at, text);
    return at;
  };
  /**
   * A config file whose profile `profile` runs a credential_process printing `output` (and counting its runs in
   * `<name>.runs`, after `delayMs`); its path and the count.
   */
  const processProfile = (name: string, output: string, delayMs = 0): { config: string; runs: () => number; answers: () => number } => {
    const runs = path.join(dir, `${name}.runs`);
    const answers = path.join(dir, `${name}.answers`);
    const script = file(`${name}.js`, `require('fs').appendFileSync(${JSON.stringify(runs)}, 'x'); setTimeout(() => process.stdout.write(${JSON.stringify(output)}, () => require('fs').appendFileSync(${JSON.stringify(answers)}, 'x')), ${delayMs});`);
    const config = file(`${name}.config`, `[profile ${name}]\ncredential_process = "${process.execPath}" "${script}"\n`);
    const count = (at: string) => (): number => (fs.existsSync(at) ? fs.readFileSync(at, 'utf8').length : 0);
    return { config, runs: count(runs), answers: count(answers) };
  };
  const processOutput = JSON.stringify({ Version: 1, AccessKeyId: KEY_ID, SecretAccessKey: SECRET, SessionToken: TOKEN, Expiration: '2100-01-01T00:00:00Z' });

  /** connectionStatus through a fresh pool: the command's result or error, and the pool's events and debug log as text. */
  const runPool = async (): Promise<{ result: unknown; seen: string[] }> => {
    const messages: string[] = [];
    const { events, result } = await runPoolOn(endpoint.address, messages);
    return { result, seen: [...events, ...messages] };
  };

  it('a pool authenticates with a profile of the shared credentials file (AWS_PROFILE), which without the SDK fails at EC2 saying the SDK is needed', async function () {
    const credentialsFile = file('credentials', `[default]\naws_access_key_id = AKIAWRONGDEFAULT\naws_secret_access_key = wrong\n\n[mongo]\naws_access_key_id = ${FILE_KEY_ID}\naws_secret_access_key = ${FILE_SECRET}\n`);
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const ec2 = `http://127.0.0.1:${(closed.address() as net.AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    await withProcessEnv(dir, { AWS_SHARED_CREDENTIALS_FILE: credentialsFile, AWS_PROFILE: 'mongo' }, async () => {
      const ok = await runPool();
      expect(ok.result, shown(ok.result)).to.not.be.instanceOf(Error);
      expect((ok.result as Document).authInfo.authenticatedUsers[0]).to.deep.equal({ user: `arn:aws:iam::000000000000:user/${FILE_KEY_ID}`, db: '$external' });
      // The same process without the SDK: the spec's own sources, none of which reads the file.
      setAwsEnvironmentForTests({ sdk: () => "Cannot find module '@aws-sdk/credential-providers'", ec2 });
      const without = await runPool();
      expect(without.result).to.be.instanceOf(Error);
      expect(shown(without.result)).to.include(
        "the EC2 instance metadata endpoint could not be reached; shared credentials and config files (AWS_PROFILE), IAM Identity Center (SSO) and credential_process are read only through the optional package @aws-sdk/credential-providers (npm install @aws-sdk/credential-providers), which could not be loaded: Cannot find module '@aws-sdk/credential-providers'",
      );
      for (const text of [...ok.seen, ...without.seen, shown(without.result)]) expect(text).to.not.include(FILE_SECRET);
    });
  });

  it('one chain per process: concurrent authentications run a credential_process once; a failed authentication starts a new chain', async function () {
    this.timeout(20_000);
    const { config, runs } = processProfile('once', processOutput);
    await withProcessEnv(dir, { AWS_CONFIG_FILE: config, AWS_PROFILE: 'once' }, async () => {
      const all = await Promise.all(Array.from({ length: 10 }, () => awsCredentials(aws())));
      expect(all.map((c) => [c.accessKeyId, c.sessionToken])).to.deep.equal(Array.from({ length: 10 }, () => [KEY_ID, TOKEN]));
      expect(all[0]!.expiration?.toISOString()).to.equal('2100-01-01T00:00:00.000Z');
      const ok = await runPool();
      expect((ok.result as Document).authInfo.authenticatedUsers[0].db, shown(ok.result)).to.equal('$external');
      expect(runs()).to.equal(1);
      const refused = fakeServer(goodFirst());
      const refusing = async (db: string, command: Document): Promise<Document> => ('saslContinue' in command ? { ok: 0, code: 18, errmsg: 'Authentication failed.' } : refused.run(db, command));
      expect(await rejection(awsAuthenticate(refusing, aws()))).to.be.instanceOf(AuthenticationError);
      await awsCredentials(aws());
      expect(runs()).to.equal(2);
      for (const text of ok.seen) expect(text).to.not.include(SECRET).and.not.include(TOKEN);
    });
  });

  it('the AWS_CREDENTIAL_PROVIDER comes before the SDK', async function () {
    const { config, runs } = processProfile('second', processOutput);
    await withProcessEnv(dir, { AWS_CONFIG_FILE: config, AWS_PROFILE: 'second' }, async () => {
      const given = await awsCredentials(aws({ AWS_CREDENTIAL_PROVIDER: async () => ({ accessKeyId: FILE_KEY_ID, secretAccessKey: FILE_SECRET }) }));
      expect(given.accessKeyId).to.equal(FILE_KEY_ID);
      expect(runs()).to.equal(0);
    });
  });

  it('the SDK finding nothing, or given output quoting the secret, fails naming the SDK with its error\'s name only', async function () {
    this.timeout(20_000);
    await withProcessEnv(dir, { AWS_PROFILE: 'nowhere' }, async () => {
      const error = await rejection(awsCredentials(aws()));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: the AWS SDK\'s default credential provider chain (@aws-sdk/credential-providers) failed');
      expect(((error as Error).cause as Error).message).to.equal('CredentialsProviderError (message not shown)');
    });
    const { config } = processProfile('broken', `{"Version": 1, "AccessKeyId": "${KEY_ID}", "SecretAccessKey": "${SECRET}", "SessionToken": "${TOKEN}"`);
    await withProcessEnv(dir, { AWS_CONFIG_FILE: config, AWS_PROFILE: 'broken' }, async () => {
      const error = await rejection(awsCredentials(aws()));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(shown(error)).to.not.include(SECRET).and.not.include(TOKEN);
    });
  });

  it('an SDK whose chain cannot be made, or whose chain is not a function, fails the authentication naming it', async function () {
    setAwsEnvironmentForTests({ sdk: () => ({ fromNodeProviderChain: () => { throw new Error(SECRET); } }) });
    const thrown = await rejection(awsCredentials(aws()));
    expect(thrown).to.be.instanceOf(AuthenticationError);
    expect((thrown as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: the AWS SDK\'s default credential provider chain (@aws-sdk/credential-providers) could not be made');
    expect(shown(thrown)).to.not.include(SECRET);
    setAwsEnvironmentForTests({ sdk: () => ({ fromNodeProviderChain: () => 'not a provider' as unknown as () => Promise<AwsCredentials> }) });
    expect(((await rejection(awsCredentials(aws()))) as Error).message).to.equal('Authentication failed on "$external" with MONGODB-AWS: the AWS SDK\'s default credential provider chain (@aws-sdk/credential-providers) gave no access key ID and secret access key');
  });

  it('an abort ends the wait for a credential_process that has not answered', async function () {
    this.timeout(20_000);
    const { config, runs, answers } = processProfile('slow', processOutput, 1_500);
    await withProcessEnv(dir, { AWS_CONFIG_FILE: config, AWS_PROFILE: 'slow' }, async () => {
      const controller = new AbortController();
      const reason = new Error('connectTimeoutMS');
      let abortedAt = 0;
      // Aborted once the process runs, 1500 ms before it answers.
      void eventually(() => runs() === 1, 10_000).then(() => {
        abortedAt = Date.now();
        controller.abort(reason);
      });
      expect(await rejection(awsCredentials(aws(), controller.signal))).to.equal(reason);
      expect(abortedAt, 'aborted').to.be.greaterThan(0);
      expect(Date.now() - abortedAt).to.be.below(1_000);
      // Once the process has answered, nothing ran it again.
      expect(await eventually(() => answers() === 1, 10_000), 'the process answered').to.equal(true);
      expect(runs()).to.equal(1);
    });
  });

  it('is loaded with the first MONGODB-AWS authentication, not with the package; one that cannot be loaded is named by its first line only (simulated in a child process)', function () {
    this.timeout(30_000);
    const root = path.resolve(__dirname, '../..');
    const script = `
      const Module = require('node:module');
      const { setAwsEnvironmentForTests, awsCredentials } = require('./lib/auth/aws');
      require('./lib');
      const out = { loadedWithPackage: Object.keys(require.cache).some((k) => k.includes('@aws-sdk')) };
      const load = Module._load;
      Module._load = function (request, ...rest) {
        if (request === '@aws-sdk/credential-providers') throw Object.assign(new Error("Cannot find module '@aws-sdk/credential-providers'\\nRequire stack:\\n- /srv/app/secret-project/index.js"), { code: 'MODULE_NOT_FOUND' });
        return load.call(this, request, ...rest);
      };
      setAwsEnvironmentForTests({ ec2: 'http://127.0.0.1:1' });
      const { MongoCredentials } = require('./lib');
      const credentials = new MongoCredentials({ mechanism: 'MONGODB-AWS' });
      awsCredentials(credentials).then(() => 'resolved', (e) => e.message).then((message) => {
        out.message = message;
        // A package of that name without fromNodeProviderChain (another version, a stub) is not used either.
        Module._load = function (request, ...rest) {
          if (request === '@aws-sdk/credential-providers') return {};
          return load.call(this, request, ...rest);
        };
        delete require.cache[require.resolve('./lib/auth/aws')];
        const fresh = require('./lib/auth/aws');
        fresh.setAwsEnvironmentForTests({ ec2: 'http://127.0.0.1:1' });
        return fresh.awsCredentials(credentials).then(() => 'resolved', (e) => e.message);
      }).then((stub) => console.log(JSON.stringify({ ...out, stub })));
    `;
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('AWS_')));
    const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], {
      cwd: root,
      env: { ...env, TS_NODE_PROJECT: path.join(root, 'tsconfig.json') },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).to.equal(0);
    const out = JSON.parse(r.stdout);
    expect(out.loadedWithPackage).to.equal(false);
    expect(out.message).to.match(/^Authentication failed on "\$external" with MONGODB-AWS: the EC2 instance metadata endpoint could not be reached; .* which could not be loaded: Cannot find module '@aws-sdk\/credential-providers'$/);
    expect(out.stub).to.match(/could not be loaded: it has no fromNodeProviderChain$/);
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
