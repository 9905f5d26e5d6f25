/**
 * The endpoint's MONGODB-OIDC side, as a mongod configured with an OIDC identity provider answers it. The endpoint is
 * its own stand-in for the IdP: it accepts the tokens of a table, and JWTs signed (HS256) with a key it is given, and
 * refuses every other token.
 *
 * Source: auth spec, "MONGODB-OIDC" ("One-Step", "Two-Step", "Speculative Authentication", "Reauthentication").
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Binary, BSON, type Document } from 'bson';
import { EXTERNAL_SOURCE } from '../auth/credentials';
import { InvalidOptionError } from '../errors';

/**
 * The `oidc` option of an EmbeddedServer: which access tokens it accepts. At least one of `tokens` and `signingKey`.
 *
 * Source: extension (a mongod's `oidcIdentityProviders`; the IdP's signature check is the HMAC of `signingKey`).
 */
export interface EmbeddedOidcOptions {
  /** Tokens accepted as they are: token to `{ user, expiresAtMS? }` (expiry: epoch ms; none: never expires). */
  tokens?: Readonly<Record<string, {
    /** The user the token authenticates, in `$external`. */
    readonly user: string;
    /** When the token expires (epoch ms); none: never. */
    readonly expiresAtMS?: number | undefined;
  }>> | undefined;
  /**
   * A key: JWTs (`header.payload.signature`, base64url) signed with HMAC-SHA256 under it are accepted, their `sub`
   * the user and `exp` (epoch seconds), if any, the expiry. See {@link signOidcToken}.
   */
  signingKey?: string | Buffer | undefined;
  /**
   * The IdP info a saslStart without `jwt` (the two-step conversation's principal step) is answered with. Default
   * issuer `https://idp.invalid`, clientId `rxcmap`. A function picks it by the principal name `n` (undefined when the
   * step has none), as a mongod with several identity providers does; undefined from it refuses the step with
   * AuthenticationFailed (18).
   */
  idpInfo?: ((principal: string | undefined) => EmbeddedIdpInfo | undefined) | EmbeddedIdpInfo | undefined;
}

/** An identity provider as the endpoint names it in the two-step conversation (see {@link EmbeddedOidcOptions.idpInfo}). */
export interface EmbeddedIdpInfo {
    /** The identity provider's issuer URI. */
    readonly issuer: string;
    /** The client id a human workflow would use with it; none for a machine user's provider. */
    readonly clientId?: string | undefined;
    /** The scopes to request, if any. */
    readonly requestScopes?: readonly string[] | undefined;
}

/**
 * A JWT signed HS256 with `key`, for an EmbeddedServer given that `signingKey`: `sub` is the user, `exp` the expiry
 * in epoch seconds (omit: none).
 *
 * Source: RFC 7519 (JWT), RFC 7515 (JWS, HS256).
 */
export function signOidcToken(key: string | Buffer, claims: { sub: string; exp?: number | undefined }): string {
  const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(claims)}`;
  return `${unsigned}.${createHmac('sha256', key).update(unsigned).digest('base64url')}`;
}

/** What an OIDC saslStart or saslContinue did: the reply, and the user and expiry once authenticated. */
export interface OidcOutcome {
  /** The reply to send (`ok: 1` or a refusal). */
  readonly reply: Document;
  /** The user (`$external.<sub>`) when the token was accepted. */
  readonly user?: string | undefined;
  /** When the accepted token expires (epoch ms), if it does. */
  readonly expiresAtMS?: number | undefined;
}

/** AuthenticationFailed, as a mongod refuses any bad token. */
const REFUSED: Document = { ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' };

/**
 * The MONGODB-OIDC conversations of an EmbeddedServer. Counts what it saw: {@link saslStarts},
 * {@link authentications}, {@link refusals}, {@link principalSteps}.
 */
export class OidcIdentities {
  /** OIDC saslStarts received (speculative ones included). */
  saslStarts = 0;
  /** Tokens accepted. */
  authentications = 0;
  /** Tokens refused (unknown, badly signed or expired). */
  refusals = 0;
  /** Principal steps (saslStarts without `jwt`: two-step conversations begun). */
  principalSteps = 0;

  /** @throws {InvalidOptionError} (option `oidc`) without `tokens` or `signingKey`. */
  constructor(private readonly options: EmbeddedOidcOptions) {
    if (options === null || typeof options !== 'object' || (options.tokens === undefined && options.signingKey === undefined)) {
      throw new InvalidOptionError('oidc', '<not shown>', 'an object { tokens?, signingKey?, idpInfo? } with tokens or signingKey');
    }
  }

  /**
   * A saslStart of MONGODB-OIDC on `db`: with a `jwt`, the one-step conversation (accepted: done); without (a
   * PrincipalStepRequest, `n` optional), the IdP info, `done: false`, for a saslContinue with the `jwt`.
   */
  start(db: string, command: Document): OidcOutcome & {
    /** Whether the reply is the IdP info (no `jwt` sent): the conversation's saslContinue then carries the token. */
    readonly awaitingJwt?: boolean;
  } {
    this.saslStarts++;
    if (db !== EXTERNAL_SOURCE) return { reply: { ok: 0, code: 2, codeName: 'BadValue', errmsg: 'MONGODB-OIDC must use the $external database' } };
    const payload = payloadOf(command);
    if (payload === undefined) return { reply: { ok: 0, code: 17, codeName: 'ProtocolError', errmsg: 'Invalid MONGODB-OIDC payload' } };
    if (payload.jwt === undefined) {
      this.principalSteps++;
      const given = this.options.idpInfo;
      const idp = typeof given === 'function' ? given(typeof payload.n === 'string' ? payload.n : undefined) : given ?? { issuer: 'https://idp.invalid', clientId: 'rxcmap' };
      if (idp === undefined) return { reply: { ...REFUSED } };
      return { reply: { conversationId: 1, done: false, payload: new Binary(BSON.serialize({ ...idp })), ok: 1 }, awaitingJwt: true };
    }
    return this.verify(payload.jwt);
  }

  /** The saslContinue of a two-step conversation: its `jwt` is verified. */
  continue(command: Document): OidcOutcome {
    const payload = payloadOf(command);
    return payload?.jwt === undefined ? { reply: { ...REFUSED } } : this.verify(payload.jwt);
  }

  private verify(token: unknown): OidcOutcome {
    const accepted = typeof token === 'string' ? this.identify(token) : undefined;
    if (accepted === undefined || (accepted.expiresAtMS !== undefined && accepted.expiresAtMS <= Date.now())) {
      this.refusals++;
      return { reply: { ...REFUSED } };
    }
    this.authentications++;
    return { reply: { conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 }, user: `${EXTERNAL_SOURCE}.${accepted.user}`, expiresAtMS: accepted.expiresAtMS };
  }

  private identify(token: string): { user: string; expiresAtMS?: number | undefined } | undefined {
    const listed = this.options.tokens !== undefined && Object.prototype.hasOwnProperty.call(this.options.tokens, token) ? this.options.tokens[token] : undefined;
    if (listed !== undefined) return listed;
    const key = this.options.signingKey;
    const parts = token.split('.');
    if (key === undefined || parts.length !== 3) return undefined;
    const expected = createHmac('sha256', key).update(`${parts[0]}.${parts[1]}`).digest();
    const given = Buffer.from(parts[2]!, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    try {
      const claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as { sub?: unknown; exp?: unknown };
      if (typeof claims.sub !== 'string') return undefined;
      return { user: claims.sub, expiresAtMS: typeof claims.exp === 'number' ? claims.exp * 1000 : undefined };
    } catch {
      return undefined;
    }
  }
}

/** The BSON document of a SASL command's payload, if it is one. */
function payloadOf(command: Document): Document | undefined {
  const payload: unknown = command.payload;
  if (!(payload instanceof Binary)) return undefined;
  try {
    return BSON.deserialize(Buffer.from(payload.buffer.buffer, payload.buffer.byteOffset, payload.position));
  } catch {
    return undefined;
  }
}
