/**
 * The Stable API: the API version a client declares, checked once and sent with every command of its connections.
 *
 * Source: Stable API spec ("MongoClient changes", "ServerApiVersion enumeration", "ServerApi class", "Sending Declared
 * API Version to the Server", "Command Syntax").
 */
import type { Document } from 'bson';
import { InvalidOptionError } from '../errors';
import { optionValue, rejectUnknownOptions, requireBoolean, requireOptionsObject, type ListsEveryOption } from '../options';

/**
 * The API versions this library knows, by name: `ServerApiVersion.v1` is `'1'`. A version not listed here is refused
 * (the spec's "Hardcode supported versions in drivers"); a later version is added as a new key, never by changing one.
 *
 * Source: Stable API spec, "ServerApiVersion enumeration".
 */
export const ServerApiVersion = Object.freeze({
  /** API version 1 (MongoDB 5.0 and later). */
  v1: '1',
} as const);

/** One of the {@link ServerApiVersion} values: `'1'`. Source: Stable API spec, "ServerApiVersion enumeration". */
export type ServerApiVersionId = (typeof ServerApiVersion)[keyof typeof ServerApiVersion];

/**
 * A declared API version: the `serverApi` option of a connection factory, pool, monitor or `connect()`. Never taken
 * from a connection string. Once given it is copied and frozen: changing the object afterwards changes nothing.
 *
 * Every command every connection sends (the handshake, authentication, monitoring hellos, the user's commands,
 * getMore included) then carries `apiVersion: version`, plus `apiStrict` and `apiDeprecationErrors` when, and only
 * when, given here (even when equal to the server's default, false). The handshake and monitoring use `hello`, never
 * the legacy hello.
 *
 * Source: Stable API spec, "ServerApi class", "Command Syntax", "Handshake behavior".
 */
export interface ServerApi {
  /** The API version: `'1'` ({@link ServerApiVersion}.v1); sent as `apiVersion`. Required. */
  readonly version: ServerApiVersionId;
  /** Sent as `apiStrict` when given: the server refuses commands outside the API version. Server default false. */
  readonly strict?: boolean | undefined;
  /** Sent as `apiDeprecationErrors` when given: the server refuses commands deprecated in the API version. Server default false. */
  readonly deprecationErrors?: boolean | undefined;
}

/** The keys of {@link ServerApi}. */
const SERVER_API_OPTION_NAMES = ['version', 'strict', 'deprecationErrors'] as const satisfies readonly (keyof ServerApi)[];
true satisfies ListsEveryOption<ServerApi, typeof SERVER_API_OPTION_NAMES>;

const VERSIONS: readonly unknown[] = Object.values(ServerApiVersion);

/** The copies {@link checkServerApi} returned: frozen, so passed on as they are, without reading them again. */
const CHECKED = new WeakSet<object>();

/** `checked`, remembered as a copy {@link checkServerApi} made. */
function remembered(checked: ServerApi): ServerApi {
  CHECKED.add(checked);
  return checked;
}

/**
 * Checks a {@link ServerApi} and returns a frozen copy of it holding only the fields given (each read once): an object
 * with no key but `version`, `strict` and `deprecationErrors`; `version` one of {@link ServerApiVersion}'s values
 * (`'1'`); `strict` and `deprecationErrors` booleans or absent. A version alone (`'1'`) stands for `{ version }`. A
 * copy it returned is returned as it is, unread: the front ends check the caller's object once and pass that copy on,
 * so that a getter or Proxy is read once and every connection declares what that reading said.
 *
 * @param value what was given.
 * @param path prefix of the option names in errors, e.g. `"connectionOptions."`.
 * @throws {InvalidOptionError} naming `serverApi` (not an object nor a known version), `serverApi.version` (missing, or an unknown
 *   version, with the versions allowed), `serverApi.strict` / `serverApi.deprecationErrors` (not a boolean), or an
 *   unknown key (with the closest known one).
 *
 * Source: Stable API spec, "ServerApi class" (a version MUST be specified; immutable), "ServerApiVersion enumeration"
 * (an unknown version MUST be a client-side error).
 */
export function checkServerApi(value: unknown, path = ''): ServerApi {
  const name = `${path}serverApi`;
  if (typeof value === 'object' && value !== null && CHECKED.has(value)) return value as ServerApi;
  // The version alone, as the official driver also takes it (`serverApi: ServerApiVersion.v1`).
  if (typeof value === 'string') {
    if (VERSIONS.includes(value)) return remembered(Object.freeze({ version: value as ServerApiVersionId }));
    throw new InvalidOptionError(name, value, `one of the API versions ${VERSIONS.map((v) => `'${String(v)}'`).join(', ')} (ServerApiVersion), or a { version, strict?, deprecationErrors? } object`);
  }
  const given = requireOptionsObject(name, value, `a { version: '1', strict?, deprecationErrors? } object, or the version alone (see ServerApiVersion)`, true);
  rejectUnknownOptions(given, SERVER_API_OPTION_NAMES, 'serverApi', `${name}.`);
  const version = optionValue(given as Partial<ServerApi>, 'version');
  if (!VERSIONS.includes(version)) {
    const allowed = `one of the API versions ${VERSIONS.map((v) => `'${String(v)}'`).join(', ')} (ServerApiVersion), a string`;
    throw new InvalidOptionError(`${name}.version`, version, allowed);
  }
  const strict = requireBoolean(`${name}.strict`, optionValue(given as Partial<ServerApi>, 'strict'));
  const deprecationErrors = requireBoolean(`${name}.deprecationErrors`, optionValue(given as Partial<ServerApi>, 'deprecationErrors'));
  const checked: { version: ServerApiVersionId; strict?: boolean; deprecationErrors?: boolean } = { version: version as ServerApiVersionId };
  if (strict !== undefined) checked.strict = strict;
  if (deprecationErrors !== undefined) checked.deprecationErrors = deprecationErrors;
  return remembered(Object.freeze(checked));
}

/**
 * The command fields of the Stable API, in the order they are sent: `apiVersion` (a string), `apiStrict` and
 * `apiDeprecationErrors` (booleans). The names a connection sends, a connection string ignores and the embedded
 * endpoint checks.
 *
 * Source: Stable API spec, "Command Syntax".
 */
export const API_PARAMETER_NAMES = Object.freeze(['apiVersion', 'apiStrict', 'apiDeprecationErrors'] as const);

/**
 * The command fields of a checked {@link ServerApi} (a frozen document): `apiVersion`, then `apiStrict` and
 * `apiDeprecationErrors` only when given.
 *
 * Source: Stable API spec, "Command Syntax".
 */
export function serverApiFields(serverApi: ServerApi): Readonly<Document> {
  const fields: Document = { apiVersion: serverApi.version };
  if (serverApi.strict !== undefined) fields.apiStrict = serverApi.strict;
  if (serverApi.deprecationErrors !== undefined) fields.apiDeprecationErrors = serverApi.deprecationErrors;
  return Object.freeze(fields);
}
