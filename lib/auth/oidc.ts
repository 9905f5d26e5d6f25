/**
 * MONGODB-OIDC, machine workflow: an access token (a JWT) from a user callback (`OIDC_CALLBACK`) or a built-in
 * environment (`ENVIRONMENT`: `test`, `azure`, `gcp`, `k8s`), sent in one saslStart (`{ jwt }`), speculatively in the
 * handshake when a token is cached. One token cache per {@link MongoCredentials} object (what one client holds), shared
 * by all its connections; each connection remembers the token it authenticated with, to invalidate exactly that one
 * when the server asks for reauthentication (ReauthenticationRequired, 391). The access token is a secret: no error,
 * event, log message, inspection or JSON of this library shows it.
 *
 * Human workflow (`OIDC_HUMAN_CALLBACK`): the two-step conversation (principal name, IdpInfo, then the JWT), the
 * callback given the IdpInfo and any cached refresh token, the IdpInfo, refresh token and access token cached per
 * credentials object, the hosts limited by `ALLOWED_HOSTS`. Refresh tokens are secrets too.
 *
 * Source: auth spec, "MONGODB-OIDC" ("Machine Authentication Flow", "Built-in OIDC Environment Integrations", "OIDC
 * Callback", "One-Step", "Credential Caching", "Speculative Authentication", "Reauthentication"), "Human
 * Authentication Flow", "OIDC Human Callback", "Two-Step".
 */
import { isIPv6, SocketAddress } from 'node:net';
import { Binary, BSON, type Document } from 'bson';
import { AuthenticationError, MongoServerError, OidcHostNotAllowedError } from '../errors';
import { EXTERNAL_SOURCE, OIDC_DEFAULT_ALLOWED_HOSTS, type MongoCredentials } from './credentials';
import { runStep, type RunCommand } from './scram';
import { boundedText } from './bounded-body';
import { untilAborted } from './until-aborted';
import { readTokenFile } from './token-file';
import { withoutEcho } from './without-echo';

/** The mechanism name. Source: auth spec, "MONGODB-OIDC" (mechanism MUST be "MONGODB-OIDC"). */
export const OIDC_MECHANISM = 'MONGODB-OIDC';

/**
 * The callback API version passed to an {@link OidcCallback} as `version`.
 *
 * Source: auth spec, "OIDC Callback" (drivers MUST pass 1 for the initial callback API version).
 */
export const OIDC_CALLBACK_VERSION = 1;

/**
 * How long an {@link OidcCallback} (or a built-in environment's fetch) may run, in ms, when no earlier deadline
 * applies: 60000; the most it is ever given. A deadline that applies shortens it to the time that deadline has left:
 * establishing a connection, connectTimeoutMS (counted from the socket's opening; 0: no deadline); reauthenticating
 * after ReauthenticationRequired (391), the command's timeoutMS (default socketTimeoutMS; 0: no deadline). Once it
 * elapses, its `timeoutContext` aborts and authentication fails.
 *
 * Source: auth spec, "OIDC Callback" (the timeout MUST be min(remaining connectTimeoutMS, remaining timeoutMS); if CSOT
 * is not applied, 1 minute).
 */
export const OIDC_CALLBACK_TIMEOUT_MS = 60_000;

/**
 * The least time between two calls of the token source of one credentials object, in ms: 100. A call that would come
 * sooner waits.
 *
 * Source: auth spec, "Credential Caching" ("Authentication": wait until it has been at least 100ms since the last
 * callback invocation).
 */
export const OIDC_MIN_CALL_INTERVAL_MS = 100;

/**
 * The built-in environments of `ENVIRONMENT` (a frozen array): `test` reads the file named by the environment variable
 * `OIDC_TOKEN_FILE`; `azure` asks the Azure Instance Metadata Service (needs `TOKEN_RESOURCE`; the user name, if any,
 * is the managed identity's client id); `gcp` asks the Google Cloud metadata server (needs `TOKEN_RESOURCE`, the
 * audience); `k8s` reads `AZURE_FEDERATED_TOKEN_FILE`, else `AWS_WEB_IDENTITY_TOKEN_FILE`, else
 * `/var/run/secrets/kubernetes.io/serviceaccount/token`.
 *
 * Source: auth spec, "MONGODB-OIDC" (ENVIRONMENT MUST be one of test, azure, gcp, k8s), "Built-in OIDC Environment
 * Integrations".
 */
export const OIDC_ENVIRONMENTS = Object.freeze(['test', 'azure', 'gcp', 'k8s'] as const);

/** A name of {@link OIDC_ENVIRONMENTS}. Source: auth spec, "MONGODB-OIDC" (ENVIRONMENT). */
export type OidcEnvironment = (typeof OIDC_ENVIRONMENTS)[number];

/**
 * What an {@link OidcCallback} is given. Fields may be added in later versions (see `version`); none is removed.
 *
 * Source: auth spec, "OIDC Callback" (timeout, username, version).
 */
export interface OidcCallbackParams {
  /**
   * Aborts once the callback has run for `timeoutMS`, or sooner: when the connection's establishment was given up
   * (connectTimeoutMS, say), or, reauthenticating, once the command's timeoutMS (default socketTimeoutMS) elapsed.
   */
  readonly timeoutContext: AbortSignal;
  /**
   * How long the callback may run, in ms (an integer from 1 to 60000): the time left to the deadline that applies
   * (establishing a connection: its connectTimeoutMS; reauthenticating after 391: the command's timeoutMS, default
   * socketTimeoutMS), capped at 60000 ({@link OIDC_CALLBACK_TIMEOUT_MS}), which is the value when no deadline applies
   * (that timeout 0). `timeoutContext` aborts once it elapses (or sooner, when the connection is given up otherwise).
   */
  readonly timeoutMS: number;
  /** The credentials' user name, if any. */
  readonly username: string | undefined;
  /** The callback API version: {@link OIDC_CALLBACK_VERSION} (1). */
  readonly version: number;
}

/**
 * What an {@link OidcCallback} returns. Other fields are ignored, so more may be read in later versions.
 *
 * Source: auth spec, "OIDC Callback" (accessToken; expiresIn, a missing value read as infinite; negative: an error).
 */
export interface OidcCredential {
  /** The access token (a JWT), a non-empty string; sent as is, never validated here. */
  accessToken: string;
  /** Seconds until it expires; undefined for no known expiry. Must not be negative. Not used for caching yet. */
  expiresInSeconds?: number | undefined;
}

/**
 * The `OIDC_CALLBACK` mechanism property: returns (or resolves to) an access token. Called for the first connection of
 * a credentials object and after the server refused the cached token, never twice at once, at least
 * {@link OIDC_MIN_CALL_INTERVAL_MS} apart; its result is cached and shared by the connections of those credentials.
 * It should give up when `params.timeoutContext` aborts; authentication fails then anyway.
 *
 * Source: auth spec, "OIDC Callback".
 */
export type OidcCallback = (params: OidcCallbackParams) => OidcCredential | Promise<OidcCredential>;

export { OIDC_DEFAULT_ALLOWED_HOSTS } from './credentials';

/**
 * How long an {@link OidcHumanCallback} may run, in ms: 300000 (5 minutes, for the sign-in a person completes).
 * Neither connectTimeoutMS (establishing a connection) nor a command's timeoutMS (reauthenticating after 391) shortens
 * it: that deadline is held while the callback runs (or another connection's call of it is awaited) and resumes after
 * it, with what it had left, for the steps that talk to the server.
 *
 * Source: auth spec, "OIDC Human Callback" (the timeout duration MUST be 5 minutes).
 */
export const OIDC_HUMAN_CALLBACK_TIMEOUT_MS = 300_000;

/**
 * The identity provider's information, as the server gives it in the two-step conversation's first reply. A reply
 * whose issuer is empty (or only white space) or not a URL, or whose clientId is empty (or only white space), fails
 * the authentication with an AuthenticationError before the callback is called.
 *
 * Source: auth spec, "Two-Step" (IdpInfo), "OIDC Human Callback".
 */
export interface IdpInfo {
  /** The issuer URI of the identity provider (the `iss` of its tokens): an absolute URL. */
  readonly issuer: string;
  /**
   * The client id to sign in with at that provider (never empty nor only white space); undefined when the server
   * gives none (a machine user's IdP).
   */
  readonly clientId: string | undefined;
  /** Extra scopes to request, if any. */
  readonly requestScopes?: readonly string[] | undefined;
}

/**
 * What an {@link OidcHumanCallback} is given: the {@link OidcCallbackParams}, the IdpInfo and the cached refresh
 * token, if any. Its `timeoutMS` is {@link OIDC_HUMAN_CALLBACK_TIMEOUT_MS} (300000): connectTimeoutMS, or
 * reauthenticating the command's timeoutMS, is held while it runs, so neither shortens it nor aborts `timeoutContext`;
 * the connection given up otherwise (its pool closed) still does.
 *
 * Source: auth spec, "OIDC Human Callback".
 */
export interface OidcHumanCallbackParams extends OidcCallbackParams {
  /** The identity provider to sign in with (from the server's two-step reply, cached per credentials object). */
  readonly idpInfo: IdpInfo;
  /** The refresh token the callback returned before, when one is cached; undefined for a fresh sign-in. A secret. */
  readonly refreshToken: string | undefined;
}

/**
 * What an {@link OidcHumanCallback} returns: an {@link OidcCredential} and optionally a refresh token (a non-empty
 * string), cached and given to the next call. Other fields are ignored.
 *
 * Source: auth spec, "OIDC Human Callback".
 */
export interface OidcHumanCredential extends OidcCredential {
  /** A refresh token for the next call, if the provider issued one; a secret, never shown. */
  refreshToken?: string | undefined;
}

/**
 * The `OIDC_HUMAN_CALLBACK` mechanism property: signs the user in at `params.idpInfo` (with `params.refreshToken`
 * when given) and returns (or resolves to) the access token. Called once the server gave the IdpInfo (the two-step
 * conversation), with the refresh token once one is cached, and again after the server refused the token or asked
 * for reauthentication; never twice at once for one credentials object, at least {@link OIDC_MIN_CALL_INTERVAL_MS}
 * apart; never for a host `ALLOWED_HOSTS` does not list ({@link OidcHostNotAllowedError}). Not with `OIDC_CALLBACK`
 * or `ENVIRONMENT`: credentials with both are refused (InvalidOptionError).
 *
 * Source: auth spec, "OIDC Human Callback", "Human Authentication Flow".
 */
export type OidcHumanCallback = (params: OidcHumanCallbackParams) => OidcHumanCredential | Promise<OidcHumanCredential>;

export { OidcHostNotAllowedError } from '../errors';

/**
 * Whether `host` matches one of `patterns` (ALLOWED_HOSTS): equal, or under a `*.` pattern's domain (any depth),
 * without regard to case; IPv6 brackets are ignored, and IPv6 addresses compare in their canonical form (`::1` matches
 * `0:0:0:0:0:0:0:1` and `[::1]`). A host holding a control character (U+0000 to U+001F, U+007F)
 * matches none: the resolver reads `evil.com\0.mongodb.net` as evil.com.
 */
export function oidcHostAllowed(host: string, patterns: readonly string[]): boolean {
  if (/[\x00-\x1f\x7f]/.test(host)) return false;
  const name = hostForm(host);
  return patterns.some((pattern) => {
    const p = hostForm(pattern);
    return p.startsWith('*.') ? name.endsWith(p.slice(1)) && name.length > p.length - 1 : name === p;
  });
}

/**
 * `host` as hosts are compared: lower case, without IPv6 brackets, an IPv6 address in its canonical text form (RFC
 * 5952, as the address of a pool is written): `[::1]`, `0:0:0:0:0:0:0:1` and `::1` are one host.
 */
function hostForm(host: string): string {
  const bare = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (!isIPv6(bare)) return bare;
  try {
    return new SocketAddress({ address: bare, family: 'ipv6' }).address;
  } catch {
    return bare;
  }
}

/**
 * The base URLs of the metadata endpoints the `azure` and `gcp` environments ask. Tests point them at a local server.
 *
 * @internal Not exported from the package.
 */
export const oidcMetadataEndpoints = { azure: 'http://169.254.169.254', gcp: 'http://metadata' };

/** The token cache of one credentials object (the auth spec's Client Cache), and the state of its token source. */
class TokenCache {
  /** The most recent access token; undefined when none or invalidated. */
  token: string | undefined;
  /** Human workflow: the IdpInfo the server gave. */
  idpInfo: IdpInfo | undefined;
  /** Human workflow: the refresh token the callback returned last, if any (a secret). */
  refreshToken: string | undefined;
  /** The call of the token source in progress, if any: the others wait for it rather than call again. */
  private pending: Promise<string> | undefined;
  /** When the token source was last called (performance.now(), ms). */
  private lastCall = -Infinity;

  /**
   * The cached token (`cached: true`), else one from `source`: waits for a call in progress (its deadline held by
   * `hold`, if given, meanwhile), else calls it (after the 100 ms interval), caches and returns its token.
   */
  async get(source: () => Promise<string>, signal?: AbortSignal, hold?: () => () => void): Promise<{ token: string; cached: boolean }> {
    for (;;) {
      if (this.token !== undefined) return { token: this.token, cached: true };
      if (this.pending === undefined) break;
      // Another connection is fetching: its token, once cached, is ours too (a failed call: try our own). Our own
      // signal still ends the wait: that call may run for up to its own timeoutMS (60000 ms at most; a human callback
      // 300000). `hold`: the
      // deadline is held meanwhile (another connection's human sign-in).
      const resume = hold?.();
      try {
        await untilAborted(this.pending.catch(() => undefined), signal);
      } finally {
        resume?.();
      }
    }
    signal?.throwIfAborted();
    const call = (async () => {
      // A Node timer may fire up to a millisecond early on performance.now()'s clock (whole ms, the loop's cached
      // time): waited again until the interval has passed.
      let wait: number;
      while ((wait = this.lastCall + OIDC_MIN_CALL_INTERVAL_MS - performance.now()) > 0) await new Promise((resolve) => setTimeout(resolve, Math.ceil(wait)));
      this.lastCall = performance.now();
      return source();
    })();
    this.pending = call;
    try {
      const token = await call;
      this.token = token;
      return { token, cached: false };
    } finally {
      this.lastCall = performance.now();
      if (this.pending === call) this.pending = undefined;
    }
  }

  /** Forgets the cached token if it is `token` (compare-and-clear: a newer token stays). */
  invalidate(token: string | undefined): void {
    if (token !== undefined && this.token === token) this.token = undefined;
  }
}

const caches = new WeakMap<MongoCredentials, TokenCache>();

/** The token cache of `credentials` (created on first use). */
function cacheOf(credentials: MongoCredentials): TokenCache {
  let cache = caches.get(credentials);
  if (cache === undefined) caches.set(credentials, (cache = new TokenCache()));
  return cache;
}

/**
 * The token `credentials` hold cached, if any (for tests and diagnostics; the token is a secret: never log it).
 *
 * @internal Not exported from the package.
 */
export function cachedOidcToken(credentials: MongoCredentials): string | undefined {
  return caches.get(credentials)?.token;
}

/** The mechanism properties of `credentials`. */
function propertiesOf(credentials: MongoCredentials): Readonly<Record<string, unknown>> {
  return credentials.mechanismProperties;
}

/** An AuthenticationError naming the user and mechanism (never the token). */
function failure(credentials: MongoCredentials, why: string, cause?: unknown): AuthenticationError {
  const who = credentials.username === undefined ? 'no user name' : `user "${credentials.username}"`;
  return new AuthenticationError(`Authentication failed for ${who} on "${credentials.source}" with MONGODB-OIDC: ${why}`, cause);
}

/**
 * The `timeoutMS` of a call of the token source: what `remainingMS` (the time left to the deadline that applies) gives,
 * rounded down (never more than is left), at least 1 and at most {@link OIDC_CALLBACK_TIMEOUT_MS}; that maximum when no
 * deadline applies.
 */
function callTimeoutMS(remainingMS: (() => number) | undefined, maxMS = OIDC_CALLBACK_TIMEOUT_MS): number {
  const left = remainingMS?.();
  if (left === undefined || !(left < maxMS)) return maxMS;
  return Math.max(1, Math.floor(left));
}

/**
 * Runs `fetch` with a `timeoutContext` aborting when `signal` aborts, or after its `timeoutMS` ({@link callTimeoutMS}
 * of `remainingMS`) when that is 60000 (a shorter one is the time left before `signal` aborts), and checks what it
 * returns.
 */
async function callSource(credentials: MongoCredentials, what: string, fetch: (params: OidcCallbackParams) => OidcCredential | Promise<OidcCredential>, signal: AbortSignal | undefined, remainingMS: (() => number) | undefined): Promise<string> {
  return (await callCredential(credentials, what, fetch, signal, remainingMS)).accessToken;
}

/** {@link callSource}, resolving to the checked result; `extra` is added to the params, `maxMS` caps `timeoutMS`. */
async function callCredential(credentials: MongoCredentials, what: string, fetch: (params: never) => OidcHumanCredential | Promise<OidcHumanCredential>, signal: AbortSignal | undefined, remainingMS: (() => number) | undefined, extra: object = {}, maxMS = OIDC_CALLBACK_TIMEOUT_MS): Promise<{ accessToken: string; refreshToken: string | undefined }> {
  const controller = new AbortController();
  // Read as the call starts, after any wait for another call or for the 100 ms interval.
  const timeoutMS = callTimeoutMS(remainingMS, maxMS);
  // Within 60000 ms, `signal` itself aborts as `timeoutMS` elapses (its deadline's error: a connectTimeoutMS timeout,
  // the command's timeoutMS): no timer of our own then, which would only end the call a rounding earlier.
  const timer = timeoutMS < maxMS && signal !== undefined
    ? undefined
    : setTimeout(() => {
      controller.abort(failure(credentials, `the ${what} did not return within ${timeoutMS} ms`));
    }, timeoutMS);
  const onAbort = (): void => controller.abort(signal!.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    signal?.throwIfAborted();
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
    });
    aborted.catch(() => undefined);
    const params = Object.freeze({ ...extra, timeoutContext: controller.signal, timeoutMS, username: credentials.username, version: OIDC_CALLBACK_VERSION });
    let result: OidcHumanCredential;
    try {
      result = await Promise.race([Promise.resolve().then(() => fetch(params as never)), aborted]);
    } catch (error) {
      if (controller.signal.aborted) throw controller.signal.reason;
      throw failure(credentials, `the ${what} failed: ${error instanceof Error ? error.message : String(error)}`, error);
    }
    const token: unknown = result !== null && typeof result === 'object' ? result.accessToken : undefined;
    if (typeof token !== 'string' || token === '') throw failure(credentials, `the ${what} returned no accessToken (a non-empty string)`);
    const expires: unknown = result.expiresInSeconds;
    if (expires !== undefined && (typeof expires !== 'number' || !(expires >= 0))) {
      throw failure(credentials, `the ${what} returned expiresInSeconds ${String(expires)}: a number >= 0, or none, is required`);
    }
    const refresh: unknown = result.refreshToken;
    if (refresh !== undefined && (typeof refresh !== 'string' || refresh === '')) throw failure(credentials, `the ${what} returned a refreshToken that is not a non-empty string`);
    return { accessToken: token, refreshToken: refresh };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** The token source of `credentials`: its OIDC_CALLBACK or built-in ENVIRONMENT. */
function tokenSource(credentials: MongoCredentials): { what: string; fetch: (params: OidcCallbackParams) => Promise<OidcCredential> | OidcCredential } {
  const properties = propertiesOf(credentials);
  const callback = properties.OIDC_CALLBACK;
  if (typeof callback === 'function') return { what: 'OIDC_CALLBACK', fetch: callback as OidcCallback };
  const environment = properties.ENVIRONMENT;
  const resource = typeof properties.TOKEN_RESOURCE === 'string' ? properties.TOKEN_RESOURCE : '';
  switch (environment) {
    case 'test':
      return { what: 'ENVIRONMENT test', fetch: () => fileToken('OIDC_TOKEN_FILE', process.env.OIDC_TOKEN_FILE) };
    case 'k8s': {
      const [name, file] = process.env.AZURE_FEDERATED_TOKEN_FILE !== undefined
        ? ['AZURE_FEDERATED_TOKEN_FILE', process.env.AZURE_FEDERATED_TOKEN_FILE]
        : process.env.AWS_WEB_IDENTITY_TOKEN_FILE !== undefined
          ? ['AWS_WEB_IDENTITY_TOKEN_FILE', process.env.AWS_WEB_IDENTITY_TOKEN_FILE]
          : ['the service account token', '/var/run/secrets/kubernetes.io/serviceaccount/token'];
      return { what: 'ENVIRONMENT k8s', fetch: () => fileToken(name, file) };
    }
    case 'azure':
      return {
        what: 'ENVIRONMENT azure',
        fetch: async ({ timeoutContext, username }) => {
          const url = new URL('/metadata/identity/oauth2/token', oidcMetadataEndpoints.azure);
          url.searchParams.set('api-version', '2018-02-01');
          url.searchParams.set('resource', resource);
          if (username !== undefined) url.searchParams.set('client_id', username);
          const body = await httpGet(url, { Accept: 'application/json', Metadata: 'true' }, timeoutContext, 'the Azure Instance Metadata Service');
          let parsed: unknown;
          try {
            parsed = JSON.parse(body);
          } catch {
            throw new Error('the Azure Instance Metadata Service answered with a body that is not JSON');
          }
          const token = (parsed as { access_token?: unknown } | null)?.access_token;
          if (typeof token !== 'string') throw new Error('the Azure Instance Metadata Service answered without an access_token');
          const expiresIn = Number((parsed as { expires_in?: unknown }).expires_in);
          return { accessToken: token, expiresInSeconds: Number.isFinite(expiresIn) && expiresIn >= 0 ? expiresIn : undefined };
        },
      };
    case 'gcp':
      return {
        what: 'ENVIRONMENT gcp',
        fetch: async ({ timeoutContext }) => {
          const url = new URL('/computeMetadata/v1/instance/service-accounts/default/identity', oidcMetadataEndpoints.gcp);
          url.searchParams.set('audience', resource);
          return { accessToken: await httpGet(url, { 'Metadata-Flavor': 'Google' }, timeoutContext, 'the Google Cloud metadata server') };
        },
      };
    default:
      return { what: 'token source', fetch: () => { throw new Error('neither OIDC_CALLBACK nor ENVIRONMENT is set'); } };
  }
}

/**
 * The contents of the token file `file` (named by `name`), as given: a regular file of at most 64 KiB (see
 * {@link readTokenFile}); a FIFO or a device is refused unread.
 */
async function fileToken(name: string, file: string | undefined): Promise<OidcCredential> {
  if (file === undefined || file === '') throw new Error(`${name} is not set`);
  const fail = (why: string, cause?: Error): Error => new Error(cause === undefined ? why : `${why}: ${cause.message}`);
  return { accessToken: await readTokenFile(file, `the token file of ${name}`, fail) };
}

/**
 * GETs `url` with `headers`; resolves to the body of a 200 answer (at most 1 MiB: a larger one is an error, read no
 * further). Any other status is an error quoting the body (at
 * most 1000 characters): a metadata service's non-200 body says why, and holds no token. A redirect is such a status,
 * never followed: a metadata service does not redirect, and following one would send its headers to, and take a
 * token from, another host.
 */
async function httpGet(url: URL, headers: Record<string, string>, signal: AbortSignal, what: string): Promise<string> {
  const response = await fetch(url, { headers, signal, redirect: 'manual' });
  const body = response.body === null ? '' : await boundedText(response.body, MAX_METADATA_BODY_BYTES, () => new Error(`${what} answered HTTP ${response.status} with more than ${MAX_METADATA_BODY_BYTES} bytes`));
  if (response.status !== 200) throw new Error(`${what} answered HTTP ${response.status}: ${body.slice(0, 1000)}`);
  return body;
}

/**
 * The most bytes a metadata service's answer may hold: 1 MiB. An access token is a few KiB; a larger answer is an
 * error, read no further.
 */
const MAX_METADATA_BODY_BYTES = 1024 * 1024;

/** The saslStart of the one-step conversation, as the auth spec shows it (no autoAuthorize), holding `token` (a secret: sent, never shown). */
function jwtStart(token: string): Document {
  return { saslStart: 1, mechanism: OIDC_MECHANISM, payload: new Binary(BSON.serialize({ jwt: token })) };
}

/**
 * The speculative first message for OIDC credentials: the one-step saslStart (with `db: '$external'`) holding the
 * cached token, and that token; undefined when no token is cached, or (human workflow) when `host` matches none of
 * ALLOWED_HOSTS (nothing speculative is sent then).
 *
 * Source: auth spec, "MONGODB-OIDC" ("Speculative Authentication": MUST implement it; MUST NOT attempt it without a
 * cached access token).
 */
export function oidcSpeculativeStart(credentials: MongoCredentials, host?: string): { readonly mechanism: 'MONGODB-OIDC'; readonly speculativeAuthenticate: Document; readonly token: string } | undefined {
  const token = caches.get(credentials)?.token;
  if (token !== undefined && typeof propertiesOf(credentials).OIDC_HUMAN_CALLBACK === 'function') {
    try {
      checkHost(credentials, host);
    } catch {
      return undefined;
    }
  }
  if (token === undefined) return undefined;
  return { mechanism: OIDC_MECHANISM, speculativeAuthenticate: { ...jwtStart(token), db: EXTERNAL_SOURCE }, token };
}

/** Options of {@link oidcAuthenticate}. */
export interface OidcOptions {
  /** Ends the authentication: the callback's `timeoutContext` aborts, and the Promise rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /**
   * The time left, in ms, to the deadline `signal` aborts at (establishing a connection: its connectTimeoutMS); the
   * callback's `timeoutMS` is that, at most 60000, and its `timeoutContext` aborts with `signal` (without `signal`, on
   * a timer of that length). Undefined when no deadline applies: 60000. The OIDC_HUMAN_CALLBACK's is 300000 whatever
   * is left when `holdDeadline` is given (the deadline is held instead), else what is left, at most 300000.
   */
  remainingMS?: (() => number) | undefined;
  /** The token the handshake carried speculatively ({@link oidcSpeculativeStart}). */
  speculativeToken?: string | undefined;
  /** The handshake reply's `speculativeAuthenticate`, when the handshake carried one. */
  speculativeReply?: unknown;
  /**
   * The host connected to (a name or IP address, no port): the human workflow checks it against `ALLOWED_HOSTS`
   * before anything else. Undefined: not checked (no host is known).
   */
  host?: string | undefined;
  /**
   * Holds the deadline `signal` aborts at (establishing a connection: connectTimeoutMS) and returns what resumes it:
   * the human workflow holds it while the OIDC_HUMAN_CALLBACK runs, or another connection's call of it is awaited,
   * as that callback is given 5 minutes whatever the deadline ({@link OIDC_HUMAN_CALLBACK_TIMEOUT_MS}). `signal`
   * aborting otherwise (the pool closed) still ends the callback. Undefined: nothing to hold.
   */
  holdDeadline?: (() => () => void) | undefined;
}

/**
 * Authenticates with MONGODB-OIDC as `credentials` and resolves to the token the connection authenticated with (its
 * Connection Cache). When the handshake's speculative saslStart was answered `done: true`, that is all; otherwise the
 * one-step conversation runs: with the cached token (refused with AuthenticationFailed, 18: invalidated, and a fresh
 * token fetched and tried once), else with a fresh token from the callback or environment. With OIDC_HUMAN_CALLBACK,
 * the human workflow: cached access token, else the refresh token, else the two-step conversation (see the module).
 *
 * @throws {AuthenticationError} (rejection) when the token source fails, times out (its `timeoutMS`: the time
 *   `options.remainingMS` gives, at most 60000 ms; 300000 for the human callback), returns no token, a refreshToken
 *   that is not a non-empty string, or a
 *   negative expiry, or the server refuses the token (cause: its MongoServerError, each echo of the token replaced by `<access token not shown>`);
 *   messages never hold the token.
 * @throws {OidcHostNotAllowedError} (rejection; an AuthenticationError) with OIDC_HUMAN_CALLBACK, for an
 *   `options.host` its ALLOWED_HOSTS does not match: before anything is sent or any callback called.
 * @throws `options.signal.reason` (rejection) once the signal aborts.
 *
 * Source: auth spec, "MONGODB-OIDC" ("One-Step", "Two-Step", "Human Authentication Flow", "Credential Caching" ("Authentication"), "Speculative
 * Authentication").
 */
export async function oidcAuthenticate(run: RunCommand, credentials: MongoCredentials, options: OidcOptions = {}): Promise<string> {
  const { signal, remainingMS, speculativeToken, speculativeReply, host, holdDeadline } = options;
  if (typeof propertiesOf(credentials).OIDC_HUMAN_CALLBACK === 'function') checkHost(credentials, host);
  if (speculativeToken !== undefined && speculativeReply !== null && typeof speculativeReply === 'object' && (speculativeReply as Document).done === true) {
    return speculativeToken;
  }
  // The speculative attempt failed: nothing is invalidated (auth spec: MUST NOT), the standard conversation runs.
  return conversation(run, credentials, signal, remainingMS, holdDeadline);
}

/**
 * Reauthenticates a connection that authenticated with `connectionToken` (ReauthenticationRequired, 391, on one of
 * its commands): that token is invalidated in the cache (only if it is still the cached one), then the one-step
 * conversation runs as for a new connection, without a hello (human workflow: its flow, refresh token first, after
 * `host` is checked against ALLOWED_HOSTS). Resolves to the connection's new token. `signal`, `remainingMS`, `host` and
 * `holdDeadline`: as {@link OidcOptions} (the command's timeoutMS).
 *
 * @throws as {@link oidcAuthenticate}; {@link OidcHostNotAllowedError} for a `host` ALLOWED_HOSTS does not match.
 *
 * Source: auth spec, "Reauthentication", "MONGODB-OIDC" ("Reauthentication").
 */
export async function oidcReauthenticate(run: RunCommand, credentials: MongoCredentials, connectionToken: string | undefined, signal?: AbortSignal, remainingMS?: () => number, host?: string, holdDeadline?: () => () => void): Promise<string> {
  if (typeof propertiesOf(credentials).OIDC_HUMAN_CALLBACK === 'function') checkHost(credentials, host);
  cacheOf(credentials).invalidate(connectionToken);
  return conversation(run, credentials, signal, remainingMS, holdDeadline);
}

/** The conversation of the workflow `credentials` ask for. */
function conversation(run: RunCommand, credentials: MongoCredentials, signal: AbortSignal | undefined, remainingMS: (() => number) | undefined, holdDeadline?: () => () => void): Promise<string> {
  const human = propertiesOf(credentials).OIDC_HUMAN_CALLBACK;
  return typeof human === 'function' ? humanFlow(run, credentials, human as OidcHumanCallback, signal, remainingMS, holdDeadline) : oneStep(run, credentials, signal, remainingMS);
}

/** @throws {OidcHostNotAllowedError} when `host` matches none of the credentials' ALLOWED_HOSTS. */
function checkHost(credentials: MongoCredentials, host: string | undefined): void {
  if (host === undefined) return;
  const listed = propertiesOf(credentials).ALLOWED_HOSTS;
  const patterns = Array.isArray(listed) ? (listed as string[]) : OIDC_DEFAULT_ALLOWED_HOSTS;
  if (!oidcHostAllowed(host, patterns)) throw new OidcHostNotAllowedError(host);
}

/** Whether `error` is the server refusing the token (AuthenticationFailed, 18). */
function refused(error: unknown): boolean {
  return error instanceof AuthenticationError && error.cause instanceof MongoServerError && error.cause.code === 18;
}

/**
 * The IdpInfo of a two-step reply's payload: an issuer that is a URL, a clientId that is absent or neither empty nor
 * only white space.
 *
 * @throws {AuthenticationError} for a payload that holds no IdpInfo, or one whose issuer is empty (or only white
 *   space) or not a URL, or whose clientId is empty (or only white space); the message quotes none of the payload.
 */
function idpInfoOf(credentials: MongoCredentials, reply: Document): IdpInfo {
  const payload: unknown = reply.payload;
  let doc: Document | undefined;
  try {
    if (payload instanceof Binary) doc = BSON.deserialize(Buffer.from(payload.buffer.buffer, payload.buffer.byteOffset, payload.position));
  } catch {
    doc = undefined;
  }
  const issuer: unknown = doc?.issuer;
  const clientId: unknown = doc?.clientId;
  const scopes: unknown = doc?.requestScopes;
  if (typeof issuer !== 'string' || (clientId !== undefined && clientId !== null && typeof clientId !== 'string') || (scopes !== undefined && scopes !== null && !(Array.isArray(scopes) && scopes.every((x) => typeof x === 'string')))) {
    throw failure(credentials, 'the server\'s reply to the principal step holds no IdpInfo { issuer, clientId?, requestScopes? }');
  }
  // Auth spec, "Two-Step": the issuer is the URL of the Authentication Server (the `iss` of its tokens), the clientId
  // an id at it: the callback could sign in nowhere with an empty one. The values are not quoted: nothing of the
  // server's reply goes into the message.
  const why = issuer.trim() === ''
    ? 'issuer is empty'
    : !URL.canParse(issuer)
      ? 'issuer is not a URL'
      : undefined;
  if (why !== undefined) throw failure(credentials, `the server's IdpInfo's ${why}: it must be the URL of the identity provider (auth spec, "Two-Step")`);
  if (typeof clientId === 'string' && clientId.trim() === '') {
    throw failure(credentials, 'the server\'s IdpInfo\'s clientId is empty: it must be absent or the client\'s id at the identity provider (auth spec, "Two-Step")');
  }
  return Object.freeze({ issuer, clientId: typeof clientId === 'string' ? clientId : undefined, requestScopes: Array.isArray(scopes) ? Object.freeze([...(scopes as string[])]) : undefined });
}

/**
 * The human workflow's authentication of a connection: the cached access token (one-step); else, with a cached
 * refresh token, a token from the callback given it (one-step); else the two-step conversation: the principal step
 * (`n`: the user name, if any), the callback given the server's IdpInfo and no refresh token, the JWT step. A token
 * refused (18) is invalidated (a refreshed one's refresh token cleared too) and the flow restarts; the two-step's
 * refusal (its token invalidated too), and any other error, is raised.
 */
async function humanFlow(run: RunCommand, credentials: MongoCredentials, callback: OidcHumanCallback, signal: AbortSignal | undefined, remainingMS: (() => number) | undefined, holdDeadline?: () => () => void): Promise<string> {
  const cache = cacheOf(credentials);
  const fail = (why: string, cause?: unknown): never => {
    throw failure(credentials, why, cause);
  };
  for (let attempt = 0; ; attempt++) {
    signal?.throwIfAborted();
    let twoStep: { conversationId: unknown } | undefined;
    let refreshed = false;
    const { token, cached } = await cache.get(async () => {
      twoStep = undefined;
      refreshed = false;
      let idpInfo = cache.idpInfo;
      const refreshToken = cache.refreshToken;
      if (idpInfo === undefined || refreshToken === undefined) {
        const principal = credentials.username === undefined ? {} : { n: credentials.username };
        const start = { saslStart: 1, mechanism: OIDC_MECHANISM, payload: new Binary(BSON.serialize(principal)) };
        const reply = await runStep(run, credentials.source, start, 'saslStart', fail);
        cache.idpInfo = idpInfo = idpInfoOf(credentials, reply);
        twoStep = { conversationId: reply.conversationId };
      } else {
        refreshed = true;
      }
      // Auth spec, "OIDC Human Callback": 5 minutes, for a person to sign in, not subject to the deadline (held
      // meanwhile); without a way to hold it, what it has left still bounds the call.
      const resume = holdDeadline?.();
      let result: { accessToken: string; refreshToken: string | undefined };
      try {
        result = await callCredential(credentials, 'OIDC_HUMAN_CALLBACK', callback, signal, holdDeadline === undefined ? remainingMS : undefined, { idpInfo, refreshToken: twoStep === undefined ? refreshToken : undefined }, OIDC_HUMAN_CALLBACK_TIMEOUT_MS);
      } finally {
        resume?.();
      }
      // A fresh sign-in without a refresh token leaves none cached; a refresh without a new one keeps the old one.
      if (result.refreshToken !== undefined || twoStep !== undefined) cache.refreshToken = result.refreshToken;
      return result.accessToken;
    }, signal, holdDeadline);
    signal?.throwIfAborted();
    try {
      if (twoStep !== undefined && !cached) {
        const jwtStep = { saslContinue: 1, conversationId: (twoStep as { conversationId: unknown }).conversationId, payload: new Binary(BSON.serialize({ jwt: token })) };
        const reply = await runStep(withoutEcho(run, token, '<access token not shown>'), credentials.source, jwtStep, 'saslContinue', fail);
        if (reply.done !== true) fail('the server did not end the conversation after the JWT step');
      } else {
        await send(run, credentials, token);
      }
      return token;
    } catch (error) {
      if (!refused(error)) throw error;
      // A refused token is never offered again (speculatively either); a fresh sign-in's refusal is the user's error.
      cache.invalidate(token);
      if ((twoStep !== undefined && !cached) || attempt >= 3) throw error;
      if (refreshed && !cached) cache.refreshToken = undefined;
    }
  }
}

/** The auth spec's `auth(connection)`: resolves to the token the connection authenticated with. */
async function oneStep(run: RunCommand, credentials: MongoCredentials, signal: AbortSignal | undefined, remainingMS: (() => number) | undefined): Promise<string> {
  const cache = cacheOf(credentials);
  const { what, fetch } = tokenSource(credentials);
  const source = (): Promise<string> => callSource(credentials, what, fetch, signal, remainingMS);
  signal?.throwIfAborted();
  let { token, cached } = await cache.get(source, signal);
  if (cached) {
    try {
      await send(run, credentials, token);
      return token;
    } catch (error) {
      if (!(error instanceof AuthenticationError && error.cause instanceof MongoServerError && error.cause.code === 18)) throw error;
      cache.invalidate(token);
      ({ token } = await cache.get(source, signal));
    }
  }
  signal?.throwIfAborted();
  await send(run, credentials, token);
  return token;
}

/** Sends the one-step saslStart with `token`. */
async function send(run: RunCommand, credentials: MongoCredentials, token: string): Promise<void> {
  const fail = (why: string, cause?: unknown): never => {
    throw failure(credentials, why, cause);
  };
  const reply = await runStep(withoutEcho(run, token, '<access token not shown>'), credentials.source, jwtStart(token), 'saslStart', fail);
  if (reply.done !== true) fail('the server did not end the conversation after the saslStart (the one-step conversation has one step)');
}
