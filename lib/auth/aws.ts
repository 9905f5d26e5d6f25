/**
 * MONGODB-AWS authentication: the two-step SASL conversation, signed with AWS Signature Version 4 (written here with
 * node:crypto), and the credentials it signs with: from the AWS SDK's default credential provider chain when the
 * application has the optional package `@aws-sdk/credential-providers`, else obtained here in the spec's order and cached
 * as it says.
 *
 * The secret access key and the session token never appear in an error, an event, a log message, inspection or JSON:
 * they live only in the objects of this module, and every error raised here is built from fixed words.
 *
 * Source: auth spec, "MONGODB-AWS" ("Conversation", "Region Calculation", "Obtaining Credentials" with its recommended
 * pattern: the SDK when available, else the driver's own sources, "Credential Fetching Order", "Caching Credentials");
 * extension: AWS_CONTAINER_CREDENTIALS_FULL_URI and the container
 * Authorization token (EKS Pod Identity), as the AWS SDK's container credential provider reads them.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type * as Http from 'node:http';
import type * as Https from 'node:https';
import { Binary, deserialize, serialize, type Document } from 'bson';
import { AuthenticationError } from '../errors';
import { optionValue } from '../options';
import { withPermissionRefusal } from '../permission-model';
import type { MongoCredentials } from './credentials';
import { runStep, type RunCommand } from './scram';
import { boundedText } from './bounded-body';
import { readTokenFile } from './token-file';
import { untilAborted } from './until-aborted';
import { binaryBytes, withoutEcho } from './without-echo';

/**
 * AWS credentials, as an AWS SDK credential provider resolves them.
 *
 * Source: auth spec, "Obtaining Credentials" (an access key ID and a secret access key, with a session token for
 * temporary credentials), "Custom Credential Providers" (the shape of the AWS SDK's provider).
 */
export interface AwsCredentials {
  /** The access key ID: not secret (it is sent in the authorization header). Non-empty. */
  readonly accessKeyId: string;
  /** The secret access key: never sent, never shown. Non-empty. */
  readonly secretAccessKey: string;
  /** The session token of temporary credentials (sent as X-Amz-Security-Token); absent for long-term ones. */
  readonly sessionToken?: string | undefined;
  /** When temporary credentials expire. */
  readonly expiration?: Date | undefined;
}

/**
 * The `AWS_CREDENTIAL_PROVIDER` mechanism property: a function resolving to {@link AwsCredentials}, as the AWS SDK's
 * providers (`fromNodeProviderChain()`, say) are. Called at each authentication; its result is not cached here (the
 * SDK's providers cache). A rejection or a result without both keys fails the authentication.
 *
 * Source: auth spec, "Custom Credential Providers", "MONGODB-AWS" mechanism_properties.
 */
export type AwsCredentialProvider = () => Promise<AwsCredentials>;

/** The body of the signed GetCallerIdentity request. Source: auth spec, "Conversation" (Body, 43 bytes). */
const BODY = 'Action=GetCallerIdentity&Version=2011-06-15';
/** Credentials closer than this to their expiration are fetched again. Source: auth spec, "Caching Credentials". */
const EXPIRY_MARGIN_MS = 5 * 60_000;
/**
 * The deadline of each request to a credential endpoint, from its start to the last byte of the answer: an endpoint
 * that is silent, or that trickles its answer a byte at a time, fails the authentication after it. Source: auth spec,
 * "ECS endpoint" (SHOULD enforce 10 seconds); extension: counted for the whole request, not for each silence.
 */
const ENDPOINT_TIMEOUT_MS = 10_000;
/**
 * The most an answer of STS, ECS or EC2 may hold: theirs are a few KiB; a longer one fails the authentication
 * unread, so that an endpoint cannot fill the memory. Source: extension.
 */
const MAX_ENDPOINT_ANSWER_BYTES = 65_536;

/**
 * Where credentials are fetched from, and the clock: the spec's addresses; replaced in tests only (see
 * {@link setAwsEnvironmentForTests}).
 */
const environment = {
  sts: 'https://sts.amazonaws.com',
  ecs: 'http://169.254.170.2',
  ec2: 'http://169.254.169.254',
  now: (): number => Date.now(),
  env: process.env as Record<string, string | undefined>,
  timeoutMs: ENDPOINT_TIMEOUT_MS,
  sdk: loadAwsSdk as () => AwsSdk | string,
};
const defaults = { ...environment };

/**
 * For tests only (not exported by the package): replaces the STS, ECS and EC2 base URLs, the clock, the environment
 * variables read, each request's deadline (ms) or the loader of the AWS SDK (returning the module, or why it cannot be
 * loaded); no argument restores the defaults. Replacing `env` without `sdk` also leaves the SDK out, as if it were not
 * installed: the SDK reads the process's own environment, not the one given. Clears the credential cache.
 */
export function setAwsEnvironmentForTests(replacement?: Partial<typeof environment>): void {
  Object.assign(environment, defaults, replacement?.env !== undefined && replacement.sdk === undefined ? { sdk: () => 'not used in this test' } : {}, replacement ?? {});
  cached = undefined;
  sdkChain = undefined;
}

/** What rxcmap uses of the optional package `@aws-sdk/credential-providers`. */
interface AwsSdk {
  fromNodeProviderChain(): AwsCredentialProvider;
}

let loaded: AwsSdk | string | undefined;
/**
 * The optional package `@aws-sdk/credential-providers`, loaded on the first MONGODB-AWS authentication (never with the
 * package), or the first line of why it cannot be loaded (Node's MODULE_NOT_FOUND message goes on with the require
 * stack, the application's file paths). The `require` sits in a `try` so that bundlers leave a missing optional package
 * to run time.
 */
function loadAwsSdk(): AwsSdk | string {
  if (loaded === undefined) {
    try {
      const sdk = require('@aws-sdk/credential-providers') as Partial<AwsSdk>;
      loaded = typeof sdk.fromNodeProviderChain === 'function' ? (sdk as AwsSdk) : 'it has no fromNodeProviderChain';
    } catch (error) {
      loaded = String((error as Error | undefined)?.message).split('\n')[0]!;
    }
  }
  return loaded;
}

/**
 * The AWS SDK's default credential provider chain, made on first use and kept until an authentication fails (the
 * SDK caches the credentials it resolves and fetches them again before they expire; a new chain starts with none).
 */
let sdkChain: AwsCredentialProvider | undefined;

/** The credentials fetched from an AWS endpoint, kept until five minutes before they expire, or a failure. */
let cached: AwsCredentials | undefined;

/** Whether `credentials` are more than five minutes away from expiring (or have no expiration). */
function fresh(credentials: AwsCredentials): boolean {
  return credentials.expiration === undefined || credentials.expiration.getTime() - environment.now() > EXPIRY_MARGIN_MS;
}

/** An AuthenticationError in fixed words (never a secret), for MONGODB-AWS. */
function failure(why: string, cause?: unknown): AuthenticationError {
  return new AuthenticationError(`Authentication failed on "$external" with MONGODB-AWS: ${why}`, cause);
}

/**
 * The credentials to sign with, in the spec's order: the AWS_CREDENTIAL_PROVIDER property; else, when the optional
 * package `@aws-sdk/credential-providers` can be loaded, its `fromNodeProviderChain()` (the SDK's own order: the
 * environment variables, IAM Identity Center (SSO), the shared credentials and config files with AWS_PROFILE,
 * credential_process, web identity, the container and EC2 endpoints; one chain per process, whose credentials the SDK
 * caches and refreshes; the others below are then not used); else cached ones still valid; else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN if set), read now and never cached;
 * else AssumeRoleWithWebIdentity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN set); else the ECS endpoint
 * (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI set); else the container endpoint AWS_CONTAINER_CREDENTIALS_FULL_URI names
 * (EKS Pod Identity, some Lambda and Greengrass set-ups; an extension, see {@link containerEndpoint}); else the EC2
 * endpoint (IMDSv2); those last four are cached. A container endpoint (either variable) is sent the Authorization
 * header of AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at each fetch) or else AWS_CONTAINER_AUTHORIZATION_TOKEN.
 *
 * @throws {AuthenticationError} when none can be obtained, naming the source, never a secret (nor the container
 *   Authorization token; a provider's or the SDK's error by its name only); for an AWS_CONTAINER_CREDENTIALS_FULL_URI
 *   that is not allowed, before any request; when EC2, the last source, fails, saying which sources need the SDK and
 *   why it could not be loaded.
 * @throws `signal.reason` once `signal` aborts, even while the provider, the SDK or an endpoint has not answered.
 *
 * Source: auth spec, "Obtaining Credentials" (the SDK if available, else the driver's own sources), "Credential
 * Fetching Order", "Environment variables", "Caching Credentials"; extension: the AWS
 * SDK's container credential provider (FULL_URI, the Authorization token), in the place the SDK's chain gives it
 * (after RELATIVE_URI, before EC2).
 */
export async function awsCredentials(credentials: MongoCredentials, signal?: AbortSignal): Promise<AwsCredentials> {
  const provider = credentials.mechanismProperties.AWS_CREDENTIAL_PROVIDER as AwsCredentialProvider | undefined;
  if (provider !== undefined) return fromProvider(provider, 'the AWS_CREDENTIAL_PROVIDER', signal);
  const sdk = environment.sdk();
  if (typeof sdk !== 'string') {
    const from = 'the AWS SDK\'s default credential provider chain (@aws-sdk/credential-providers)';
    try {
      sdkChain ??= sdk.fromNodeProviderChain();
    } catch (error) {
      throw failure(withPermissionRefusal(`${from} could not be made`, error), nameOnly(error));
    }
    return fromProvider(sdkChain, from, signal);
  }
  const hit = cached;
  if (hit !== undefined && fresh(hit)) return hit;
  const env = environment.env;
  if (env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) {
    return { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) };
  }
  if (env.AWS_ACCESS_KEY_ID || env.AWS_SECRET_ACCESS_KEY) {
    throw failure('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together');
  }
  let fetched: AwsCredentials;
  if (env.AWS_WEB_IDENTITY_TOKEN_FILE && env.AWS_ROLE_ARN) {
    fetched = await webIdentity(env.AWS_WEB_IDENTITY_TOKEN_FILE, env.AWS_ROLE_ARN, env.AWS_ROLE_SESSION_NAME, signal);
  } else if (env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI) {
    const uri = env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI;
    const from = 'the ECS endpoint';
    fetched = fromJson(await request('GET', `${environment.ecs}${uri.startsWith('/') ? '' : '/'}${uri}`, await containerHeaders(env), signal, from), from);
  } else if (env.AWS_CONTAINER_CREDENTIALS_FULL_URI) {
    const url = containerEndpoint(env.AWS_CONTAINER_CREDENTIALS_FULL_URI);
    const from = 'the container endpoint of AWS_CONTAINER_CREDENTIALS_FULL_URI';
    fetched = fromJson(await request('GET', url.href, await containerHeaders(env), signal, from), from);
  } else {
    try {
      fetched = await ec2(signal);
    } catch (error) {
      if (!(error instanceof AuthenticationError)) throw error;
      // The last source: say where else credentials could have come from, and why they were not looked for there.
      throw new AuthenticationError(`${error.message}; shared credentials and config files (AWS_PROFILE), IAM Identity Center (SSO) and credential_process are read only through the optional package @aws-sdk/credential-providers (npm install @aws-sdk/credential-providers), which could not be loaded: ${sdk}`, error.cause);
    }
  }
  // Written at once (one assignment): no lock, so concurrent authentications may each fetch (auth spec: MUST not lock).
  cached = fetched;
  return fetched;
}

/** The hosts an `http:` AWS_CONTAINER_CREDENTIALS_FULL_URI may name (as WHATWG URL writes them), besides 127.0.0.0/8. */
const CONTAINER_HOSTS: ReadonlySet<string> = new Set([
  '169.254.170.2', // ECS task metadata
  '169.254.170.23', // EKS Pod Identity agent, IPv4
  '[fd00:ec2::23]', // EKS Pod Identity agent, IPv6
  '[::1]',
  'localhost', // Greengrass's token exchange service
]);

/**
 * The URL of AWS_CONTAINER_CREDENTIALS_FULL_URI `text` when the AWS SDK's container provider allows it: any `https:`
 * URL, or an `http:` one whose host is a loopback address (127.0.0.0/8, ::1, localhost), the ECS task metadata address
 * 169.254.170.2 or an EKS Pod Identity address (169.254.170.23, fd00:ec2::23). IP addresses are compared as written
 * after WHATWG URL parsing (so `http://127.1/` is 127.0.0.1); no name is resolved, so `http://example.com` and
 * `http://169.254.169.254` (EC2's metadata service) are refused: plain HTTP elsewhere would let the network read or
 * forge the credentials.
 *
 * @throws {AuthenticationError} naming the variable and what is allowed (never the value, which may hold a
 *   token in its query) for a value that is not a URL or not allowed.
 *
 * Source: extension: the AWS SDK's container credential provider (its allowed hosts; the SDKs and Tools Reference
 * Guide, "Container credential provider").
 */
export function containerEndpoint(text: string): URL {
  const allowed = 'it must be an https URL, or an http URL to a loopback address (127.0.0.0/8, ::1, localhost), 169.254.170.2 (ECS) or 169.254.170.23 or fd00:ec2::23 (EKS Pod Identity)';
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw failure(`AWS_CONTAINER_CREDENTIALS_FULL_URI is not a URL: ${allowed}`);
  }
  if (url.protocol === 'https:') return url;
  const host = url.hostname;
  const loopbackV4 = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
  if (url.protocol === 'http:' && (CONTAINER_HOSTS.has(host) || loopbackV4)) return url;
  throw failure(`AWS_CONTAINER_CREDENTIALS_FULL_URI is not allowed: ${allowed}`);
}

/**
 * The headers of a request to a container endpoint: `Authorization` with the contents of the file
 * AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names (read now, at each fetch, as EKS rotates it; surrounding white space
 * left out), else AWS_CONTAINER_AUTHORIZATION_TOKEN's value, else none.
 *
 * @throws {AuthenticationError} for a file that cannot be read or is empty, or a token holding a line break or
 *   another character an HTTP header cannot carry; never with the token.
 *
 * Source: extension: the AWS SDK's container credential provider (the file wins over the variable).
 */
async function containerHeaders(env: Record<string, string | undefined>): Promise<Record<string, string>> {
  let token: string | undefined;
  let name: string;
  if (env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE) {
    name = 'the file AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names';
    token = (await readTokenFile(env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, name, failure)).trim();
    if (token === '') throw failure(`${name} is empty`);
  } else {
    name = 'AWS_CONTAINER_AUTHORIZATION_TOKEN';
    token = env.AWS_CONTAINER_AUTHORIZATION_TOKEN || undefined;
  }
  if (token === undefined) return {};
  // What Node's HTTP client refuses in a header value (CR and LF above all: they would add headers or a request).
  if (/[^\t\x20-\x7e\x80-\xff]/.test(token)) throw failure(`the token of ${name} holds a line break or another character an HTTP header cannot carry`);
  return { Authorization: token };
}

/**
 * The credentials `provider` (the AWS_CREDENTIAL_PROVIDER or the SDK's chain, named by `from`) resolves to, checked.
 *
 * @throws {AuthenticationError} naming `from` when it rejects or gives no usable credentials, with its error's name
 *   only (its message may quote what it read).
 * @throws `signal.reason` once `signal` aborts, even while the provider has not answered.
 */
async function fromProvider(provider: AwsCredentialProvider, from: string, signal: AbortSignal | undefined): Promise<AwsCredentials> {
  let given: unknown;
  try {
    given = await untilAborted(Promise.resolve().then(provider), signal);
  } catch (error) {
    if (signal?.aborted && error === signal.reason) throw error;
    throw failure(withPermissionRefusal(`${from} failed`, error), nameOnly(error));
  }
  try {
    return checked(given, from);
  } catch (error) {
    if (error instanceof AuthenticationError) throw error;
    // Its fields could not be read (a getter that throws): its error may quote them.
    throw failure(`${from} gave a result that cannot be read`, nameOnly(error));
  }
}

/**
 * Clears the cache, and the AWS SDK's chain with the credentials it keeps. Source: auth spec, "Caching Credentials" (if
 * AWS authentication fails for any reason).
 */
export function clearAwsCredentialCache(): void {
  cached = undefined;
  sdkChain = undefined;
}

/**
 * An error's name and its system error code (ECONNREFUSED, ERR_ACCESS_DENIED), only: a provider's message may quote
 * what it read.
 */
function nameOnly(error: unknown): Error {
  let code: unknown;
  try {
    code = (error as { code?: unknown } | null | undefined)?.code;
  } catch {
    // A foreign error whose `code` getter throws: its name only.
  }
  return new Error(`${error instanceof Error ? error.name : typeof error}${typeof code === 'string' && /^E[A-Z0-9_]{1,40}$/.test(code) ? ` ${code}` : ''} (message not shown)`);
}

/** `given` as AwsCredentials, or an error naming `from` (never its values). */
function checked(given: unknown, from: string): AwsCredentials {
  const g = (given ?? {}) as Record<string, unknown>;
  const { accessKeyId, secretAccessKey, sessionToken, expiration } = g;
  if (typeof accessKeyId !== 'string' || accessKeyId === '' || typeof secretAccessKey !== 'string' || secretAccessKey === '') {
    throw failure(`${from} gave no access key ID and secret access key`);
  }
  if (sessionToken !== undefined && sessionToken !== null && typeof sessionToken !== 'string') throw failure(`${from} gave a session token that is not a string`);
  const expires = expiration instanceof Date ? expiration : typeof expiration === 'string' || typeof expiration === 'number' ? new Date(expiration) : undefined;
  return {
    accessKeyId,
    secretAccessKey,
    ...(typeof sessionToken === 'string' && sessionToken !== '' ? { sessionToken } : {}),
    ...(expires !== undefined && !Number.isNaN(expires.getTime()) ? { expiration: expires } : {}),
  };
}

/** The credentials of an ECS, EC2 or STS JSON answer (AccessKeyId, SecretAccessKey, Token or SessionToken, Expiration). */
function fromJson(text: string, from: string): AwsCredentials {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw failure(`${from} answered with something that is not JSON`);
  }
  if (body === null || typeof body !== 'object') throw failure(`${from} answered with something that is not a JSON object`);
  return checked(
    { accessKeyId: body.AccessKeyId, secretAccessKey: body.SecretAccessKey, sessionToken: body.Token ?? body.SessionToken, expiration: body.Expiration },
    from,
  );
}

/**
 * AssumeRoleWithWebIdentity: a POST to STS with the token file's contents, the role ARN and a session name
 * (AWS_ROLE_SESSION_NAME, else a random one). Source: auth spec, "AssumeRoleWithWebIdentity".
 */
async function webIdentity(tokenFile: string, roleArn: string, sessionName: string | undefined, signal?: AbortSignal): Promise<AwsCredentials> {
  const token = (await readTokenFile(tokenFile, 'the file AWS_WEB_IDENTITY_TOKEN_FILE names', failure)).trim();
  const query = new URLSearchParams({
    Action: 'AssumeRoleWithWebIdentity',
    RoleSessionName: sessionName || `rxcmap-${randomBytes(8).toString('hex')}`,
    RoleArn: roleArn,
    WebIdentityToken: token,
    Version: '2011-06-15',
  });
  const from = 'AssumeRoleWithWebIdentity';
  const text = await request('POST', `${environment.sts}/?${query.toString()}`, { Accept: 'application/json' }, signal, from);
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw failure(`${from} answered with something that is not JSON`);
  }
  // The spec's shape ({ Credentials }) or STS's own ({ AssumeRoleWithWebIdentityResponse: { ...Result: { Credentials } } }).
  const response = body?.AssumeRoleWithWebIdentityResponse as Record<string, Record<string, unknown>> | undefined;
  const found = (body?.Credentials ?? response?.AssumeRoleWithWebIdentityResult?.Credentials) as Record<string, unknown> | undefined;
  const expiration = found?.Expiration;
  // STS gives seconds since the epoch in JSON; the spec's example, a date.
  return fromJson(JSON.stringify({ ...found, Expiration: typeof expiration === 'number' && expiration < 1e11 ? expiration * 1000 : expiration }), from);
}

/** The EC2 endpoint with IMDSv2: a session token (PUT), the role name, then its credentials. Source: auth spec, "EC2 endpoint". */
async function ec2(signal?: AbortSignal): Promise<AwsCredentials> {
  const from = 'the EC2 instance metadata endpoint';
  const token = await request('PUT', `${environment.ec2}/latest/api/token`, { 'X-aws-ec2-metadata-token-ttl-seconds': '30' }, signal, from);
  const headers = { 'X-aws-ec2-metadata-token': token };
  const role = (await request('GET', `${environment.ec2}/latest/meta-data/iam/security-credentials/`, headers, signal, from)).trim();
  if (role === '') throw failure(`${from} gave no role name`);
  return fromJson(await request('GET', `${environment.ec2}/latest/meta-data/iam/security-credentials/${encodeURIComponent(role)}`, headers, signal, from), from);
}

/**
 * One HTTP(S) request; resolves to the body of a 2xx answer. Rejects with an AuthenticationError naming `from` (never
 * the URL's query, which may hold a token) for another status, a network error, an answer not complete within 10 s of
 * the request's start (a slow trickle of bytes included), or an answer over {@link MAX_ENDPOINT_ANSWER_BYTES}.
 */
function request(method: string, url: string, headers: Record<string, string>, signal: AbortSignal | undefined, from: string): Promise<string> {
  return new Promise<string>((resolveWith, rejectWith) => {
    const timeoutMs = environment.timeoutMs;
    let deadline: NodeJS.Timeout | undefined;
    const settled = (): void => clearTimeout(deadline);
    const resolve = (text: string): void => {
      settled();
      resolveWith(text);
    };
    const reject = (error: unknown): void => {
      settled();
      rejectWith(error);
    };
    const parsed = new URL(url);
    const get = parsed.protocol === 'https:' ? (require('node:https') as typeof Https).request : (require('node:http') as typeof Http).request;
    // agent: false: a socket of its own, closed once answered; none left alive in Node's shared agent between the rare
    // credential fetches.
    const req = get(parsed, { method, agent: false, headers: { ...headers, 'Content-Length': '0' }, ...(signal ? { signal } : {}) }, (res) => {
      const tooLarge = (): AuthenticationError => failure(`${from} answered with more than ${MAX_ENDPOINT_ANSWER_BYTES} bytes`);
      boundedText(res, MAX_ENDPOINT_ANSWER_BYTES, tooLarge).then(
        (text) => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) resolve(text);
          else reject(failure(`${from} answered with HTTP status ${status}`));
        },
        (error: unknown) => {
          req.destroy();
          reject(error instanceof AuthenticationError ? error : signal?.aborted ? signal.reason : failure(`${from} could not be read`));
        },
      );
    });
    // One deadline for the whole request (connection, headers and body): a socket timeout counts silence only, which
    // an endpoint sending a byte every few seconds would never reach. Rejected first, so that its words are kept.
    deadline = setTimeout(() => {
      const error = failure(`${from} did not answer within ${timeoutMs} ms`);
      reject(error);
      req.destroy(error);
    }, timeoutMs);
    req.on('error', (error) => {
      if (signal?.aborted) reject(signal.reason);
      else reject(error instanceof AuthenticationError ? error : failure(withPermissionRefusal(`${from} could not be reached`, error), nameOnly(error)));
    });
    req.end();
  });
}

/**
 * The region of STS host `host`, or undefined for a host the spec refuses: empty, over 255 bytes, starting or ending
 * with a period, or with an empty label. "aws.amazonaws.com" and a host without a period: us-east-1; else the second
 * label. (The spec's table puts sts.amazonaws.com at us-east-1 too: its second label is "amazonaws", so it is named
 * here with aws.amazonaws.com.)
 *
 * Source: auth spec, "Conversation" (host validation), "Region Calculation".
 */
export function awsRegion(host: string): string | undefined {
  if (host.length === 0 || Buffer.byteLength(host, 'utf8') > 255) return undefined;
  const labels = host.split('.');
  if (labels.some((label) => label === '')) return undefined;
  if (host === 'aws.amazonaws.com' || host === 'sts.amazonaws.com' || labels.length === 1) return 'us-east-1';
  return labels[1];
}

/**
 * What a SigV4 signature covers. Header names are given in any case; they are signed lower-cased, sorted.
 * Source: AWS Signature Version 4 ("Create a canonical request").
 */
export interface SigV4Request {
  /** HTTP method, e.g. POST. */
  readonly method: string;
  /** The canonical URI path, e.g. `/`. */
  readonly path: string;
  /** The canonical query string, already encoded and sorted; empty for none. */
  readonly query: string;
  /** The headers to sign. */
  readonly headers: Readonly<Record<string, string>>;
  /** The request body. */
  readonly body: string;
  /** Region, e.g. us-east-1. */
  readonly region: string;
  /** Service, e.g. sts. */
  readonly service: string;
  /** The X-Amz-Date value, `YYYYMMDDTHHMMSSZ`. */
  readonly amzDate: string;
}

/**
 * The Authorization header of `request` signed with `credentials` (AWS4-HMAC-SHA256): `AWS4-HMAC-SHA256
 * Credential=<key id>/<scope>, SignedHeaders=<names>, Signature=<hex>`.
 *
 * Source: AWS Signature Version 4 signing process; auth spec, "Conversation" (MUST follow it).
 */
export function sigV4Authorization(request: SigV4Request, credentials: Pick<AwsCredentials, 'accessKeyId' | 'secretAccessKey'>): string {
  const names = Object.keys(request.headers).map((name) => [name.toLowerCase(), request.headers[name].trim().replace(/\s+/g, ' ')] as const);
  names.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const signedHeaders = names.map(([name]) => name).join(';');
  const canonical = [
    request.method,
    request.path,
    request.query,
    ...names.map(([name, value]) => `${name}:${value}`),
    '',
    signedHeaders,
    sha256(request.body),
  ].join('\n');
  const day = request.amzDate.slice(0, 8);
  const scope = `${day}/${request.region}/${request.service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', request.amzDate, scope, sha256(canonical)].join('\n');
  let key: Buffer = hmac(`AWS4${credentials.secretAccessKey}`, day);
  for (const part of [request.region, request.service, 'aws4_request']) key = hmac(key, part);
  const signature = createHmac('sha256', key).update(toSign, 'utf8').digest('hex');
  return `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** `date` as X-Amz-Date: `YYYYMMDDTHHMMSSZ`, UTC. */
export function amzDate(date: Date): string {
  return date.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

/**
 * The headers the GetCallerIdentity request signs for MONGODB-AWS (content-length, content-type, host, x-amz-date,
 * x-amz-security-token when there is a session token, x-mongodb-gs2-cb-flag `n`, x-mongodb-server-nonce). Used by the
 * client and by the test endpoint, which checks the signature.
 *
 * Source: auth spec, "Conversation" (the table of headers).
 */
export function awsSignedRequest(host: string, serverNonce: Buffer, date: string, sessionToken: string | undefined): SigV4Request {
  return {
    method: 'POST',
    path: '/',
    query: '',
    headers: {
      'Content-Length': String(BODY.length),
      'Content-Type': 'application/x-www-form-urlencoded',
      Host: host,
      'X-Amz-Date': date,
      ...(sessionToken === undefined ? {} : { 'X-Amz-Security-Token': sessionToken }),
      'X-MongoDB-Server-Nonce': serverNonce.toString('base64'),
      'X-MongoDB-GS2-CB-Flag': 'n',
    },
    body: BODY,
    region: awsRegion(host) ?? 'us-east-1',
    service: 'sts',
    amzDate: date,
  };
}

/** Options of {@link awsAuthenticate}. */
export interface AwsOptions {
  /** Ends the authentication: the Promise rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /** The client nonce (32 bytes) in place of a random one: for tests. */
  clientNonce?: Buffer | undefined;
}

/**
 * Authenticates with MONGODB-AWS: saslStart `{ r: <32-byte client nonce>, p: 110 }` on `$external`, checks the
 * server's `{ s, h }` (s: 64 bytes starting with the client nonce; h: a valid STS host), then saslContinue `{ a:
 * <Authorization>, d: <X-Amz-Date>, t?: <session token> }`. Not speculative (the handshake spec names only X.509,
 * SCRAM and OIDC). Any failure clears the credential cache.
 *
 * @throws {AuthenticationError} for credentials that cannot be obtained, a server answer that fails a check, or the
 *   server's refusal (its code and message kept as the cause); never with the secret access key or session token.
 *
 * Source: auth spec, "MONGODB-AWS", "Conversation", "Caching Credentials".
 */
export async function awsAuthenticate(run: RunCommand, credentials: MongoCredentials, options: AwsOptions = {}): Promise<void> {
  const signal = optionValue(options, 'signal');
  try {
    signal?.throwIfAborted();
    const aws = await awsCredentials(credentials, signal);
    signal?.throwIfAborted();
    const fail = (why: string, cause?: unknown): never => {
      throw failure(why, cause);
    };
    // The session token goes to the server, which may quote it in its refusal: not shown, there or in the cause.
    const send = aws.sessionToken === undefined ? run : withoutEcho(run, aws.sessionToken, SESSION_TOKEN_NOT_SHOWN);
    const clientNonce = optionValue(options, 'clientNonce') ?? randomBytes(32);
    const first = await runStep(send, credentials.source, {
      saslStart: 1,
      mechanism: 'MONGODB-AWS',
      payload: new Binary(serialize({ r: new Binary(clientNonce), p: 110 })),
    }, 'saslStart', fail);
    let answer: Document;
    try {
      answer = deserialize(binaryBytes(first.payload));
    } catch {
      throw failure('the server\'s first message is not a BSON document');
    }
    const serverNonce = answer.s instanceof Binary ? binaryBytes(answer.s) : undefined;
    if (serverNonce === undefined || serverNonce.length !== 64 || !serverNonce.subarray(0, 32).equals(clientNonce)) {
      throw failure('the server nonce is not 64 bytes starting with the client nonce');
    }
    const host: unknown = answer.h;
    if (typeof host !== 'string' || awsRegion(host) === undefined) {
      throw failure('the STS host the server gave is empty, over 255 bytes, or has an empty label');
    }
    const date = amzDate(new Date(environment.now()));
    const authorization = sigV4Authorization(awsSignedRequest(host, serverNonce, date, aws.sessionToken), aws);
    const second = await runStep(send, credentials.source, {
      saslContinue: 1,
      conversationId: first.conversationId,
      payload: new Binary(serialize({ a: authorization, d: date, ...(aws.sessionToken === undefined ? {} : { t: aws.sessionToken }) })),
    }, 'saslContinue', fail);
    if (second.done !== true) throw failure('the server did not end the conversation after the saslContinue');
  } catch (error) {
    clearAwsCredentialCache();
    throw error;
  }
}

/** What a server's refusal shows in place of the session token it quotes. */
const SESSION_TOKEN_NOT_SHOWN = '<session token>';
