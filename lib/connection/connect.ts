/**
 * The default connection factory: establishes a {@link Connection} (socket connect over TCP or TLS, the handshake,
 * then authentication) as a cancellable Observable.
 *
 * Source: CMAP spec, "Establishing a Connection" and "Backpressure-enabled" (error labels); handshake spec; auth spec.
 */
import * as net from 'node:net';
import * as tls from 'node:tls';
import { calculateObjectSize, type Document } from 'bson';
import { Observable, Subject } from 'rxjs';
import { checkEndpoint, writtenAddress } from '../address';
import { authenticate, remainingOf, saslSupportedMechsRequest, speculativeStart } from '../auth/authenticate';
import type { RunCommand } from '../auth/scram';
import { withoutEcho } from '../auth/without-echo';
import { MongoCredentials } from '../auth/credentials';
import {
  CmapError,
  ErrorLabel,
  InvalidOptionError,
  MongoCompatibilityError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  MongoServerError,
} from '../errors';
import { optionValues, requireTimerDurationMS } from '../options';
import { withPermissionRefusal } from '../permission-model';
import type { ConnectionDescriptor, ConnectionFactory } from '../pool/contract';
import type { CommandEvent } from './command-events';
import { HeldDeadline } from './held-deadline';
import { LOCAL_RESOURCE_ERRORS } from './local-resource-errors';
import { IoTimeout } from './io-timeout';
import { ACCESS_TOKEN_NOT_SHOWN, keptHelloReply } from './kept-hello';
import { Connection } from './connection';
import { ClientMetadata, handshakeCommand, incompatibleServer, MAX_HELLO_REPLY_BYTES } from './handshake';
import type { CompressorName } from './op-compressed';
import {
  checkConnectionOptions,
  CONNECTION_OPTION_NAMES,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS,
  type ConnectionOptions,
} from './connection-options';
import { proxySettings, type ProxySettings } from './proxy';
import { checkServerApi, type ServerApi } from './server-api';
import { socks5Connect, socks5HostProblem } from './socks5';
import { currentTlsOptions, wantsTls } from './tls-options';
import { WireProtocolError } from './wire-protocol';

export type { ConnectionOptions } from './connection-options';

/**
 * Where to connect: a host and port, or a Unix domain socket path (as host, with no port).
 *
 * Source: CMAP spec, "Endpoint"; connection string spec, "Host Information".
 */
export interface Endpoint {
  /** A host name, an IP address (IPv6 without brackets), or a Unix domain socket path (with a `/`, ending in `.sock`; `db.sock` alone is a host name). */
  host: string;
  /** The TCP port, from 1 to 65535; absent for a Unix domain socket, and only then. */
  port?: number;
}

/**
 * Where in establishment a failure happened; decides the backpressure labels. `proxy`: connecting to the SOCKS5
 * proxy and the SOCKS5 exchange with it, up to its report that the connection to the server is made. `lookup`: the
 * DNS lookup of a host name, before any byte goes to the server (it waits for a thread of Node's thread pool, which
 * DNS lookups share with file reads, crypto and zlib work); `connect`: from the address found (at once for an IP
 * address) to the socket connected, TLS included.
 */
type Phase = 'proxy' | 'lookup' | 'connect' | 'hello' | 'auth';

/**
 * A factory of real connections to `endpoint`. Each establishment opens a socket (TLS when asked), performs the
 * handshake and authentication (none with an arbiter, outside load-balanced mode: a hello reply with `arbiterOnly:
 * true` and a `setName`, which holds no users), and emits the {@link Connection}. With SCRAM credentials, the
 * handshake carries the saslStart as `speculativeAuthenticate` (SCRAM-SHA-256 unless the credentials set
 * SCRAM-SHA-1), so a server that answers it authenticates the connection with hello + saslContinue instead of hello +
 * saslStart + saslContinue; with MONGODB-X509 it carries the `authenticate` command, and a server that answers it
 * needs no more than the hello; with PLAIN it carries nothing, and one saslStart follows the hello; with MONGODB-OIDC
 * it carries the one-step saslStart once the credentials hold a cached token (else one saslStart follows the hello),
 * and the connection then reauthenticates itself when a command fails with ReauthenticationRequired (391, see
 * {@link Connection.command}); unsubscribing (or the descriptor's signal aborting) before that destroys the socket.
 * The factory carries `commandEvents$`, the command events of the application's commands on every connection it
 * established (see {@link TcpConnectionFactory}).
 * Every TCP or TLS socket has TCP keepalive on, its first probe after
 * `keepAliveInitialDelay` ms of idleness (default 120000; see {@link ConnectionOptions.keepAliveInitialDelay}). A host
 * name that resolves to several addresses is connected to as `autoSelectFamily` and `autoSelectFamilyAttemptTimeout`
 * say (Node's defaults when not given: each address tried in turn, each attempt but the last abandoned after 250 ms;
 * see {@link ConnectionOptions.autoSelectFamily}), among those of the IP version `family` allows (both by default);
 * connectTimeoutMS bounds them all together. With
 * `proxyHost`, each TCP connection (not one to a Unix domain socket) is opened to the SOCKS5 proxy, which is asked to
 * connect to the server's host name as given (never resolved here); TLS then runs over that connection, with the
 * server (see {@link ProxyOptions}).
 *
 * With `serverApi` (a declared Stable API version), the handshake is `hello` and every command of the connection
 * carries the API fields (see {@link ConnectionOptions.serverApi}); a server that does not know `hello` fails the
 * establishment with {@link MongoCompatibilityError} (see `helloNotSupported`).
 *
 * Fails with {@link MongoNetworkError} (connect error: for a host name whose every address failed, each one's error in
 * turn; socket closed, TLS failure, a hello reply larger than
 * `MAX_HELLO_REPLY_BYTES`, 1 MiB),
 * {@link MongoNetworkTimeoutError} (connectTimeoutMS elapsed; held while a MONGODB-OIDC human callback runs; when it
 * elapses while a host name's several addresses are tried, its message says what each met, in order: Node's error for
 * one that failed, `<ip:port> did not answer within autoSelectFamilyAttemptTimeout (<n> ms)`, `<ip:port> had not
 * answered` for the one still tried),
 * `MongoServerError` (the handshake was refused),
 * `AuthenticationError`, or `MongoCompatibilityError` (load-balanced mode, and the hello reply has no ObjectId
 * `serviceId`). Network errors and timeouts before or during the handshake carry the
 * `SystemOverloadedError` and `RetryableError` labels (a refused or reset connection, the peer closing it during
 * the TLS handshake, connectTimeoutMS elapsing), except failures to connect to the SOCKS5 proxy or of the SOCKS5
 * exchange with it (authentication refused, the proxy refusing or failing to reach the server, connectTimeoutMS
 * elapsing meanwhile; their message names the proxy, and only a socket error connecting to the proxy is their `cause`),
 * DNS failures, no route to the server's address (ENETUNREACH, EHOSTUNREACH: every address, for a host name that has
 * several), TLS errors that are not socket I/O
 * (certificate or host name verification, a TLS protocol version refused, a peer that does not speak TLS: any error
 * of OpenSSL or of Node's TLS layer) and a malformed hello reply (a MongoNetworkError whose cause is a
 * WireProtocolError; a hello reply holding a value JavaScript cannot read, such as a string that is not valid UTF-8,
 * is one); nothing raised during authentication carries them. In load-balanced mode an
 * error after the handshake (during authentication, or the connection errored before it was handed over) carries the
 * service it reached as `serviceId` (hex string), so the pool clears that service only (load balancer spec, "Initial
 * Handshake Errors").
 *
 * @throws {InvalidOptionError} for a key that is not a connection option, `host` or `port` (naming the closest
 *   option), a host a SOCKS5 proxy cannot be asked for (with `proxyHost`: a name with no ASCII form, or one longer
 *   than 255 bytes in it), or an invalid host or port (a port from 1 to 65535 for a host, none for a Unix domain socket path,
 *   which holds a `/` and ends in `.sock`; an IPv6 address without brackets: see `checkEndpoint`), timeout,
 *   keepAliveInitialDelay, autoSelectFamily, autoSelectFamilyAttemptTimeout, family, serverApi (see `checkServerApi`),
 *   appName, driverInfo (a field containing `|`, or a name and version too long for the 512-byte client metadata),
 *   compressor, zlibCompressionLevel, TLS option (a
 *   value of the wrong type included, e.g. `tls: 'yes'`) or credentials (never showing the password; MONGODB-X509
 *   without `tlsCertificateKeyFile`, and PLAIN over TCP with TLS neither on nor turned off outright, naming `authMechanism`); see `checkConnectionOptions`.
 *
 * Source: CMAP spec, "Establishing a Connection" and "Backpressure-enabled" (error labels); handshake spec,
 * "Connection handshake", "Speculative Authentication"; OP_COMPRESSED spec (compressor negotiation); auth spec,
 * "Authentication Handshake", "MONGODB-X509", "PLAIN" (refused without TLS unless `tls: false` is given: an extension); load
 * balancer spec, "Connection Establishment"; SOCKS5 support spec, "Connection Establishment"; Stable API spec,
 * "Handshake behavior"; extension: TCP keepalive (the official Node.js driver's
 * `keepAliveInitialDelay`), the choice among a host name's addresses (the official Node.js driver's `autoSelectFamily`,
 * `autoSelectFamilyAttemptTimeout` and `family`).
 */
export function connectionFactory(options: ConnectionOptions & Endpoint): TcpConnectionFactory {
  // Every key and value type first (unknown keys name the closest option), so nothing below meets a wrong shape.
  const serverApi = checkConnectionOptions(options, 'connectionFactory', '', ['host', 'port'] satisfies (keyof Endpoint)[]);
  if (serverApi === undefined) return connectionFactoryWithMetadata(options, undefined);
  // The checked copy in place of the caller's serverApi: its fields are read once (see checkServerApi).
  const o = optionValues(options, ENDPOINT_AND_CONNECTION_OPTION_NAMES) as ConnectionOptions & Endpoint;
  return connectionFactoryWithMetadata({ ...o, serverApi }, undefined);
}

/**
 * The error of a hello whose command failed with `error`: as it is, unless it is the WireProtocolError of a reply
 * holding a value JavaScript cannot read (a string that is not valid UTF-8), which fails only its command; a hello's
 * reply is kept for life (establishment) or is the server's description (a monitor's check), so for a hello it is a
 * malformed reply: a {@link MongoNetworkError} on `address` whose cause is that error, its message `<what> failed:
 * wire-protocol error: …`.
 *
 * Source: handshake spec (the hello reply describes the server); server monitoring spec, "Network or command error
 * during server check".
 */
export function malformedHello(error: unknown, address: string, what: string): unknown {
  if (!(error instanceof WireProtocolError)) return error;
  return new MongoNetworkError(address, `${what} failed: wire-protocol error: the hello reply holds a value that cannot be read`, { cause: error });
}

/** The server error code of a command the server does not know (`CommandNotFound`). */
const COMMAND_NOT_FOUND = 59;

/**
 * The error of a handshake `hello` that failed with `error` while a Stable API version is declared: a
 * {@link MongoCompatibilityError} on `address` (its `cause` the server's error) when the server does not know the
 * `hello` command (CommandNotFound, code 59: a server older than 4.4.2 / 4.2.10 / 4.0.21 / 3.6.21, which predates the
 * Stable API too), since a declared API version forbids falling back to the legacy hello; `error` as it is otherwise.
 * A monitor's check failing so makes the server Unknown.
 *
 * Source: Stable API spec, "Handshake behavior" ("If the server does not support hello, the server description MUST
 * reflect this with an Unknown server type").
 */
export function helloNotSupported(error: unknown, serverApi: ServerApi | undefined, address: string): unknown {
  if (serverApi === undefined || !(error instanceof MongoServerError) || error.code !== COMMAND_NOT_FOUND) return error;
  const message =
    `the server at ${address} does not support the hello command, which a declared Stable API version (serverApi ` +
    `version ${serverApi.version}) requires; the legacy hello is never used with one: ${error.message}`;
  return new MongoCompatibilityError(message, { cause: error });
}

/** The options {@link connectionFactoryWithMetadata} reads: the Endpoint's and the connection options. */
const ENDPOINT_AND_CONNECTION_OPTION_NAMES = ['host', 'port', ...CONNECTION_OPTION_NAMES] as const;

/**
 * {@link connectionFactory} over `metadata`, the client metadata shared with other factories (a client's pools and
 * monitors): each establishment sends the `client` document `metadata` holds as it starts, so what is appended to
 * it reaches the connections established from then on, and no other. `metadata` undefined: built from
 * `options.appName` and `options.driverInfo`. `now`: the clock, in ms, a connection's `handshakeDurationMS` is
 * measured on (a monitor's scheduler, so that its RTT samples share one clock; default `performance.now()`). The
 * options must have been checked (`checkConnectionOptions`).
 *
 * @throws {InvalidOptionError} as {@link connectionFactory}.
 */
export function connectionFactoryWithMetadata(
  options: ConnectionOptions & Endpoint,
  metadata: ClientMetadata | undefined,
  now: () => number = () => performance.now(),
): TcpConnectionFactory {
  // Each option read once, none from Object.prototype (see optionValue); what follows reads only this copy.
  const o = optionValues(options, ENDPOINT_AND_CONNECTION_OPTION_NAMES);
  if (typeof o.host !== 'string' || o.host === '') {
    throw new InvalidOptionError('host', o.host, 'a non-empty host name, IP address or Unix domain socket path');
  }
  const connectTimeoutMS = requireTimerDurationMS('connectTimeoutMS', o.connectTimeoutMS ?? DEFAULT_CONNECT_TIMEOUT_MS);
  const socketTimeoutMS = requireTimerDurationMS('socketTimeoutMS', o.socketTimeoutMS ?? 0);
  // Each name was checked with the other options (checkConnectionOptions): 'none' is the only one not offered, and a
  // name given twice is offered once, where it first appears (its place in the order of preference).
  const compressors = [...new Set((o.compressors ?? []).filter((c) => c !== 'none'))];
  const zlibCompressionLevel = o.zlibCompressionLevel ?? -1;
  const keepAliveInitialDelay = o.keepAliveInitialDelay ?? DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS;
  const given = o.credentials;
  const credentials =
    given === undefined ? undefined : given instanceof MongoCredentials ? given : new MongoCredentials(given);
  // Auth spec, "Errors": a mechanism without its required information is an error. MONGODB-X509's is the client
  // certificate, without which no server can authenticate the connection.
  if (credentials?.mechanism === 'MONGODB-X509' && o.tlsCertificateKeyFile === undefined) {
    throw new InvalidOptionError('authMechanism', 'MONGODB-X509', 'with tlsCertificateKeyFile: MONGODB-X509 authenticates by the client certificate of a TLS connection');
  }
  // PLAIN puts the password in clear text in its saslStart: over TCP without TLS anyone on the path reads it (and an
  // LDAP password is often the user's password everywhere). A mongod accepts it all the same, so the clear text is
  // the user's to choose (`tls: false`, said outright), never a default. A Unix domain socket (no port) crosses no
  // network: the file's permissions guard it.
  if (credentials?.mechanism === 'PLAIN' && o.port !== undefined && o.tls !== false && !wantsTls(o)) {
    throw new InvalidOptionError(
      'authMechanism',
      'PLAIN',
      'with TLS (tls=true), over a Unix domain socket, or with tls=false given outright: PLAIN sends the password in clear text',
    );
  }
  const client = metadata ?? new ClientMetadata(o.appName, o.driverInfo);
  // A frozen copy, read once (a copy checked before, by the front end, is taken as it is): changing the caller's
  // object later changes nothing (Stable API spec, "ServerApi class").
  const serverApi = o.serverApi === undefined ? undefined : checkServerApi(o.serverApi);
  const parts = {
    compressors,
    saslSupportedMechs: credentials ? saslSupportedMechsRequest(credentials) : undefined,
    loadBalanced: o.loadBalanced === true,
    serverApi: serverApi !== undefined,
  };
  // Built again only when the metadata changed (an append), so establishments share one command otherwise.
  let handshake = handshakeCommand({ ...parts, metadata: client.document });
  const currentHandshake = (): Record<string, unknown> => {
    if (handshake.client !== client.document) handshake = handshakeCommand({ ...parts, metadata: client.document });
    return handshake;
  };
  // The port and the rest of the Endpoint, after the other options, so that each of those is reported as it is,
  // whatever the Endpoint.
  checkEndpoint(o.host, o.port);
  // A Unix domain socket path is no host name: it gives no SNI server name (see nodeTlsOptions).
  const tlsOptions = wantsTls(o) ? currentTlsOptions(o, o.port === undefined ? undefined : o.host) : undefined;
  // Checked whatever the Endpoint; a Unix domain socket path is no TCP connection, and never goes through the proxy
  // (SOCKS5 support spec, "Connection Establishment": "a new outgoing TCP connection").
  const configured = proxySettings(o);
  const proxy = o.port === undefined ? undefined : configured;
  // Through a proxy, the host name is sent as is: one a SOCKS5 request cannot hold is refused now, not per connection.
  const unsendable = proxy === undefined ? undefined : socks5HostProblem(o.host);
  if (unsendable !== undefined) throw new InvalidOptionError('host', o.host, `a host a SOCKS5 proxy can be asked for (with proxyHost): ${unsendable}`);
  const settings: EstablishSettings = {
    endpoint: { host: o.host, port: o.port },
    tlsOptions,
    proxy,
    handshake: currentHandshake,
    compressors: compressors as CompressorName[],
    credentials,
    connectTimeoutMS,
    socketTimeoutMS,
    zlibCompressionLevel,
    loadBalanced: o.loadBalanced === true,
    serverApi,
    // Node counts the delay in whole seconds, rounded down: under 1000 ms it would mean "keep the OS default".
    keepAliveInitialDelay: keepAliveInitialDelay === 0 ? 0 : Math.max(1000, keepAliveInitialDelay),
    // Only those given: Node's defaults otherwise (which net.setDefaultAutoSelectFamily() and the command line set).
    addressSelection: {
      ...(o.autoSelectFamily === undefined ? {} : { autoSelectFamily: o.autoSelectFamily }),
      ...(o.autoSelectFamilyAttemptTimeout === undefined ? {} : { autoSelectFamilyAttemptTimeout: o.autoSelectFamilyAttemptTimeout }),
      ...(o.family === undefined ? {} : { family: o.family }),
    },
    now,
    commandEvents: new Subject<CommandEvent>(),
  };
  const factory = (descriptor: ConnectionDescriptor): Observable<Connection> => establish(settings, descriptor);
  return Object.assign(factory, { commandEvents$: settings.commandEvents.asObservable() });
}

/**
 * A connection factory of rxcmap's own (see {@link connectionFactory}), with the command events of the connections
 * it establishes.
 *
 * Source: CMAP spec, "Establishing a Connection"; `commandEvents$`: command logging and monitoring spec, "Events API".
 */
export interface TcpConnectionFactory extends ConnectionFactory<Connection> {
  /**
   * The command events of every connection this factory established (see {@link CommandEvent}): the application's
   * commands, never the handshake's or authentication's. Hot: only what happens while subscribed is received; while
   * nobody is subscribed, no connection builds an event. A subscriber that throws does not fail the command, nor
   * leave its connection busy (with RxJS's `useDeprecatedSynchronousErrorHandling` too): its error is reported as RxJS
   * reports an unhandled one (`config.onUnhandledError`, else thrown asynchronously).
   */
  readonly commandEvents$: Observable<CommandEvent>;
}

interface EstablishSettings {
  readonly endpoint: Endpoint;
  /** The TLS options of a connection opened now (its files read again when they changed; see currentTlsOptions). */
  readonly tlsOptions: (() => tls.ConnectionOptions) | undefined;
  /** The SOCKS5 proxy the connections go through (none for a Unix domain socket path). */
  readonly proxy: ProxySettings | undefined;
  /** The handshake command a connection whose establishment starts now sends. */
  readonly handshake: () => Record<string, unknown>;
  readonly compressors: CompressorName[];
  readonly credentials: MongoCredentials | undefined;
  readonly connectTimeoutMS: number;
  readonly socketTimeoutMS: number;
  readonly zlibCompressionLevel: number;
  readonly loadBalanced: boolean;
  /** The declared Stable API version (checked and frozen), if any. */
  readonly serverApi: ServerApi | undefined;
  /** TCP keepalive's initial delay in ms (0: the OS default), at least 1000 otherwise. */
  readonly keepAliveInitialDelay: number;
  /**
   * Which of a host name's addresses are tried, and how: the autoSelectFamily, autoSelectFamilyAttemptTimeout and
   * family options given (none: Node's defaults), for every TCP connect.
   */
  readonly addressSelection: Pick<net.TcpNetConnectOpts, 'autoSelectFamily' | 'autoSelectFamilyAttemptTimeout' | 'family'>;
  /** The clock of `handshakeDurationMS`, in ms. */
  readonly now: () => number;
  /** Where the established connections publish their command events. */
  readonly commandEvents: Subject<CommandEvent>;
}

/**
 * One establishment: socket connect (TCP, TLS or a Unix domain socket), the handshake, then authentication, all
 * bounded by one connectTimeoutMS timer armed as the socket is opened. The first of these ends it, and each one
 * runs the same teardown (timer cleared, descriptor signal listener removed, the SCRAM conversation ended, the socket
 * destroyed unless the connection was delivered):
 *
 * - the connection is established: it is emitted, then completed (unless it errored meanwhile: then that error);
 * - an error in any phase: the subscriber gets it (with the backpressure labels its phase calls for);
 * - connectTimeoutMS elapses, in whatever phase (including a SCRAM key derivation still running on the threadpool):
 *   the subscriber gets a MongoNetworkTimeoutError naming the limit and the phase;
 * - the descriptor's signal aborts: the subscriber gets a MongoNetworkError saying so (cause: the signal's reason);
 * - the subscriber unsubscribes.
 *
 * Once ended, nothing more reaches the subscriber: a key derivation that finishes later only fills the credentials'
 * cache, and a reply that arrives later is dropped with the socket.
 */
function establish(s: EstablishSettings, descriptor: ConnectionDescriptor): Observable<Connection> {
  return new Observable<Connection>((subscriber) => {
    const { address, signal } = descriptor;
    const { host, port } = s.endpoint;
    // The metadata as this connection is created: a later append is for the connections created after it.
    const handshake = s.handshake();
    const { proxy } = s;
    const via = proxy === undefined ? '' : ` through the SOCKS5 proxy ${writtenAddress(proxy.host, proxy.port)}`;
    // A host name is looked up first (getaddrinfo, on Node's thread pool); an IP address or a socket path is not.
    let phase: Phase = proxy !== undefined ? 'proxy' : port !== undefined && net.isIP(host) === 0 ? 'lookup' : 'connect';
    let delivered = false;
    /** Ends the SCRAM conversation when the establishment ends first (its reason: why). */
    const conversation = new AbortController();
    const end = (error: unknown): void => {
      if (subscriber.closed) return;
      conversation.abort(error);
      subscriber.error(error);
    };
    /** Load-balanced mode: the service the handshake reached, once it completed (errors after it name it). */
    let service: string | undefined;
    const fail = (error: unknown, at: Phase = phase): void => {
      if (service !== undefined && error instanceof CmapError) error.serviceId = service;
      end(withBackpressureLabels(error, at));
    };
    const onAbort = (): void => {
      const message = `establishing a connection to ${address} was aborted (during ${phase})`;
      end(new MongoNetworkError(address, message, { cause: signal.reason }));
    };
    if (signal.aborted) return onAbort();

    const { addressSelection } = s;
    const tlsOptions = s.tlsOptions?.();
    const socket: net.Socket =
      proxy !== undefined
        ? net.connect({ host: proxy.host, port: proxy.port, ...addressSelection })
        : tlsOptions !== undefined
          ? tls.connect(port === undefined ? { ...tlsOptions, path: host } : { ...tlsOptions, host, port, ...addressSelection })
          : port === undefined
            ? net.connect({ path: host })
            : net.connect({ host, port, ...addressSelection });
    /** Through a proxy with TLS: the TLS socket over `socket`, once the proxy has connected it to the server. */
    let tunnelled: tls.TLSSocket | undefined;
    // What each of a host name's several addresses met, for a timeout before the socket connected (see attemptsDetail).
    const attempts = recordAttempts(socket, s.addressSelection);
    // The lookup found an address: from here on, the server may be reached. A failed lookup fails in its own phase.
    if (phase === 'lookup') socket.once('lookup', (error: Error | null) => void (error === null && phase === 'lookup' && (phase = 'connect')));
    socket.setNoDelay(true);
    // TCP keepalive, so that a load balancer, NAT or firewall does not drop an idle pooled connection, and a peer
    // gone without a FIN is found. Set on 'connect' (TLS included: tls.connect ignores the keepAlive options of its
    // constructor): on the connected socket, 0 keeps the OS default delay; set earlier, libuv would apply its own.
    socket.once('connect', () => socket.setKeepAlive(true, s.keepAliveInitialDelay));
    // Expires only once what the socket already received is read: a handshake or authentication reply that arrived
    // while the event loop was blocked is no timeout (nor a reason to clear the pool). What still needs a round trip
    // then fails as of the phase the deadline passed in (its labels, hence whether the pool is cleared, are that
    // phase's), not the one the replies read since led to.
    let deadlinePhase: Phase | undefined;
    // The time connectTimeoutMS has left (on the clock of its Node timer), which bounds a MONGODB-OIDC callback's
    // timeoutMS; 0: no deadline (the callback's 60000 ms).
    const remainingMS = remainingOf(s.connectTimeoutMS);
    // MONGODB-OIDC's human callback (a person signing in) is given 5 minutes whatever connectTimeoutMS: the deadline
    // is held while it runs (nothing is sent or awaited from the server then), and resumes with what it had left.
    const deadline = new HeldDeadline(
      (delayMS) =>
        new IoTimeout(
          () => {
            const at = deadlinePhase ?? phase;
            const tried = socket.connecting ? attemptsDetail(attempts) : '';
            fail(new MongoNetworkTimeoutError(address, `connecting to ${address} timed out after ${s.connectTimeoutMS} ms (during ${at}${tried})`), at);
          },
          delayMS,
          () => {
            deadlinePhase ??= phase;
            return (tunnelled ?? socket).bytesRead;
          },
        ),
      s.connectTimeoutMS,
    );
    signal.addEventListener('abort', onAbort, { once: true });
    const onSocketError = (error: Error): void =>
      fail(new MongoNetworkError(address, `connecting to ${address}${via} failed: ${connectErrorDetail(error)}`, { cause: error }));
    socket.once('error', onSocketError);
    if (proxy === undefined) {
      socket.once(tlsOptions !== undefined ? 'secureConnect' : 'connect', () => {
        socket.off('error', onSocketError);
        handshakeOn(socket);
      });
    } else {
      socket.once('connect', () => {
        // Bounded by connectTimeoutMS, as the rest of the establishment; with 0, not at all.
        socks5Connect(socket, proxy, host, port as number).then(
          () => {
            if (subscriber.closed) return;
            phase = 'connect';
            if (tlsOptions === undefined) {
              socket.off('error', onSocketError);
              return handshakeOn(socket);
            }
            // TLS with the server, over the proxy's connection; its errors (the server's certificate included) are
            // the server's, as without a proxy. The TCP socket keeps its listener: it may still report an error.
            const secure = tls.connect({ ...tlsOptions, socket, host });
            tunnelled = secure;
            secure.once('error', onSocketError);
            secure.once('secureConnect', () => {
              secure.off('error', onSocketError);
              handshakeOn(secure);
            });
          },
          (error: Error) => fail(new MongoNetworkError(address, `connecting to ${address}${via} failed: ${error.message}`)),
        );
      });
    }
    /** The handshake, then authentication, on `established`: the socket connected to the server. */
    const handshakeOn = (established: net.Socket): void => {
      const connection = new Connection(established, {
        ...descriptor,
        socketTimeoutMS: s.socketTimeoutMS,
        zlibCompressionLevel: s.zlibCompressionLevel,
        offeredCompressors: s.compressors,
        serverApi: s.serverApi,
      });
      phase = 'hello';
      // Speculative authentication: the saslStart rides in the handshake, with a client nonce of this connection's.
      const speculative = s.credentials === undefined ? undefined : speculativeStart(s.credentials, s.endpoint.host);
      const command = speculative === undefined ? handshake : { ...handshake, speculativeAuthenticate: speculative.speculativeAuthenticate };
      const helloSent = s.now();
      const sendHello: RunCommand = (db, cmd) => connection.command(db, cmd, { timeoutMS: 0 });
      // A MONGODB-OIDC access token sent speculatively is a secret: a refusal quoting it must not carry it into
      // errors, events and logs (as the saslStart's refusal does not), nor a reply quoting it into the kept hello.
      const speculativeToken = speculative !== undefined && 'token' in speculative ? speculative.token : undefined;
      const runHello = speculativeToken !== undefined ? withoutEcho(sendHello, speculativeToken, ACCESS_TOKEN_NOT_SHOWN) : sendHello;
      runHello('admin', command)
        .catch((error: unknown) => {
          // A hello reply holding a value JavaScript cannot read (a string that is not valid UTF-8) fails only its
          // command; but the connection would keep that reply for life: it is a malformed hello reply.
          throw helloNotSupported(malformedHello(error, address, `connection ${descriptor.id} to ${address}`), s.serverApi, address);
        })
        .then(async (reply) => {
          if (subscriber.closed) return;
          // The hello's round trip alone: the RTT sample a monitor takes from a new connection.
          connection.handshakeDurationMS = s.now() - helloSent;
          // The connection keeps its hello reply for life: an oversized one would park its bytes in every connection.
          const size = calculateObjectSize(reply);
          if (size > MAX_HELLO_REPLY_BYTES) {
            const detail = `the hello reply is ${size} bytes, more than the ${MAX_HELLO_REPLY_BYTES} bytes a hello reply may hold`;
            throw new MongoNetworkError(address, `connection ${descriptor.id} to ${address} failed: ${detail}`, {
              cause: new WireProtocolError(detail),
            });
          }
          // Kept for life and shown to whoever holds the connection: without the speculative authentication's reply,
          // nor any quotation of an access token sent speculatively. The authentication reads `reply` itself.
          let kept: Document;
          try {
            kept = keptHelloReply(reply, speculativeToken);
          } catch (error) {
            if (!(error instanceof RangeError)) throw error;
            const detail = 'the hello reply quotes the access token sent, nested too deep to take it out';
            throw new MongoNetworkError(address, `connection ${descriptor.id} to ${address} failed: ${detail}`, { cause: new WireProtocolError(detail) });
          }
          connection.applyHandshake(kept);
          // A server whose wire versions rxcmap does not speak: nothing more is sent to it (no authentication).
          const incompatible = incompatibleServer(address, connection.server.minWireVersion, connection.server.maxWireVersion);
          if (incompatible !== undefined) throw incompatible;
          if (s.loadBalanced && connection.serviceId === undefined) {
            throw new MongoCompatibilityError(
              reply.serviceId === undefined || reply.serviceId === null
                ? 'Driver attempted to initialize in load balancing mode, but the server does not support this mode.'
                : `Driver attempted to initialize in load balancing mode, but the hello reply's serviceId is not an ObjectId (${typeof reply.serviceId})`,
            );
          }
          if (s.loadBalanced) {
            service = connection.serviceId;
            // The connection takes its service's generation now, before authentication (CMAP "Load Balancer Mode").
            if (service !== undefined) descriptor.handshakeDone?.(service);
          }
          // Auth spec, "Authentication Handshake": an arbiter (RSArbiter) holds no users, so no authentication is
          // possible there and the handshake is complete. Behind a load balancer the server is a LoadBalancer, whatever
          // its reply says (load balancer spec, "Monitoring": its ServerType is LoadBalancer): it is always authenticated.
          if (s.credentials !== undefined && (s.loadBalanced || !isArbiter(reply))) {
            phase = 'auth';
            connection.reauthenticate = await authenticate(
              (db, cmd) => connection.command(db, cmd, { timeoutMS: 0 }),
              s.credentials,
              reply,
              conversation.signal,
              speculative,
              remainingMS,
              host,
              deadline.hold,
            );
          }
          if (subscriber.closed) return;
          // Errored meanwhile (the server sent a reply nobody asked for, or closed the connection right behind its
          // last reply): the establishment failed. Handed out, the pool would close it as perished and establish
          // another for the same checkout, as often as the server does it.
          if (connection.errored) throw connection.error ?? new MongoNetworkError(address, `connection to ${address} closed during establishment`);
          delivered = true;
          // From now on its commands are the application's: published (the handshake's and authentication's never are).
          connection.commandEvents = s.commandEvents;
          subscriber.next(connection);
          subscriber.complete();
        })
        .catch(fail);
    };
    return () => {
      deadline.end();
      signal.removeEventListener('abort', onAbort);
      if (!delivered) {
        conversation.abort();
        tunnelled?.destroy();
        socket.destroy();
      }
    };
  });
}

/** One attempt at one of a host name's addresses: the address (`ip:port`, `[ip6]:port`) and what it met, once known. */
interface Attempt {
  readonly address: string;
  outcome?: string;
}

/**
 * The attempts `socket` makes at a host name's several addresses (Node's `connectionAttempt*` events, emitted only
 * when it tries more than one), in order, recorded until it connects. `selection`: the autoSelectFamily options given,
 * for the attempt timeout an abandoned attempt is said to have waited (Node's default when not given; under 10 ms
 * counts as 10, as Node counts it).
 */
function recordAttempts(socket: net.Socket, selection: EstablishSettings['addressSelection']): Attempt[] {
  const attempts: Attempt[] = [];
  const attemptMS = Math.max(10, selection.autoSelectFamilyAttemptTimeout ?? net.getDefaultAutoSelectFamilyAttemptTimeout());
  // Node tries one address at a time: each failure or abandonment is that of the attempt started last.
  const started = (ip: string, port: number): void => void attempts.push({ address: writtenAddress(ip, port) });
  const failed = (_ip: string, _port: number, _family: number, error: Error): void => {
    const attempt = attempts.at(-1);
    if (attempt !== undefined) attempt.outcome = error.message;
  };
  const abandoned = (): void => {
    const attempt = attempts.at(-1);
    if (attempt !== undefined) attempt.outcome = `${attempt.address} did not answer within autoSelectFamilyAttemptTimeout (${attemptMS} ms)`;
  };
  socket.on('connectionAttempt', started).on('connectionAttemptFailed', failed).on('connectionAttemptTimeout', abandoned);
  socket.once('connect', () => {
    socket.off('connectionAttempt', started).off('connectionAttemptFailed', failed).off('connectionAttemptTimeout', abandoned);
  });
  return attempts;
}

/**
 * What the attempts at a host name's several addresses met, for connectTimeoutMS elapsing before any connected:
 * `; <outcome>; …; <address> had not answered`, each in order (Node's error message for a failed one); `''` when one
 * address or none was tried (nothing to add to the host name's timeout).
 */
function attemptsDetail(attempts: readonly Attempt[]): string {
  if (attempts.length < 2) return '';
  return attempts.map((a) => `; ${a.outcome ?? `${a.address} had not answered`}`).join('');
}

/**
 * What a socket error met while connecting says. A host name that resolves to several addresses (`localhost` as ::1
 * and 127.0.0.1) is tried address by address, and when every attempt fails Node reports an AggregateError whose own
 * message is empty: the message of each attempt then, in order. A refusal by Node's permission model says how to allow it.
 */
function connectErrorDetail(error: Error): string {
  // A host name's lookup refused by the permission model says only `getaddrinfo ERR_ACCESS_DENIED <host>`.
  return withPermissionRefusal(error.message !== '' ? error.message : attemptsMessage(error), error);
}

/** The messages of an AggregateError's attempts, in order; else the error's code or name. */
function attemptsMessage(error: Error): string {
  const attempts = error instanceof AggregateError ? (error.errors as unknown[]).map((e) => (e instanceof Error ? e.message : String(e))) : [];
  return attempts.filter((m) => m !== '').join('; ') || ((error as NodeJS.ErrnoException).code ?? error.name);
}

/** Whether a hello reply describes an RSArbiter (SDAM: `arbiterOnly: true` with a `setName`). */
function isArbiter(reply: Record<string, unknown>): boolean {
  return reply.arbiterOnly === true && typeof reply.setName === 'string';
}

const DNS_ERRORS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);

/**
 * Errors of an address with no route to it: no route to its network from this host (ENETUNREACH: an IPv6 address of
 * a dual-stack name on a client without IPv6, say), or no host answering at it (EHOSTUNREACH: no reply to ARP or
 * neighbour discovery, a router's ICMP "host unreachable", or a firewall rejecting with "host prohibited"). The
 * connection never reached a listening server, and none of these depends on its load: its load cannot have caused them.
 */
const NO_ROUTE_ERRORS = new Set(['ENETUNREACH', 'EHOSTUNREACH']);

/**
 * Errors of a connect this host's own policy refused before anything was sent: a local firewall rule (EPERM, EACCES
 * from the kernel's packet filter), a broadcast address, a Unix domain socket its permissions do not let this
 * process write to (EACCES), or Node's permission model (ERR_ACCESS_DENIED: `--permission` without `--allow-net`,
 * Node.js 25 and later). The server was never reached: its load cannot have caused them.
 */
const HOST_POLICY_ERRORS = new Set(['EPERM', 'EACCES', 'ERR_ACCESS_DENIED']);

/**
 * Whether a connect error comes of DNS, of this host's own resources or policy, or of an address with no route to it
 * only: for a host name whose addresses were each tried (an AggregateError, its `code` the first attempt's), every
 * attempt did; one attempt the server could have failed (refused, reset, timed out) makes the whole error one an
 * overloaded server may cause.
 */
function isHostSideError(cause: NodeJS.ErrnoException | undefined): boolean {
  return connectAttempts(cause).every((e) => {
    const code = systemErrorCode(e);
    return DNS_ERRORS.has(code) || LOCAL_RESOURCE_ERRORS.has(code) || NO_ROUTE_ERRORS.has(code) || HOST_POLICY_ERRORS.has(code);
  });
}

/**
 * The errors of a connect's attempts: for a host name tried address by address, the AggregateError's own errors (one
 * per address); else the connect error alone.
 */
function connectAttempts(cause: unknown): readonly unknown[] {
  return cause instanceof AggregateError && Array.isArray(cause.errors) && cause.errors.length > 0 ? cause.errors : [cause];
}

/** A Node system error's code (ECONNREFUSED, ENOTFOUND, ...); '' for anything without a string code. */
function systemErrorCode(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | null | undefined)?.code;
  return typeof code === 'string' ? code : '';
}

/**
 * Whether an establishment error is a connect the server's host refused (ECONNREFUSED: nothing listens on the port,
 * as while the server restarts; for a Unix domain socket, ENOENT too: its server removed the socket file as it shut
 * down, as mongod does), rather than a connection the server accepted and then closed or left unanswered, which is
 * how an overloaded server sheds new connections (client backpressure spec, "Overload Errors": the connection closed
 * before the TLS handshake or the hello completes, or queued past connectTimeoutMS). For a host name tried address by
 * address, at least one attempt was refused and every other one had no route from this host (ENETUNREACH,
 * EHOSTUNREACH, EADDRNOTAVAIL: `localhost`'s ::1 where IPv6 is off), so none reached a server that could be
 * overloaded. Such an error still carries the backpressure labels (CMAP asks for them on every network error of
 * establishment that cannot be told never to come of overload: a server whose listen queue overflows refuses connects
 * on some systems). Through a SOCKS5 proxy, a connect the proxy's own port refused is one too (its cause is that
 * ECONNREFUSED), though such an error never carries the labels; the server's refusal then comes as the proxy's reply
 * (connection refused, 0x05), which is not one. Never throws.
 *
 * Source: extension (Node's system error codes; client backpressure spec, "Overload Errors").
 */
export function isRefusedConnect(error: unknown): boolean {
  if (!(error instanceof MongoNetworkError)) return false;
  const codes = connectAttempts(error.cause).map(systemErrorCode);
  const refused = (code: string): boolean => REFUSED_ERRORS.has(code);
  return codes.some(refused) && codes.every((code) => refused(code) || NO_ROUTE_ERRORS.has(code) || code === 'EADDRNOTAVAIL');
}

/** A connect refused: nothing listens on the TCP port (ECONNREFUSED), or at the Unix domain socket path (ENOENT). */
const REFUSED_ERRORS = new Set(['ECONNREFUSED', 'ENOENT']);

/**
 * The codes Node gives a peer certificate that fails verification: OpenSSL's X509_V_ERR_* names without the prefix
 * (`UNSPECIFIED` for one Node does not name).
 */
const CERTIFICATE_ERRORS = new Set([
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_CRL', 'UNABLE_TO_DECRYPT_CERT_SIGNATURE', 'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY', 'CERT_SIGNATURE_FAILURE', 'CRL_SIGNATURE_FAILURE', 'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED', 'CRL_NOT_YET_VALID', 'CRL_HAS_EXPIRED', 'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD', 'ERROR_IN_CRL_LAST_UPDATE_FIELD', 'ERROR_IN_CRL_NEXT_UPDATE_FIELD', 'OUT_OF_MEM',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_CHAIN_TOO_LONG', 'CERT_REVOKED', 'INVALID_CA', 'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'HOSTNAME_MISMATCH', 'UNSPECIFIED',
]);

/**
 * Whether `cause` is an error of the TLS layer itself rather than of the socket under it: an OpenSSL error (code
 * `ERR_SSL_*` or `ERR_OSSL_*`, or carrying OpenSSL's `library`: a protocol version refused, a peer that does not speak
 * TLS, a handshake alert), an error of Node's TLS layer (`ERR_TLS_*`: the host name not matching the certificate,
 * among others), or a certificate that failed verification. Socket I/O during the TLS handshake (ECONNRESET, EPIPE,
 * ETIMEDOUT, the peer closing it) is not one of them.
 */
function isTlsError(cause: unknown): boolean {
  if (typeof cause !== 'object' || cause === null) return false;
  const { code, library } = cause as { code?: unknown; library?: unknown };
  if (typeof library === 'string') return true;
  return typeof code === 'string' && (/^ERR_(SSL|OSSL|TLS)_/.test(code) || CERTIFICATE_ERRORS.has(code));
}

/**
 * CMAP "Backpressure-enabled": network errors and timeouts before or during the hello get the SystemOverloadedError and
 * RetryableError labels (connect errors, the connection reset or closed, EOF during the TLS handshake, connectTimeoutMS
 * elapsing), unless they cannot come from an overloaded server: any failure to connect to a SOCKS5 proxy or of the
 * SOCKS5 exchange (SOCKS5 support spec: like a network error that does not indicate overload), DNS failures and
 * connectTimeoutMS elapsing during the DNS lookup (no byte has gone to the server: a slow resolver, or Node's thread
 * pool busy with other work), this host
 * running out of file descriptors, memory, socket buffers or local ports (EMFILE, ENFILE, ENOMEM, ENOBUFS,
 * EADDRNOTAVAIL), a connect this host's policy refused (EPERM, EACCES), no route to the address (ENETUNREACH,
 * EHOSTUNREACH; for a host name tried address by address, these only when every attempt failed so, see
 * {@link isHostSideError}), every TLS error that is not socket I/O (see {@link isTlsError}: certificate or host name
 * verification, a protocol version refused, a peer that does not speak TLS), and a malformed reply to the hello (its
 * cause a {@link WireProtocolError}: a peer that is not a MongoDB server, or a broken one). Errors during
 * authentication never get them.
 */
function withBackpressureLabels(error: unknown, phase: Phase): unknown {
  if (!(error instanceof MongoNetworkError) || phase === 'auth' || phase === 'proxy' || phase === 'lookup') return error;
  const cause = error.cause as NodeJS.ErrnoException | undefined;
  if (!isHostSideError(cause) && !isTlsError(cause) && !(cause instanceof WireProtocolError)) {
    error.errorLabels.add(ErrorLabel.SystemOverloadedError);
    error.errorLabels.add(ErrorLabel.RetryableError);
  }
  return error;
}
