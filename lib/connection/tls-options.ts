/**
 * TLS settings of a connection, in the URI options' terms, turned into Node `tls.connect` options.
 *
 * Source: URI options spec (tls, tlsCAFile, tlsCertificateKeyFile, tlsCertificateKeyFilePassword,
 * tlsAllowInvalidCertificates, tlsAllowInvalidHostnames, tlsInsecure); Node's `tls`.
 */
import { createHash, createHmac, createPrivateKey, randomBytes, X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import { isIP } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import * as nodeTls from 'node:tls';
import type { ConnectionOptions as NodeTlsOptions, SecureContext, SecureContextOptions } from 'node:tls';
import { InvalidOptionError } from '../errors';
import { optionValues, type ListsEveryOption } from '../options';
import { withPermissionRefusal } from '../permission-model';
import { LOCAL_RESOURCE_ERRORS } from './local-resource-errors';

/**
 * TLS settings. The files are read when the connection factory is made, and read again by the next connection to open
 * once any of them was replaced or written on disk (one `stat` per file per connection; connections open keep theirs;
 * files that cannot be used leave the last ones in use, with a process warning `RXCMAP_TLS_FILES_UNUSABLE`). The
 * factory (and a pool or client that makes one) throws {@link InvalidOptionError} for `tls: false` with another TLS option, `tlsInsecure`
 * combined with tlsAllowInvalidCertificates or tlsAllowInvalidHostnames, a file it cannot read, a tlsCAFile without a
 * PEM certificate, or a client key it cannot use (tlsCertificateKeyFilePassword missing or wrong for an encrypted key;
 * no key and certificate in the file), or a tlsCRLFile without a revocation list that parses.
 *
 * Source: URI options spec (tls, tlsCAFile, tlsCertificateKeyFile, tlsCertificateKeyFilePassword,
 * tlsAllowInvalidCertificates, tlsAllowInvalidHostnames, tlsInsecure, "Conflicting TLS options"); `tlsServerName`:
 * extension (Node's `tls.connect` `servername`); `tlsCRLFile`: extension (the official Node.js driver's option of that
 * name; Node's secure context `crl`).
 */
export interface TlsSettings {
  /**
   * Use TLS. Implied by any other option of these, whatever its value; `false` with any of them set is an
   * InvalidOptionError naming `tls`.
   */
  tls?: boolean | undefined;
  /** PEM file of the certificate authorities to trust (default: Node's bundled roots). */
  tlsCAFile?: string | undefined;
  /** PEM file with the client certificate and its private key. */
  tlsCertificateKeyFile?: string | undefined;
  /** Passphrase of the private key in tlsCertificateKeyFile. */
  tlsCertificateKeyFilePassword?: string | undefined;
  /**
   * Accept any server certificate (unsafe; for tests). Its host names go unchecked too: a certificate that is not
   * verified proves no name, so this implies tlsAllowInvalidHostnames (as with Node's `rejectUnauthorized: false`).
   */
  tlsAllowInvalidCertificates?: boolean | undefined;
  /** Accept a certificate whose names do not match the host (unsafe; for tests). */
  tlsAllowInvalidHostnames?: boolean | undefined;
  /** Both of the above. */
  tlsInsecure?: boolean | undefined;
  /**
   * The SNI server name and the name the certificate must carry. Default: the host, unless it is an IP address (no
   * SNI; the certificate must carry the IP address) or a Unix domain socket path (no SNI; the certificate must carry
   * `localhost`). A trailing dot (a fully qualified `db.example.com.`) is not sent (RFC 6066, section 3).
   */
  tlsServerName?: string | undefined;
  /**
   * PEM file of certificate revocation lists (`-----BEGIN X509 CRL-----` blocks, each signed by the authority it
   * speaks for): a certificate they revoke is refused (error code `CERT_REVOKED`); the server's chain is then checked
   * against them, so each authority of it needs its list here. On Node.js 20 a context with revocation lists leaves
   * out the certificates of `NODE_EXTRA_CA_CERTS` (Node.js 24 keeps them): give such a CA with tlsCAFile there.
   */
  tlsCRLFile?: string | undefined;
}

/**
 * Whether the settings ask for TLS: `tls: true`, or any other TLS option (tlsCAFile, tlsCertificateKeyFile,
 * tlsCertificateKeyFilePassword, tlsAllowInvalidCertificates, tlsAllowInvalidHostnames, tlsInsecure, tlsServerName,
 * tlsCRLFile) set, whatever its value, unless `tls` is false. The settings are read with `optionValue` (none from
 * Object.prototype).
 *
 * @throws {InvalidOptionError} naming tls when it is false and another TLS option is set.
 */
export function wantsTls(settings: TlsSettings): boolean {
  const s = optionValues(settings, TLS_OPTION_NAMES);
  const other = TLS_OPTION_NAMES.find((k) => k !== 'tls' && s[k] !== undefined);
  if (s.tls === false) {
    if (other !== undefined) throw new InvalidOptionError('tls', false, `true when ${other} is set`);
    return false;
  }
  return s.tls === true || other !== undefined;
}

/** The settings a secure context is made of: the files, and the client key's passphrase. */
type TlsFiles = Pick<TlsSettings, 'tlsCAFile' | 'tlsCertificateKeyFile' | 'tlsCertificateKeyFilePassword' | 'tlsCRLFile'>;

/**
 * Node `tls.connect` options for `host`, reading the files named in `s`, with one `secureContext` made now (from the
 * files, else Node's default trust store; by `contextOf`, which may give one made of the same files before) for every
 * connection made with them; so Node's TLS defaults (its `DEFAULT_MIN_VERSION`, or default CA certificates set by
 * `tls.setDefaultCACertificates()`) changed later do not reach them. `host` is undefined for a Unix domain socket: no
 * SNI server name is sent unless tlsServerName gives one, and Node verifies the certificate against `localhost`. The
 * settings are read with `optionValue` (none from Object.prototype).
 *
 * @throws {InvalidOptionError} naming tlsCAFile or tlsCertificateKeyFile when the file cannot be read (a PEM text
 *   given in place of its path, a private key say, is not shown); tlsCAFile
 *   when it holds no PEM certificate that parses (Node would skip everything else in silence, trusting no one);
 *   tlsCertificateKeyFilePassword (never showing it) when the private key in tlsCertificateKeyFile is encrypted and
 *   that passphrase is missing or does not decrypt it; tlsCertificateKeyFile when it holds no usable private key and
 *   certificate (no PEM, a certificate without its key, a key that is not the certificate's); tlsCRLFile when the
 *   file cannot be read or holds no PEM revocation list, or one that is cut short or does not parse; or tlsInsecure
 *   when it is combined with tlsAllowInvalidCertificates or tlsAllowInvalidHostnames.
 */
export function nodeTlsOptions(settings: TlsSettings, host: string | undefined, contextOf: (files: TlsFiles) => SecureContext = (files) => secureContextOfFiles(files)): NodeTlsOptions {
  const s = optionValues(settings, TLS_OPTION_NAMES);
  if (s.tlsInsecure !== undefined && (s.tlsAllowInvalidCertificates !== undefined || s.tlsAllowInvalidHostnames !== undefined)) {
    throw new InvalidOptionError('tlsInsecure', s.tlsInsecure, 'not combined with tlsAllowInvalidCertificates or tlsAllowInvalidHostnames');
  }
  const allowInvalidCertificates = s.tlsInsecure === true || s.tlsAllowInvalidCertificates === true;
  const allowInvalidHostnames = s.tlsInsecure === true || s.tlsAllowInvalidHostnames === true;
  const options: NodeTlsOptions = { rejectUnauthorized: !allowInvalidCertificates };
  // One secure context, made here, for every connection: each TLS socket keeps the options it was made with, so
  // given the key, its passphrase and the CA bundle, every connection would show them to inspection (util.inspect of
  // a Connection). Without files too (Node's bundled roots, as with `tls=true` alone): Node would otherwise make a
  // context per connection, an OpenSSL context and its trust store set up each time, kept for the socket's life.
  options.secureContext = contextOf(s);
  // RFC 6066, section 3: the SNI host name is sent "without a trailing dot"; a fully qualified host ("db.example.com.")
  // would otherwise reach SNI routing as a name no route or certificate selection carries. Node's certificate check
  // ignores a trailing dot on either side, so the name checked is unchanged.
  const servername = (s.tlsServerName ?? (host !== undefined && isIP(host) === 0 ? host : undefined))?.replace(/\.$/, '');
  if (servername !== undefined && servername !== '') options.servername = servername;
  if (allowInvalidHostnames) options.checkServerIdentity = () => undefined;
  return options;
}

/** The key of the passphrases' HMACs in {@link CONTEXTS}'s keys: random, for this process only. */
const PASSPHRASE_KEY = randomBytes(32);

/**
 * For each set of TLS files (their absolute paths and the passphrase's HMAC, as JSON), the versions last read and the
 * secure context made from them, held weakly (the factories using it hold it): made once per set of files as they are
 * in the process, by the first factory of them, then once per change. An entry goes with the last factory of its files
 * (see {@link FORGET}).
 */
const CONTEXTS = new Map<string, { versions: string; context: WeakRef<SecureContext> }>();

/**
 * For each set of TLS file paths read again (joined by line feeds), the versions and warning last given for them: one
 * warning per change in the process. An entry goes with the last factory of its paths (see {@link FORGET}).
 */
const WARNED = new Map<string, string>();

/**
 * How many factories alive (their functions of {@link currentTlsOptions}) use each key of {@link CONTEXTS} (JSON, `[`
 * first) and of {@link WARNED} (absolute paths): a process that makes clients of ever new files (a tenant's
 * certificate written to a new directory) keeps no entry of the files it no longer uses.
 */
const USERS = new Map<string, number>();

/** Forgets the keys of a function of {@link currentTlsOptions} collected with its factory. */
const FORGET = new FinalizationRegistry<readonly string[]>((keys) => {
  for (const key of keys) {
    const users = (USERS.get(key) ?? 1) - 1;
    if (users > 0) {
      USERS.set(key, users);
    } else {
      USERS.delete(key);
      CONTEXTS.delete(key);
      WARNED.delete(key);
    }
  }
});

/** How many sets of TLS files the process remembers a reading or a warning of (for the tests; not in the package). */
export function rememberedTlsFileSets(): number {
  return CONTEXTS.size + WARNED.size;
}

/**
 * {@link nodeTlsOptions} for every connection of a factory, as its TLS files are now: the options made when this is
 * called (the files read then, errors thrown then; or, when a factory of the process made a secure context of the same
 * files as they are now, with the same passphrase and under the same Node TLS defaults, that context, the files not
 * read again: a client makes a pool and a monitor for each of its hosts, and a CA bundle of 145 authorities takes 23 ms
 * of the event loop to load, a 4.4 MB revocation list 125 ms), and given again by the function returned, which a
 * connection calls as it opens its socket. That function first looks at the files (tlsCAFile, tlsCertificateKeyFile,
 * tlsCRLFile; one `stat` each; a relative path resolved against the process's directory when this is called, not where
 * it has moved since). When any of them was replaced or written since it was last read (its device, inode, size,
 * modification or change time differ: a Kubernetes Secret's or cert-manager's swapped symbolic link, a `mv` over it, a
 * file written in place), all of them are read again and a new secure context made from them, for this connection and
 * those after it; one per change in the process: the other factories of the same files and passphrase that find the
 * same change use it. A client certificate renewed before it expires, a CA bundle that gained a new authority, or a
 * revocation list refreshed before its nextUpdate passed (after it, OpenSSL refuses every certificate the list speaks
 * for: `CRL_HAS_EXPIRED`) is so used by the next connection, without a new pool or client. Connections already open
 * keep the certificates they were made with (as mongod's `rotateCertificates` does for its own): with MONGODB-X509, a
 * pool holds connections of the old certificate's subject and of the new one until the old ones close.
 *
 * Files that cannot be used as read again (a copy half-written, a key not the new certificate's, a file removed, a path
 * that now leads to a FIFO, a device or a directory, which is opened without waiting and not read) leave the previous
 * context in use, with one process warning (code `RXCMAP_TLS_FILES_UNUSABLE`, the option, path and reason, as {@link
 * InvalidOptionError} gives them: never a key or passphrase) per change in the process, however many factories (a
 * client's pool and monitor of each host) and connections find it; the next change is read again. A read that failed
 * for want of the process's resources (EMFILE, ENFILE, ENOMEM: no file descriptor left in a burst of sockets) is tried
 * again by the next connection, without another warning.
 *
 * @throws {InvalidOptionError} as {@link nodeTlsOptions}, when this is called; the function returned throws none.
 *
 * Source: extension (mongod's `rotateCertificates`; the Go driver's reload of its TLS files, GODRIVER-3916; the
 * official Node.js driver reads them once, when a client connects).
 */
export function currentTlsOptions(settings: TlsSettings, host: string | undefined): () => NodeTlsOptions {
  const given = optionValues(settings, TLS_OPTION_NAMES);
  // The files the paths name now: a relative path is not read again from another directory the process moved to
  // (process.chdir), where the same name may be another file (another authority's).
  const absolute = (path: string | undefined): string | undefined => (path === undefined ? undefined : resolvePath(path));
  const s = { ...given, tlsCAFile: absolute(given.tlsCAFile), tlsCertificateKeyFile: absolute(given.tlsCertificateKeyFile), tlsCRLFile: absolute(given.tlsCRLFile) };
  const paths = [s.tlsCAFile, s.tlsCertificateKeyFile, s.tlsCRLFile].filter((path) => path !== undefined);
  // Looked at before they are read: a change after this is seen by the next connection (at worst read twice).
  let versions = paths.map(fileVersion);
  if (paths.length === 0) {
    const fixed = nodeTlsOptions(given, host);
    return () => fixed;
  }
  const pathsKey = paths.join('\n');
  // What the secure context is made of: the files at their places (one absent is not another's), and the passphrase
  // (its HMAC under a key of this process's own: the map key outlives the factory, and a plain digest of a weak
  // passphrase found in a heap snapshot could be guessed offline).
  const passphrase = s.tlsCertificateKeyFilePassword === undefined ? null : createHmac('sha256', PASSPHRASE_KEY).update(s.tlsCertificateKeyFilePassword).digest('base64');
  // And Node's TLS defaults as they are now, which a context takes as it is made: a factory made after the
  // application raised tls.DEFAULT_MIN_VERSION (or changed its ciphers, curves or default trust store) is not given a
  // context made before, and its contexts made of changed files keep the defaults it was made with.
  const defaults = tlsDefaults(s.tlsCAFile === undefined);
  const sharedKey = JSON.stringify([s.tlsCAFile ?? null, s.tlsCertificateKeyFile ?? null, s.tlsCRLFile ?? null, passphrase, defaults.key]);
  // The context another factory made of these files as they are now, else one made of them now, read as given, so
  // that errors name the paths as given.
  let options = nodeTlsOptions(given, host, (files) => sharedContext(sharedKey, versions, () => secureContextOfFiles(files)));
  const current = (): NodeTlsOptions => {
    const now = paths.map(fileVersion);
    if (now.every((version, i) => version === versions[i])) return options;
    try {
      // Made once per change in the process: every pool and monitor of a client (one each per host) reads the same
      // files, and a revocation list of a large authority takes 100 ms of the event loop to parse.
      const context = sharedContext(sharedKey, now, () => secureContextOfFiles(s, readReplacedFile, defaults.options));
      options = { ...options, secureContext: context };
      versions = now;
    } catch (error) {
      // A read that failed for want of the process's resources (no file descriptor left in a burst of sockets, no
      // memory) says nothing of the files: the next connection reads them again, or a renewal would wait for a change.
      if (!LOCAL_RESOURCE_READ_ERRORS.has(error as Error)) versions = now;
      const message = `rxcmap: a TLS file changed on disk and cannot be used (${(error as Error).message}); new connections go on with the TLS files as last read`;
      // One warning per change in the process: every pool and monitor of a client (one each per host), and every
      // connection of each, reads the same files.
      const seen = `${now.join('\n')}\n${message}`;
      if (WARNED.get(pathsKey) === seen) return options;
      WARNED.set(pathsKey, seen);
      process.emitWarning(message, { code: 'RXCMAP_TLS_FILES_UNUSABLE' });
    }
    return options;
  };
  for (const key of [sharedKey, pathsKey]) USERS.set(key, (USERS.get(key) ?? 0) + 1);
  FORGET.register(current, [sharedKey, pathsKey]);
  return current;
}

/**
 * The secure context of the set of files `key` (see {@link CONTEXTS}) whose versions are `versions`: the one a factory
 * made of them so, else the one `make` makes now, remembered for the factories after it. Files that could not be looked
 * at ({@link UNREADABLE}) are never taken as unchanged: their context is made, and not remembered.
 *
 * @throws what `make` throws.
 */
function sharedContext(key: string, versions: readonly string[], make: () => SecureContext): SecureContext {
  const seen = versions.join('\n');
  const lookedAt = !versions.includes(UNREADABLE);
  const known = CONTEXTS.get(key);
  const shared = lookedAt && known?.versions === seen ? known.context.deref() : undefined;
  if (shared !== undefined) return shared;
  const made = make();
  if (lookedAt) CONTEXTS.set(key, { versions: seen, context: new WeakRef(made) });
  return made;
}

/**
 * Node's TLS defaults that a secure context takes as it is made (`tls.DEFAULT_MIN_VERSION`, `DEFAULT_MAX_VERSION`,
 * `DEFAULT_CIPHERS`, `DEFAULT_ECDH_CURVE`, as options that make a context of them later), and, for a context of no CA
 * file (`withTrustStore`), a digest of the default CA certificates (those `tls.setDefaultCACertificates()` sets, where
 * Node has it); `key` identifies them all.
 */
function tlsDefaults(withTrustStore: boolean): { options: SecureContextOptions; key: string } {
  const options: SecureContextOptions = {
    minVersion: nodeTls.DEFAULT_MIN_VERSION,
    maxVersion: nodeTls.DEFAULT_MAX_VERSION,
    ciphers: nodeTls.DEFAULT_CIPHERS,
    ecdhCurve: nodeTls.DEFAULT_ECDH_CURVE,
  };
  const certificates = (nodeTls as { getCACertificates?: (type: string) => readonly string[] }).getCACertificates;
  const trustStore = withTrustStore && certificates !== undefined ? createHash('sha256').update(certificates('default').join('\n')).digest('base64') : null;
  return { options, key: JSON.stringify([options.minVersion, options.maxVersion, options.ciphers, options.ecdhCurve, trustStore]) };
}

/**
 * What identifies the contents of the file at `path` without reading it: device, inode, size, modification and change
 * times of what the path leads to (symbolic links followed); {@link UNREADABLE} when it cannot be looked at (whatever
 * the reason: such a file cannot be read either).
 */
function fileVersion(path: string): string {
  try {
    const { dev, ino, size, mtimeMs, ctimeMs } = fs.statSync(path);
    return `${dev}:${ino}:${size}:${mtimeMs}:${ctimeMs}`;
  } catch {
    return UNREADABLE;
  }
}

/** The version of a file that cannot be looked at (see {@link fileVersion}). */
const UNREADABLE = 'unreadable';

/**
 * The secure context of the files named in `s` (read now with `read`), else of Node's default trust store; with the
 * protocol versions, ciphers and curves of `defaults` (else Node's defaults now).
 *
 * @throws {InvalidOptionError} as {@link nodeTlsOptions} says, for the files.
 */
function secureContextOfFiles(
  s: TlsFiles,
  read: (option: string, path: string) => Buffer = readFile,
  defaults: SecureContextOptions = {},
): SecureContext {
  const context: SecureContextOptions = { ...defaults };
  if (s.tlsCAFile !== undefined) {
    context.ca = read('tlsCAFile', s.tlsCAFile);
    checkCertificateAuthorities(context.ca, s.tlsCAFile);
  }
  if (s.tlsCertificateKeyFile !== undefined) {
    const pem = read('tlsCertificateKeyFile', s.tlsCertificateKeyFile);
    context.cert = pem;
    context.key = pem;
    if (s.tlsCertificateKeyFilePassword !== undefined) context.passphrase = s.tlsCertificateKeyFilePassword;
  }
  if (s.tlsCRLFile !== undefined) context.crl = revocationLists(s.tlsCRLFile, read);
  return secureContext(context, s);
}

/**
 * The secure context of `context`, made once (each file parsed once: a revocation file of a large authority holds
 * megabytes). When OpenSSL refuses it, the revocation lists, then the client key, are loaded alone to tell lists that
 * do not parse, or a key it cannot use (a wrong or missing passphrase, no key), from a CA file it cannot use; and a key
 * it accepted is checked against the certificate, which OpenSSL does only when both are of one type. So a file that
 * cannot be used fails here, once and typed, rather than as OpenSSL's bare error (or a missing client certificate) at
 * every connection attempt.
 */
function secureContext(context: SecureContextOptions, s: TlsFiles): SecureContext {
  let made: SecureContext;
  try {
    made = nodeTls.createSecureContext(context);
  } catch (error) {
    if (s.tlsCRLFile !== undefined) loadRevocationLists(context, s.tlsCRLFile);
    if (s.tlsCertificateKeyFile !== undefined) loadClientKey(context, s.tlsCertificateKeyFile, s.tlsCertificateKeyFilePassword);
    if (s.tlsCAFile === undefined) throw error;
    throw new InvalidOptionError('tlsCAFile', s.tlsCAFile, `a PEM file of certificate authorities (${(error as Error).message})`);
  }
  if (s.tlsCertificateKeyFile !== undefined) checkKeyMatchesCertificate(context, s.tlsCertificateKeyFile);
  return made;
}

/** What a tlsCRLFile must be, as its InvalidOptionError says. */
const CRL_FILE_ALLOWED = 'a PEM file of certificate revocation lists (-----BEGIN X509 CRL-----)';

/**
 * The revocation lists in the PEM file at `path`, one PEM block each (Node loads only the first list of a buffer it is
 * given). A file without one (a certificate given by mistake) would check nothing; a list cut short (a BEGIN line no
 * END line closes, as a partial download leaves), left out, would leave the lists before it checked alone, and a
 * certificate only it revokes trusted: both are refused. Whether each list parses is found as the secure context is
 * made (see {@link loadRevocationLists}).
 */
function revocationLists(path: string, read: (option: string, path: string) => Buffer): string[] {
  const text = read('tlsCRLFile', path).toString('latin1');
  const blocks = text.match(/-----BEGIN X509 CRL-----[\s\S]*?-----END X509 CRL-----/g) ?? [];
  const begun = text.match(/-----BEGIN X509 CRL-----/g)?.length ?? 0;
  if (begun === 0) throw new InvalidOptionError('tlsCRLFile', path, `${CRL_FILE_ALLOWED}; it holds none`);
  // Each block spans one BEGIN line to the next END line: a BEGIN line inside a block, or after the last, is unclosed.
  const unclosed = blocks.findIndex((block) => block.lastIndexOf('-----BEGIN X509 CRL-----') > 0);
  if (unclosed !== -1 || blocks.length < begun) {
    const at = unclosed === -1 ? blocks.length + 1 : unclosed + 1;
    throw new InvalidOptionError('tlsCRLFile', path, `${CRL_FILE_ALLOWED}; its list ${at} of ${begun} has no line -----END X509 CRL----- closing it`);
  }
  return blocks;
}

/**
 * Loads the revocation lists of `context` alone; throws the InvalidOptionError naming tlsCRLFile when they do not
 * parse, which Node reports as a bare "Failed to parse CRL", naming no file.
 */
function loadRevocationLists(context: SecureContextOptions, path: string): void {
  try {
    nodeTls.createSecureContext({ crl: context.crl });
  } catch (error) {
    throw new InvalidOptionError('tlsCRLFile', path, `${CRL_FILE_ALLOWED} (${(error as Error).message})`);
  }
}

/** Loads the client certificate and key of `context` alone; throws the InvalidOptionError that names what is wrong. */
function loadClientKey(context: SecureContextOptions, file: string, password: string | undefined): void {
  try {
    nodeTls.createSecureContext({ cert: context.cert, key: context.key, passphrase: context.passphrase });
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    // A wrong passphrase is reported as a bad decrypt, except when the bytes it decrypts to end in valid padding
    // (about one passphrase in 200 for AES-CBC): OpenSSL then fails on them as on a malformed key.
    if (code === 'ERR_OSSL_BAD_DECRYPT' || (ENCRYPTED_KEY.test(String(context.key)) && !decrypts(context.key, password))) {
      throw new InvalidOptionError(
        'tlsCertificateKeyFilePassword',
        password,
        password === undefined
          ? `given: the private key in tlsCertificateKeyFile ${file} is encrypted`
          : `the passphrase of the encrypted private key in tlsCertificateKeyFile ${file} (it does not decrypt it)`,
      );
    }
    throw new InvalidOptionError('tlsCertificateKeyFile', file, `a PEM file with the client certificate and its private key (${message})`);
  }
}

/** A PEM private key encrypted with a passphrase: PKCS#8 (`ENCRYPTED PRIVATE KEY`) or the legacy `Proc-Type` form. */
const ENCRYPTED_KEY = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: *4, *ENCRYPTED/;

/** Whether `password` decrypts the encrypted private key in `key` (a PEM, the certificate beside it allowed). */
function decrypts(key: SecureContextOptions['key'], password: string | undefined): boolean {
  try {
    createPrivateKey({ key: String(key), format: 'pem', passphrase: password ?? '' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Throws unless the private key of `context` is its certificate's. OpenSSL checks a key against the certificate only
 * when both are of one type: an EC key beside an RSA certificate is loaded without a word, and every connection then
 * offers no client certificate. A form OpenSSL loaded but these cannot read is left to it.
 */
function checkKeyMatchesCertificate(context: SecureContextOptions, file: string): void {
  let matches = true;
  try {
    matches = new X509Certificate(context.cert as Buffer).checkPrivateKey(createPrivateKey({ key: context.key as Buffer, passphrase: context.passphrase }));
  } catch {
    // unreadable here: not checked
  }
  if (!matches) {
    throw new InvalidOptionError('tlsCertificateKeyFile', file, `a PEM file with the client certificate and its private key (its private key is not the certificate's)`);
  }
}

/** The names of the PEM blocks Node reads a CA certificate from (OpenSSL's plain and trusted-certificate forms). */
const CERTIFICATE_LABELS = new Set(['CERTIFICATE', 'TRUSTED CERTIFICATE', 'X509 CERTIFICATE']);

/** A PEM block's first line (at the start of a line, as OpenSSL reads it), and its last. */
const PEM_BEGIN = /^-----BEGIN (.*)-----[ \t\r]*$/gm;
const PEM_END = /^-----END (.*)-----[ \t\r]*$/gm;

/**
 * Throws unless Node would load at least one certificate from `pem`. Node reads the PEM blocks of a CA file in order
 * and skips those that hold no certificate (a key, say), but stops at the first certificate block it cannot read (a
 * corrupt one, one with bytes after its certificate, an END line of another name): the certificates after it are
 * never loaded. A file that yields none leaves the authority it names untrusted, and every connection to a server it
 * signed then fails verification as if the server's certificate were wrong. Each block is read from its PEM text by
 * X509Certificate, which reads it as Node's loader does (the trust settings of the trusted forms included).
 */
function checkCertificateAuthorities(pem: Buffer, file: string): void {
  const allowed = 'a PEM file of certificate authority certificates (-----BEGIN CERTIFICATE-----)';
  // (A UTF-8 byte order mark before the first line is read past.)
  const text = pem.toString('latin1').replace(/^\xEF\xBB\xBF/, '');
  const blocks = [...text.matchAll(PEM_BEGIN)].filter((begin) => CERTIFICATE_LABELS.has(begin[1]));
  if (blocks.length === 0) throw new InvalidOptionError('tlsCAFile', file, `${allowed}; it holds none`);
  const reason = certificateBlockError(text, blocks[0]);
  if (reason === undefined) return;
  // Node reads no certificate after the first it cannot read: say so when a later one would have done.
  const later = blocks.slice(1).some((begin) => certificateBlockError(text, begin) === undefined);
  throw new InvalidOptionError(
    'tlsCAFile',
    file,
    later ? `${allowed}; its first certificate does not parse (${reason}), and none after it is read` : `${allowed}; none of its certificates parses (${reason})`,
  );
}

/** Why the certificate block that `begin` opens in `text` cannot be read, as Node reads it; undefined when it can. */
function certificateBlockError(text: string, begin: RegExpMatchArray): string | undefined {
  const from = begin.index!;
  PEM_END.lastIndex = from + begin[0].length;
  const end = PEM_END.exec(text);
  if (end === null || end[1] !== begin[1]) return `no line -----END ${begin[1]}----- closes it`;
  try {
    new X509Certificate(text.slice(from, end.index + end[0].length));
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * The contents of the file at `path`, named by option `option`.
 *
 * @throws {InvalidOptionError} naming `option` when the file cannot be read (the path and the reason shown); when
 *   `path` holds a PEM block (`-----BEGIN`: the text of a file, a private key perhaps, given instead of its path),
 *   without showing it.
 */
function readFile(option: string, path: string): Buffer {
  try {
    return fs.readFileSync(path);
  } catch (error) {
    throw readError(option, path, error);
  }
}

/**
 * The errors of {@link readError} for a read that failed with one of {@link LOCAL_RESOURCE_ERRORS}, not because of the
 * file.
 */
const LOCAL_RESOURCE_READ_ERRORS = new WeakSet<Error>();

/** The InvalidOptionError of option `option` whose file `path` could not be opened or read (with `error`). */
function readError(option: string, path: string, error: unknown): InvalidOptionError {
  // A PEM where a path belongs (the driver's `key` and `cert` options take the text): never echoed, a key least.
  if (path.includes('-----BEGIN')) return new InvalidOptionError(option, '<PEM text not shown>', 'the path of a readable PEM file, not its text');
  const code = (error as NodeJS.ErrnoException).code;
  const made = new InvalidOptionError(option, path, `a readable PEM file (${withPermissionRefusal(code ?? (error as Error).message, error)})`);
  if (code !== undefined && LOCAL_RESOURCE_ERRORS.has(code)) LOCAL_RESOURCE_READ_ERRORS.add(made);
  return made;
}

/**
 * The contents of the file at `path`, named by option `option`, read again because it changed while the process runs:
 * as {@link readFile}, but a path that now leads to something other than a regular file (a FIFO, a device such as
 * /dev/zero, a directory) is opened without waiting and never read. A read of a FIFO waits until a writer closes it,
 * and the event loop with it (this runs as a connection opens its socket); a device could fill the memory. At startup
 * such a path is read as it is (a shell's process substitution, `<(…)`, is a pipe read once).
 *
 * @throws {InvalidOptionError} naming `option` as {@link readFile}, or when the path is not a regular file.
 */
function readReplacedFile(option: string, path: string): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (error) {
    throw readError(option, path, error);
  }
  try {
    if (!fs.fstatSync(fd).isFile()) throw new InvalidOptionError(option, path, 'a regular file (a FIFO, a device or a directory is not read)');
    return fs.readFileSync(fd);
  } catch (error) {
    if (error instanceof InvalidOptionError) throw error;
    throw readError(option, path, error);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The option names of {@link TlsSettings} (a readonly tuple), in the URI options spec's order.
 *
 * Source: URI options spec (the tls options); `tlsServerName`: extension (Node's `servername`); `tlsCRLFile`:
 * extension (the official Node.js driver's option).
 */
export const TLS_OPTION_NAMES = [
  'tls',
  'tlsCAFile',
  'tlsCertificateKeyFile',
  'tlsCertificateKeyFilePassword',
  'tlsAllowInvalidCertificates',
  'tlsAllowInvalidHostnames',
  'tlsInsecure',
  'tlsServerName',
  'tlsCRLFile',
] as const satisfies readonly (keyof TlsSettings)[];
true satisfies ListsEveryOption<TlsSettings, typeof TLS_OPTION_NAMES>;
