/**
 * The initial handshake: the command that opens every connection (legacy hello with `helloOk`, or `hello` in
 * load-balanced mode), with the client metadata, offered compressors and mechanism negotiation it carries.
 *
 * Source: handshake spec, "Connection handshake", "Hello Command", "client.env", "Supporting Wrapping Libraries",
 * "Limitations"; auth spec, "Mechanism Negotiation via Handshake"; OP_COMPRESSED spec (compression negotiation); load
 * balancer spec ("loadBalanced" in the handshake); Stable API spec, "Handshake behavior" (`hello` with a declared API
 * version).
 */
import { existsSync } from 'node:fs';
import * as os from 'node:os';
import { calculateObjectSize, type Document } from 'bson';
import { DRIVER_INFO } from '../version';
import { IncompatibleServerError, InvalidOptionError } from '../errors';
import { optionValue, rejectUnknownOptions, requireOptionsObject, type ListsEveryOption } from '../options';

/** The spec's limit on the size of `client.application.name`, in bytes. */
export const MAX_APP_NAME_BYTES = 128;

/** The spec's limit on the size of the whole `client` document, BSON overhead included, in bytes. */
export const MAX_CLIENT_METADATA_BYTES = 512;

/**
 * Where the execution environment is read from: the environment variables and whether `/.dockerenv` exists. Both
 * are read once, when {@link clientMetadata} builds the document.
 */
export interface ExecutionEnvironment {
  /** Environment variables (default `process.env`). */
  readonly variables: Readonly<Record<string, string | undefined>>;
  /**
   * Whether the file `.dockerenv` exists in the root directory (default: checked on the file system; false where Node's
   * permission model does not allow this process to look).
   */
  readonly dockerenv: boolean;
}

/** A variable counts as populated when it is set to a non-empty string. */
function populated(variables: ExecutionEnvironment['variables'], name: string): string | undefined {
  const value = variables[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** A variable's value as an int32, or undefined when it is missing or not a base-10 integer in int32 range. */
function int32(variables: ExecutionEnvironment['variables'], name: string): number | undefined {
  const value = populated(variables, name);
  if (value === undefined || !/^[+-]?\d+$/.test(value)) return undefined;
  const n = Number(value);
  // `| 0` makes "-0" the integer 0: BSON would send -0 as a double, not the int32 the spec asks for.
  return n >= -0x8000_0000 && n <= 0x7fff_ffff ? n | 0 : undefined;
}

/** The FaaS `client.env.name`, or undefined when none, or an ambiguous combination, of the variables is populated. */
function faasName(variables: ExecutionEnvironment['variables']): string | undefined {
  const aws = populated(variables, 'AWS_EXECUTION_ENV')?.startsWith('AWS_Lambda_') || populated(variables, 'AWS_LAMBDA_RUNTIME_API') !== undefined;
  const names = [
    aws ? 'aws.lambda' : undefined,
    populated(variables, 'FUNCTIONS_WORKER_RUNTIME') === undefined ? undefined : 'azure.func',
    (populated(variables, 'K_SERVICE') ?? populated(variables, 'FUNCTION_NAME')) === undefined ? undefined : 'gcp.func',
    populated(variables, 'VERCEL') === undefined ? undefined : 'vercel',
  ].filter((name) => name !== undefined);
  if (names.length === 1) return names[0];
  // Vercel runs on AWS Lambda: that pair is Vercel; any other combination is ambiguous and reports no FaaS.
  return names.length === 2 && names[0] === 'aws.lambda' && names[1] === 'vercel' ? 'vercel' : undefined;
}

/**
 * The `client.env` document: the FaaS the process runs in (`name`, and for it `region`, `memory_mb`, `timeout_sec`
 * as the spec's table reads them; a variable missing or of the wrong type leaves its field out, never an error) and
 * the container (`container.runtime: "docker"` when `/.dockerenv` exists, `container.orchestrator: "kubernetes"`
 * when `KUBERNETES_SERVICE_HOST` is populated). Undefined when none of these is known.
 *
 * Source: handshake spec, "client.env" ("FaaS", "Container").
 */
export function clientEnv(environment: ExecutionEnvironment = currentEnvironment()): Document | undefined {
  const v = environment.variables;
  const env: Document = {};
  const name = faasName(v);
  const fields: Document =
    name === 'aws.lambda'
      ? { region: populated(v, 'AWS_REGION'), memory_mb: int32(v, 'AWS_LAMBDA_FUNCTION_MEMORY_SIZE') }
      : name === 'gcp.func'
        ? { memory_mb: int32(v, 'FUNCTION_MEMORY_MB'), timeout_sec: int32(v, 'FUNCTION_TIMEOUT_SEC'), region: populated(v, 'FUNCTION_REGION') }
        : name === 'vercel'
          ? { region: populated(v, 'VERCEL_REGION') }
          : {};
  if (name !== undefined) env.name = name;
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) env[key] = value;
  const container: Document = {};
  if (environment.dockerenv) container.runtime = 'docker';
  if (populated(v, 'KUBERNETES_SERVICE_HOST') !== undefined) container.orchestrator = 'kubernetes';
  if (Object.keys(container).length > 0) env.container = container;
  return Object.keys(env).length > 0 ? env : undefined;
}

/** The environment of this process: `process.env`, and whether `/.dockerenv` exists. */
function currentEnvironment(): ExecutionEnvironment {
  return { variables: process.env, dockerenv: dockerenvExists() };
}

/**
 * Whether `/.dockerenv` exists; false when this process may not look (Node's permission model, `--permission` without
 * `--allow-fs-read` for it, makes `existsSync` throw ERR_ACCESS_DENIED rather than answer): the container's runtime is
 * then left out of the handshake, which the spec allows for any field it cannot know.
 */
function dockerenvExists(): boolean {
  try {
    return existsSync('/.dockerenv');
  } catch {
    return false;
  }
}

/** `text` cut to at most `bytes` bytes of UTF-8, never inside a character. */
function truncateUtf8(text: string, bytes: number): string {
  const encoded = Buffer.from(text, 'utf8');
  if (encoded.length <= bytes) return text;
  let end = Math.max(0, bytes);
  // Back up over continuation bytes (10xxxxxx) to the start of the character the cut would split.
  while (end > 0 && (encoded[end] & 0xc0) === 0x80) end--;
  return encoded.subarray(0, end).toString('utf8');
}

/**
 * What a library built on rxcmap (a driver that wraps it) reports of itself in the handshake: each field is appended
 * to its field of the `client` document (`name` to `client.driver.name`, `version` to `client.driver.version`,
 * `platform` to `client.platform`) after a `|`, never replacing what is there. An empty string counts as unset: it
 * appends nothing. No field may contain `|`.
 *
 * Source: handshake spec, "Supporting Wrapping Libraries" (the spec's `DriverInfoOptions`).
 */
export interface DriverInfoOptions {
  /** The name of the wrapping library, appended to `client.driver.name`. */
  name: string;
  /** The version of the wrapping library, appended to `client.driver.version`. */
  version?: string | undefined;
  /** Platform details of the wrapping library, appended to `client.platform`. */
  platform?: string | undefined;
}

/** The keys of {@link DriverInfoOptions}. */
const DRIVER_INFO_OPTION_NAMES = ['name', 'version', 'platform'] as const satisfies readonly (keyof DriverInfoOptions)[];
true satisfies ListsEveryOption<DriverInfoOptions, typeof DRIVER_INFO_OPTION_NAMES>;

/** The delimiter between the values appended to one metadata field. Source: handshake spec, "Appending metadata". */
export const METADATA_DELIMITER = '|';

/**
 * Checks a {@link DriverInfoOptions}: an object with no key but `name`, `version` and `platform`; `name` a string;
 * `version` and `platform` strings or absent; none of them containing `|`. Returns a copy of the three fields as they
 * were checked: each is read once, so a getter cannot give a checked value and then another.
 *
 * @param value what was given.
 * @param option its name in errors (`driverInfo`); a field is named `<option>.<field>`.
 * @param path prefix of an unknown key in its error, e.g. `"connectionOptions."`.
 * @throws {InvalidOptionError} naming the option or field, the value and what is allowed.
 *
 * Source: handshake spec, "Supporting Wrapping Libraries", "Appending metadata" (a string containing the delimiter
 * MUST throw).
 */
export function checkDriverInfo(value: unknown, option = 'driverInfo', path = ''): DriverInfoOptions {
  const shape = 'a { name, version?, platform? } object of strings';
  const info = requireOptionsObject(option, value, shape, true);
  rejectUnknownOptions(info, DRIVER_INFO_OPTION_NAMES, option, `${path}${option}.`);
  const checked: Partial<Record<keyof DriverInfoOptions, string>> = {};
  for (const field of DRIVER_INFO_OPTION_NAMES) {
    const text = optionValue(info, field);
    if (text === undefined && field !== 'name') continue;
    if (typeof text !== 'string' || text.includes(METADATA_DELIMITER)) {
      const allowed = `a string without '${METADATA_DELIMITER}' (the delimiter of appended metadata)${field === 'name' ? '' : ', or absent'}`;
      throw new InvalidOptionError(`${option}.${field}`, text, allowed);
    }
    checked[field] = text;
  }
  return { name: checked.name as string, version: checked.version, platform: checked.platform };
}

/** A {@link DriverInfoOptions} with each empty string as unset: what it appends, and what two are compared on. */
interface AppendedDriverInfo {
  readonly name: string | undefined;
  readonly version: string | undefined;
  readonly platform: string | undefined;
}

function appended(info: DriverInfoOptions): AppendedDriverInfo {
  return { name: info.name || undefined, version: info.version || undefined, platform: info.platform || undefined };
}

/** `base`, then each of `values` that is set, delimited by `|`. */
function joined(base: string, values: readonly (string | undefined)[]): string {
  let text = base;
  for (const value of values) if (value !== undefined) text += METADATA_DELIMITER + value;
  return text;
}

/**
 * The `client` document of the handshake: `application.name` (when given), `driver`, `os`, `platform` and, when
 * anything is known of it, `env` ({@link clientEnv}), with each of `driverInfo` appended to `driver.name`,
 * `driver.version` and `platform`, in order ({@link DriverInfoOptions}). Kept within
 * {@link MAX_CLIENT_METADATA_BYTES} (512) bytes of BSON by dropping, in this order and only as far as needed: the
 * fields of `env` but `env.name`, the fields of `os` but `os.type`, `env` itself; then cutting `platform` (appended
 * platforms first, from the end). `application` and `driver` are never cut: a driver name and version too long to
 * fit even so are refused.
 *
 * @param appName `client.application.name`; absent: no `application` (there is no default).
 * @param environment where `env` is read from (default: this process's environment variables and `/.dockerenv`).
 * @param driverInfo what wrapping libraries append, already checked ({@link checkDriverInfo}) and without duplicates.
 * @throws {InvalidOptionError} (option `appName`) when appName is not a string of at most 128 bytes (UTF-8); (option
 *   `driverInfo`, the last of `driverInfo`) when the document exceeds 512 bytes with `env`, `os` but `os.type` and
 *   `platform` all gone.
 *
 * Source: handshake spec, "Hello Command", "client.application.name", "client.env", "Appending metadata",
 * "Limitations".
 */
export function clientMetadata(appName?: string, environment?: ExecutionEnvironment, driverInfo: readonly DriverInfoOptions[] = []): Document {
  const metadata: Document = {};
  if (appName !== undefined) {
    if (typeof appName !== 'string' || Buffer.byteLength(appName, 'utf8') > MAX_APP_NAME_BYTES) {
      throw new InvalidOptionError('appName', appName, `a string of at most ${MAX_APP_NAME_BYTES} bytes`);
    }
    metadata.application = { name: appName };
  }
  const infos = driverInfo.map(appended);
  metadata.driver = {
    name: joined(DRIVER_INFO.name, infos.map((i) => i.name)),
    version: joined(DRIVER_INFO.version, infos.map((i) => i.version)),
  };
  metadata.os = { type: os.type() || 'unknown', name: process.platform, architecture: process.arch, version: os.release() };
  metadata.platform = joined(`Node.js ${process.version}, ${os.endianness()}`, infos.map((i) => i.platform));
  const env = clientEnv(environment);
  if (env !== undefined) metadata.env = env;
  fitClientMetadata(metadata);
  if (calculateObjectSize(metadata) > MAX_CLIENT_METADATA_BYTES) {
    const allowed = `a name and version short enough for the handshake's client metadata, with them appended, to fit in ${MAX_CLIENT_METADATA_BYTES} bytes`;
    throw new InvalidOptionError('driverInfo', driverInfo.at(-1), allowed);
  }
  return metadata;
}

/**
 * The client metadata of a client's handshakes, shared by the connection factories of all its pools and monitors:
 * {@link append} changes what connections established from then on send, and nothing else.
 *
 * Source: handshake spec, "Supporting Wrapping Libraries", "Metadata updates after MongoClient initialization",
 * "Appending metadata".
 */
export class ClientMetadata {
  /** The `client` document new connections send (a new object after each append that changes it). */
  document: Document;
  private readonly driverInfo: DriverInfoOptions[] = [];
  private readonly environment: ExecutionEnvironment;

  /**
   * @param appName `client.application.name`, if any.
   * @param driverInfo a wrapping library's driver info, if any (checked here).
   * @param environment where `env` is read from (default: this process's).
   * @throws {InvalidOptionError} as {@link clientMetadata} and {@link checkDriverInfo}.
   */
  constructor(
    private readonly appName?: string,
    driverInfo?: DriverInfoOptions,
    environment?: ExecutionEnvironment,
  ) {
    // Read once: every document of this client describes the same process.
    const current = environment ?? currentEnvironment();
    this.environment = { variables: { ...current.variables }, dockerenv: current.dockerenv };
    // The copy checkDriverInfo made: later changes to the caller's object change nothing.
    if (driverInfo !== undefined) this.driverInfo.push(checkDriverInfo(driverInfo));
    this.document = clientMetadata(appName, this.environment, this.driverInfo);
  }

  /**
   * Appends `driverInfo` to the metadata, unless an equal one (the same name, version and platform, an empty string
   * counting as unset) was given before, or it sets nothing: then nothing changes. Returns whether it was appended.
   *
   * @throws {InvalidOptionError} as {@link checkDriverInfo}, or when the metadata would no longer fit in 512 bytes
   *   (see {@link clientMetadata}); the metadata is then unchanged.
   */
  append(driverInfo: DriverInfoOptions): boolean {
    const checked = checkDriverInfo(driverInfo);
    const added = appended(checked);
    if (added.name === undefined && added.version === undefined && added.platform === undefined) return false;
    const same = (i: AppendedDriverInfo): boolean => i.name === added.name && i.version === added.version && i.platform === added.platform;
    if (this.driverInfo.map(appended).some(same)) return false;
    const list = [...this.driverInfo, checked];
    this.document = clientMetadata(this.appName, this.environment, list);
    this.driverInfo.push(list[list.length - 1]);
    return true;
  }
}

/**
 * Reduces a `client` document, in place, until its BSON is at most {@link MAX_CLIENT_METADATA_BYTES} (512) bytes,
 * each step only when the previous ones left it too large: keep only `env.name` of `env` (no name: no `env`), keep
 * only `os.type` of `os`, drop `env`, then cut `platform` (UTF-8, never inside a character) by the bytes still over.
 * `application` and `driver` are never changed. Returns `metadata`.
 *
 * Source: handshake spec, "Limitations" (the order in which fields are omitted or truncated).
 */
export function fitClientMetadata(metadata: Document): Document {
  const fits = (): boolean => calculateObjectSize(metadata) <= MAX_CLIENT_METADATA_BYTES;
  if (fits()) return metadata;
  if (metadata.env !== undefined) {
    if (metadata.env.name === undefined) delete metadata.env;
    else metadata.env = { name: metadata.env.name };
    if (fits()) return metadata;
  }
  metadata.os = { type: metadata.os.type };
  if (fits()) return metadata;
  delete metadata.env;
  if (fits() || typeof metadata.platform !== 'string') return metadata;
  const over = calculateObjectSize(metadata) - MAX_CLIENT_METADATA_BYTES;
  metadata.platform = truncateUtf8(metadata.platform, Buffer.byteLength(metadata.platform, 'utf8') - over);
  return metadata;
}

/**
 * The largest hello reply accepted, in bytes of BSON: 1 MiB. A MongoDB server's hello reply is a few KiB even for a
 * replica set of 50 members; the connection keeps its reply (`Connection.hello`) for as long as it lives, so a larger
 * one would let a server park up to 16 MiB in every connection of a pool. A larger reply fails the establishment
 * with a `MongoNetworkError` whose `cause` is a `WireProtocolError` naming the size and this limit.
 *
 * Source: extension (bounds what the handshake reply of a broken or hostile server can hold in the client).
 */
export const MAX_HELLO_REPLY_BYTES = 1024 * 1024;

/**
 * The oldest wire protocol version rxcmap speaks: 8, MongoDB 4.2. rxcmap needs OP_MSG (wire version 6, MongoDB 3.6)
 * for every message, the handshake included (handshake spec: OP_MSG for all handshakes), but the specifications it
 * implements describe no server before 4.2 any more (their pre-4.2 behaviour was removed, 4.2 being the drivers'
 * minimum supported server version), and MongoDB 3.6 and 4.0 reached their end of life in 2021 and 2022. A server whose
 * `maxWireVersion` is lower fails the establishment with {@link IncompatibleServerError}. (The official Node.js driver
 * 7.x requires 9, MongoDB 4.4.)
 *
 * Source: server discovery and monitoring spec, "clientMinWireVersion and clientMaxWireVersion", "Checking wire
 * protocol compatibility"; MongoDB wire version list (8: MongoDB 4.2).
 */
export const MIN_SUPPORTED_WIRE_VERSION = 8;

/** The MongoDB version of {@link MIN_SUPPORTED_WIRE_VERSION}: "4.2". */
export const MIN_SUPPORTED_SERVER_VERSION = '4.2';

/**
 * The newest wire protocol version rxcmap knows: 25, MongoDB 8.0, the newest server its tests and embedded endpoint
 * stand for. A newer server is used as long as it still speaks this version (every mongod to date reports
 * `minWireVersion` 0 to clients); one whose `minWireVersion` is higher fails the establishment with
 * {@link IncompatibleServerError}.
 *
 * Source: server discovery and monitoring spec, "clientMinWireVersion and clientMaxWireVersion", "Checking wire
 * protocol compatibility"; MongoDB wire version list (25: MongoDB 8.0).
 */
export const MAX_SUPPORTED_WIRE_VERSION = 25;

/** The MongoDB version of {@link MAX_SUPPORTED_WIRE_VERSION}: "8.0". */
export const MAX_SUPPORTED_SERVER_VERSION = '8.0';

/**
 * The error of a server at `address` whose wire version range (`minWireVersion` to `maxWireVersion` of its hello reply,
 * each 0 when absent) does not overlap rxcmap's, or undefined when it does: one compare per bound, made once per
 * connection, at its establishment. The message follows the SDAM spec's, and names both ranges.
 *
 * Source: server discovery and monitoring spec, "Checking wire protocol compatibility".
 */
export function incompatibleServer(address: string, minWireVersion: number, maxWireVersion: number): IncompatibleServerError | undefined {
  if (maxWireVersion >= MIN_SUPPORTED_WIRE_VERSION && minWireVersion <= MAX_SUPPORTED_WIRE_VERSION) return undefined;
  const ranges = `the server speaks wire versions ${minWireVersion} to ${maxWireVersion}, rxcmap ${MIN_SUPPORTED_WIRE_VERSION} to ${MAX_SUPPORTED_WIRE_VERSION} (MongoDB ${MIN_SUPPORTED_SERVER_VERSION} to ${MAX_SUPPORTED_SERVER_VERSION})`;
  if (maxWireVersion < MIN_SUPPORTED_WIRE_VERSION) {
    const message = `Server at ${address} reports wire version ${maxWireVersion}, but this version of rxcmap requires at least ${MIN_SUPPORTED_WIRE_VERSION} (MongoDB ${MIN_SUPPORTED_SERVER_VERSION}): ${ranges}`;
    return new IncompatibleServerError(address, minWireVersion, maxWireVersion, message);
  }
  const message = `Server at ${address} requires wire version ${minWireVersion}, but this version of rxcmap only supports up to ${MAX_SUPPORTED_WIRE_VERSION}: ${ranges}`;
  return new IncompatibleServerError(address, minWireVersion, maxWireVersion, message);
}

/** What goes into the handshake besides the metadata. */
export interface HandshakeParts {
  /** The `client` document ({@link clientMetadata}). */
  readonly metadata: Document;
  /** Compressors to offer, in order of preference. */
  readonly compressors?: readonly string[];
  /** `<source>.<username>` when the auth mechanism must be negotiated. */
  readonly saslSupportedMechs?: string;
  /** Load-balanced mode: send `hello` with `loadBalanced: true`. */
  readonly loadBalanced?: boolean;
  /**
   * A Stable API version is declared: send `hello`, never the legacy hello (the connection adds the API fields, as to
   * every command).
   */
  readonly serverApi?: boolean;
}

/**
 * The hello command a connection sends after its handshake (a monitor's checks): `hello` when the handshake reply
 * said `helloOk: true` or a Stable API version is declared (`serverApi`, whatever helloOk says), else the legacy
 * hello, `isMaster`.
 *
 * Source: handshake spec, "Connection handshake" (`helloOk`); server monitoring spec, "Monitoring" (hello or legacy
 * hello); Stable API spec, "Handshake behavior" (with a declared API version, MUST NOT use the legacy hello
 * "during the initial handshake or afterwards").
 */
export function helloCommandName(helloOk: boolean, serverApi = false): 'hello' | 'isMaster' {
  return helloOk || serverApi ? 'hello' : 'isMaster';
}

/**
 * The first command on a connection, sent over OP_MSG to `admin`: legacy hello (`isMaster`) with `helloOk: true`;
 * `hello` with `loadBalanced: true` in load-balanced mode; `hello` (without `helloOk`) when a Stable API version is
 * declared (Stable API spec, "Handshake behavior"); always the backpressure version `"2"`. The same for
 * every connection of a factory: establishment adds the connection's own `speculativeAuthenticate` (its client nonce
 * is per connection; see `speculativeStart` in `auth/authenticate`).
 */
export function handshakeCommand(parts: HandshakeParts): Document {
  const command: Document = parts.loadBalanced ? { hello: 1, loadBalanced: true } : parts.serverApi ? { hello: 1 } : { isMaster: 1, helloOk: true };
  command.backpressure = '2';
  command.client = parts.metadata;
  if (parts.compressors && parts.compressors.length > 0) command.compression = [...parts.compressors];
  if (parts.saslSupportedMechs !== undefined) command.saslSupportedMechs = parts.saslSupportedMechs;
  return command;
}
