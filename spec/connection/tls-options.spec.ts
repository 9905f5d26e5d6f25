/**
 * TLS settings as a production user gives them: an encrypted client key and its passphrase, files that hold no key
 * or the wrong one, and what an established TLS connection lets inspection show.
 */
import { expect } from 'chai';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { inspect } from 'node:util';
import * as tls from 'node:tls';
import nodeTls = require('node:tls');
import { firstValueFrom, from } from 'rxjs';
import { InvalidOptionError, MongoNetworkError, connect, connectionFactory } from '../../lib';
import { parseConnectionString } from '../../lib/connection-string';
import { nodeTlsOptions, wantsTls } from '../../lib/connection/tls-options';
import { EmbeddedServer } from '../../lib/testing';
import { establishOne } from '../support/endpoint';

const fixtures = path.resolve(__dirname, '../fixtures/tls');
const file = (name: string): string => path.join(fixtures, name);
const PASSPHRASE = 'Key-Pa55phrase-of-the-test';

/** The DER of the fixtures' CA certificate. */
const caDer = (): Buffer => new crypto.X509Certificate(fs.readFileSync(file('ca.pem'))).raw;

/** `der` as a PEM block labelled `label`, in lines of 64 characters. */
const pemBlock = (der: Buffer, label: string): string =>
  `-----BEGIN ${label}-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END ${label}-----\n`;

/** OpenSSL's trust settings of a trusted certificate (X509_CERT_AUX): trusted for TLS server authentication. */
const SERVER_AUTH_TRUST = Buffer.from('300c300a06082b06010505070301', 'hex');

describe('TLS settings (tls-options)', function () {
  let dir: string;
  /** The client key, encrypted with PASSPHRASE, then the client certificate. */
  let encrypted: string;
  /** The client key in clear, then the client certificate. */
  let clear: string;
  /** A file of text that is no PEM at all. */
  let garbage: string;
  let keyPem: string;
  before(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-tls-options-'));
    const pem = fs.readFileSync(file('client.pem'), 'utf8');
    const key = crypto.createPrivateKey(pem);
    const cert = new crypto.X509Certificate(pem).toString();
    keyPem = key.export({ type: 'pkcs8', format: 'pem' }) as string;
    encrypted = path.join(dir, 'client-encrypted.pem');
    fs.writeFileSync(encrypted, key.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: PASSPHRASE }) + cert);
    clear = path.join(dir, 'client-clear.pem');
    fs.writeFileSync(clear, keyPem + cert);
    garbage = path.join(dir, 'garbage.pem');
    fs.writeFileSync(garbage, 'not a certificate\n');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  describe('a client key that cannot be used is an InvalidOptionError when the settings are read', function () {
    const refused = (settings: Parameters<typeof nodeTlsOptions>[0]): InvalidOptionError => {
      const error = (() => {
        try {
          nodeTlsOptions(settings, 'localhost');
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error).to.be.instanceOf(InvalidOptionError);
      const e = error as InvalidOptionError;
      expect(`${e.message} ${inspect(e, { depth: Infinity, showHidden: true })} ${JSON.stringify(e)}`).to.not.include('Pa55phrase');
      return e;
    };

    it('a wrong tlsCertificateKeyFilePassword names that option, never showing it', function () {
      const e = refused({ tlsCertificateKeyFile: encrypted, tlsCertificateKeyFilePassword: `wrong-${PASSPHRASE}` });
      expect(e.option).to.equal('tlsCertificateKeyFilePassword');
      expect(e.value).to.equal('<not shown>');
      expect(e.message).to.match(/passphrase/);
    });

    it('a wrong tlsCertificateKeyFilePassword that decrypts the key into bytes that are no key still names that option', function () {
      // AES-CBC with a wrong passphrase ends in valid padding about once in 200 passphrases: OpenSSL then reports the
      // garbage it decrypted (DECODER "unsupported") rather than a bad decrypt, which named the file instead.
      const content = fs.readFileSync(encrypted, 'utf8');
      let wrong: string | undefined;
      for (let i = 0; i < 5000 && wrong === undefined; i++) {
        try {
          tls.createSecureContext({ cert: content, key: content, passphrase: `wrong-${i}` });
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ERR_OSSL_BAD_DECRYPT') wrong = `wrong-${i}`;
        }
      }
      expect(wrong, 'a passphrase OpenSSL does not report as a bad decrypt').to.be.a('string');
      const e = refused({ tlsCertificateKeyFile: encrypted, tlsCertificateKeyFilePassword: wrong });
      expect(e.option).to.equal('tlsCertificateKeyFilePassword');
      expect(e.message).to.match(/passphrase/);
    });

    it('an encrypted key without tlsCertificateKeyFilePassword names that option', function () {
      const e = refused({ tlsCertificateKeyFile: encrypted });
      expect(e.option).to.equal('tlsCertificateKeyFilePassword');
      expect(e.message).to.match(/encrypted/);
    });

    it('a tlsCertificateKeyFile that holds no key, or a certificate without its key, names the file', function () {
      const noKey = path.join(dir, 'certificate-only.pem');
      fs.writeFileSync(noKey, fs.readFileSync(file('ca.pem')));
      for (const tlsCertificateKeyFile of [garbage, noKey]) {
        const e = refused({ tlsCertificateKeyFile, tlsCertificateKeyFilePassword: PASSPHRASE });
        expect(e.option).to.equal('tlsCertificateKeyFile');
        expect(e.value).to.equal(tlsCertificateKeyFile);
      }
    });

    it('a tlsCertificateKeyFile whose private key is not its certificate\'s names the file, whatever the key\'s type', function () {
      // A key of another type than the certificate's (EC with an RSA certificate) would be loaded beside it: every
      // connection would then offer no client certificate, and fail with the server's "certificate required".
      const ecKey = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
      const rsaKey = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
      const cert = new crypto.X509Certificate(fs.readFileSync(file('client.pem'))).toString();
      for (const [name, key] of [['ec', ecKey], ['rsa', rsaKey]]) {
        const mismatched = path.join(dir, `mismatched-${name}.pem`);
        fs.writeFileSync(mismatched, cert + key);
        const e = refused({ tlsCertificateKeyFile: mismatched });
        expect(e.option, name).to.equal('tlsCertificateKeyFile');
        expect(e.value, name).to.equal(mismatched);
      }
    });

    it('connectionFactory and connect() throw it before any socket is opened', function () {
      expect(() => connectionFactory({ host: 'localhost', port: 1, tlsCertificateKeyFile: encrypted, tlsCertificateKeyFilePassword: 'nope' }))
        .to.throw(InvalidOptionError)
        .with.property('option', 'tlsCertificateKeyFilePassword');
      const uri = `mongodb://localhost:1/?tlsCertificateKeyFile=${encodeURIComponent(encrypted)}&tlsCertificateKeyFilePassword=nope`;
      expect(() => connect(uri)).to.throw(InvalidOptionError).with.property('option', 'tlsCertificateKeyFilePassword');
    });

    it('the right passphrase, or a key in clear, is accepted', function () {
      expect(() => nodeTlsOptions({ tlsCertificateKeyFile: encrypted, tlsCertificateKeyFilePassword: PASSPHRASE }, 'localhost')).to.not.throw();
      expect(() => nodeTlsOptions({ tlsCertificateKeyFile: clear }, 'localhost')).to.not.throw();
    });
  });

  it('a tlsCAFile that holds no PEM certificate is an InvalidOptionError naming it, not a trust store emptied in silence', function () {
    const der = path.join(dir, 'ca.der');
    fs.writeFileSync(der, new crypto.X509Certificate(fs.readFileSync(file('ca.pem'))).raw);
    const corrupt = path.join(dir, 'corrupt-ca.pem');
    fs.writeFileSync(corrupt, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    const keyOnly = path.join(dir, 'key-only.pem');
    fs.writeFileSync(keyOnly, keyPem);
    for (const tlsCAFile of [garbage, der, corrupt, keyOnly]) {
      expect(() => nodeTlsOptions({ tlsCAFile }, 'localhost'), tlsCAFile)
        .to.throw(InvalidOptionError, /certificate/)
        .with.property('option', 'tlsCAFile');
    }
    // A bundle with comments, or a certificate after a key, is what Node loads: accepted.
    const commented = path.join(dir, 'commented-ca.pem');
    fs.writeFileSync(commented, `# test CA\n${keyPem}${fs.readFileSync(file('ca.pem'), 'utf8')}${fs.readFileSync(file('other-ca.pem'), 'utf8')}`);
    expect(() => nodeTlsOptions({ tlsCAFile: commented }, 'localhost')).to.not.throw();
    expect(() => nodeTlsOptions({ tlsCAFile: file('ca.pem') }, 'localhost')).to.not.throw();
  });

  it('sends a fully qualified host name as SNI without its trailing dot (RFC 6066, section 3), and no SNI for an IP address or socket path', function () {
    expect(nodeTlsOptions({ tls: true }, 'db.example.com.').servername).to.equal('db.example.com');
    expect(nodeTlsOptions({ tls: true }, 'db.example.com').servername).to.equal('db.example.com');
    expect(nodeTlsOptions({ tls: true, tlsServerName: 'other.example.com.' }, 'db.example.com.').servername).to.equal('other.example.com');
    expect(nodeTlsOptions({ tls: true }, '10.0.0.7')).to.not.have.property('servername');
    expect(nodeTlsOptions({ tls: true }, 'fe80::1')).to.not.have.property('servername');
    expect(nodeTlsOptions({ tls: true }, undefined)).to.not.have.property('servername');
  });

  it('any TLS option but tls itself turns TLS on, as documented; with tls: false it is a conflict', function () {
    for (const settings of [{ tlsServerName: 'db.example' }, { tlsCertificateKeyFilePassword: PASSPHRASE }, { tlsCAFile: file('ca.pem') }, { tlsInsecure: false }]) {
      expect(wantsTls(settings), Object.keys(settings)[0]).to.equal(true);
      expect(() => wantsTls({ tls: false, ...settings }), Object.keys(settings)[0])
        .to.throw(InvalidOptionError)
        .with.property('option', 'tls');
    }
    expect(wantsTls({})).to.equal(false);
    expect(wantsTls({ tls: false })).to.equal(false);
  });

  it('what each of tls, tlsInsecure, tlsAllowInvalidCertificates and tlsAllowInvalidHostnames turns off', function () {
    const cases: [Parameters<typeof nodeTlsOptions>[0], boolean, boolean][] = [
      // settings, certificate verified, host name checked
      [{ tls: true }, true, true],
      [{ tlsInsecure: true }, false, false],
      [{ tlsInsecure: false }, true, true],
      [{ tlsAllowInvalidCertificates: true }, false, true],
      [{ tlsAllowInvalidHostnames: true }, true, false],
      [{ tlsAllowInvalidCertificates: false, tlsAllowInvalidHostnames: false }, true, true],
      [{ tlsAllowInvalidCertificates: true, tlsAllowInvalidHostnames: true }, false, false],
    ];
    for (const [settings, verified, checked] of cases) {
      const options = nodeTlsOptions(settings, 'db.example');
      expect(options.rejectUnauthorized, JSON.stringify(settings)).to.equal(verified);
      // No check of the host name: a checkServerIdentity that accepts any.
      expect(options.checkServerIdentity === undefined, JSON.stringify(settings)).to.equal(checked);
      if (!checked) expect(options.checkServerIdentity!('db.example', {} as never)).to.equal(undefined);
    }
    expect(wantsTls({ tls: true })).to.equal(true);
  });

  it('tlsInsecure with tlsAllowInvalidCertificates or tlsAllowInvalidHostnames (whatever their values) is a conflict naming tlsInsecure', function () {
    const allowed = 'tlsInsecure must be not combined with tlsAllowInvalidCertificates or tlsAllowInvalidHostnames';
    for (const other of [{ tlsAllowInvalidCertificates: false }, { tlsAllowInvalidHostnames: true }]) {
      expect(() => nodeTlsOptions({ tlsInsecure: true, ...other }, 'db.example'), Object.keys(other)[0]).to.throw(
        InvalidOptionError,
        `Invalid tlsInsecure: true (${allowed})`,
      );
    }
    expect(() => wantsTls({ tls: false, tlsServerName: 'db.example' })).to.throw(InvalidOptionError, 'Invalid tls: false (tls must be true when tlsServerName is set)');
  });

  it('a TLS file that cannot be read names its option, the path and the reason', function () {
    const missing = path.join(dir, 'missing.pem');
    for (const option of ['tlsCAFile', 'tlsCertificateKeyFile'] as const) {
      expect(() => nodeTlsOptions({ [option]: missing }, 'localhost')).to.throw(
        InvalidOptionError,
        `Invalid ${option}: ${JSON.stringify(missing)} (${option} must be a readable PEM file (ENOENT))`,
      );
    }
  });

  it('a PEM given where a file path belongs (a private key, say) is refused without showing it, in the error or its inspection', function () {
    const pem = fs.readFileSync(file('x509-client.pem'), 'utf8');
    const keyLine = pem.split('\n')[pem.split('\n').findIndex((line) => line.includes('BEGIN PRIVATE KEY')) + 1];
    const makes: [string, () => unknown][] = [
      ['tlsCertificateKeyFile', () => nodeTlsOptions({ tlsCertificateKeyFile: pem }, 'localhost')],
      ['tlsCAFile', () => nodeTlsOptions({ tlsCAFile: pem }, 'localhost')],
      ['tlsCertificateKeyFile', () => connect(`mongodb://localhost/?tlsCertificateKeyFile=${encodeURIComponent(pem)}`)],
      ['tlsCertificateKeyFile', () => connect('mongodb://localhost/', { tlsCertificateKeyFile: pem })],
    ];
    for (const [option, make] of makes) {
      let error: unknown;
      try {
        make();
      } catch (e) {
        error = e;
      }
      expect(error, option).to.be.instanceOf(InvalidOptionError).with.property('option', option);
      expect((error as Error).message).to.equal(`Invalid ${option}: <PEM text not shown> (${option} must be the path of a readable PEM file, not its text)`);
      expect(`${(error as Error).message} ${inspect(error, { depth: 5 })} ${JSON.stringify(error)}`).to.not.include(keyLine);
    }
  });

  it('says which of the key file and its passphrase is wrong: missing passphrase, key without certificate, key not the certificate\'s', function () {
    expect(() => nodeTlsOptions({ tlsCertificateKeyFile: encrypted }, 'localhost')).to.throw(
      InvalidOptionError,
      `Invalid tlsCertificateKeyFilePassword: undefined (tlsCertificateKeyFilePassword must be given: the private key in tlsCertificateKeyFile ${encrypted} is encrypted)`,
    );
    // The right passphrase, but no certificate beside the key: the file is what is wrong, not the passphrase.
    const keyOnly = path.join(dir, 'encrypted-key-only.pem');
    fs.writeFileSync(keyOnly, crypto.createPrivateKey(keyPem).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: PASSPHRASE }));
    const prefix = `Invalid tlsCertificateKeyFile: ${JSON.stringify(keyOnly)} (tlsCertificateKeyFile must be a PEM file with the client certificate and its private key (`;
    expect(() => nodeTlsOptions({ tlsCertificateKeyFile: keyOnly, tlsCertificateKeyFilePassword: PASSPHRASE }, 'localhost'))
      .to.throw(InvalidOptionError)
      .that.satisfies((e: InvalidOptionError) => e.message.startsWith(prefix) && e.message.length > prefix.length + 3);
    const ecKey = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const mismatched = path.join(dir, 'mismatched-message.pem');
    fs.writeFileSync(mismatched, new crypto.X509Certificate(fs.readFileSync(file('client.pem'))).toString() + ecKey);
    expect(() => nodeTlsOptions({ tlsCertificateKeyFile: mismatched }, 'localhost')).to.throw(
      InvalidOptionError,
      `Invalid tlsCertificateKeyFile: ${JSON.stringify(mismatched)} (tlsCertificateKeyFile must be a PEM file with the client certificate and its private key (its private key is not the certificate's))`,
    );
  });

  it('a tlsCAFile names why it is refused: no certificate at all, or the first reason none parses', function () {
    const allowed = 'tlsCAFile must be a PEM file of certificate authority certificates (-----BEGIN CERTIFICATE-----)';
    expect(() => nodeTlsOptions({ tlsCAFile: garbage }, 'localhost')).to.throw(InvalidOptionError, `Invalid tlsCAFile: ${JSON.stringify(garbage)} (${allowed}; it holds none)`);
    const block = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n';
    const reason = (() => {
      try {
        new crypto.X509Certificate(block);
      } catch (error) {
        return (error as Error).message;
      }
      return 'parsed';
    })();
    expect(reason).to.not.equal('');
    const corrupt = path.join(dir, 'two-corrupt-ca.pem');
    fs.writeFileSync(corrupt, block + block.replace('AAAA', 'BBBB'));
    expect(() => nodeTlsOptions({ tlsCAFile: corrupt }, 'localhost')).to.throw(
      InvalidOptionError,
      `Invalid tlsCAFile: ${JSON.stringify(corrupt)} (${allowed}; none of its certificates parses (${reason}))`,
    );
  });

  it('takes the OpenSSL trusted-certificate form (-----BEGIN TRUSTED CERTIFICATE-----), for the CA and the client certificate', function () {
    const trustedCa = path.join(dir, 'trusted-ca.pem');
    fs.writeFileSync(trustedCa, fs.readFileSync(file('ca.pem'), 'utf8').replace(/CERTIFICATE/g, 'TRUSTED CERTIFICATE'));
    expect(() => nodeTlsOptions({ tlsCAFile: trustedCa }, 'localhost')).to.not.throw();
    const trustedClient = path.join(dir, 'trusted-client.pem');
    fs.writeFileSync(trustedClient, keyPem + new crypto.X509Certificate(fs.readFileSync(file('client.pem'))).toString().replace(/CERTIFICATE/g, 'TRUSTED CERTIFICATE'));
    expect(() => nodeTlsOptions({ tlsCertificateKeyFile: trustedClient }, 'localhost')).to.not.throw();
  });

  it('refuses a CA file whose only certificate, in a trusted-certificate form, does not parse', function () {
    // Node loads nothing from such a block, without a word: every server would fail verification as if its
    // certificate were wrong ("unable to verify the first certificate").
    const allowed = 'tlsCAFile must be a PEM file of certificate authority certificates (-----BEGIN CERTIFICATE-----)';
    for (const label of ['TRUSTED CERTIFICATE', 'X509 CERTIFICATE']) {
      const corrupt = path.join(dir, `corrupt-${label.split(' ')[0]}.pem`);
      fs.writeFileSync(corrupt, pemBlock(caDer().subarray(0, 100), label));
      expect(() => nodeTlsOptions({ tlsCAFile: corrupt }, 'localhost'), label).to.throw(InvalidOptionError, `Invalid tlsCAFile: ${JSON.stringify(corrupt)} (${allowed}; none of its certificates parses (`);
    }
  });

  it('refuses a CA file whose first certificate Node cannot read, whatever follows it: Node reads no certificate after that one', function () {
    // Node stops at the first certificate block it cannot read: a good certificate after a corrupt one (or after one
    // with bytes past its end, bad base64, an END line of another name) is never loaded, and every server fails
    // verification ("unable to verify the first certificate").
    const allowed = 'tlsCAFile must be a PEM file of certificate authority certificates (-----BEGIN CERTIFICATE-----)';
    const good = pemBlock(caDer(), 'CERTIFICATE');
    const unreadable: Record<string, string> = {
      'corrupt then good': pemBlock(caDer().subarray(0, 100), 'CERTIFICATE') + good,
      'corrupt trusted then good': pemBlock(caDer().subarray(0, 100), 'TRUSTED CERTIFICATE') + good,
      'END of another name then good': good.replace('END CERTIFICATE', 'END TRUSTED CERTIFICATE') + good,
      'bytes after the certificate': pemBlock(Buffer.concat([caDer(), Buffer.from('deadbeef', 'hex')]), 'CERTIFICATE'),
      'trusted, its trust settings corrupt': pemBlock(Buffer.concat([caDer(), Buffer.from('3003020101', 'hex')]), 'TRUSTED CERTIFICATE'),
      'bad base64': good.replace('\n', '\n*'),
      'indented': `  ${good}`,
    };
    for (const [name, text] of Object.entries(unreadable)) {
      const f = path.join(dir, `unreadable-${name.replace(/\W+/g, '-')}.pem`);
      fs.writeFileSync(f, text);
      expect(() => nodeTlsOptions({ tlsCAFile: f }, 'localhost'), name).to.throw(InvalidOptionError, `Invalid tlsCAFile: ${JSON.stringify(f)} (${allowed}; `);
    }
    // What Node does load from: CRLF lines, a byte order mark, a bad certificate after a good one, a system bundle.
    const readable: Record<string, string | Buffer> = {
      crlf: good.replace(/\n/g, '\r\n'),
      bom: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(good)]),
      'good then corrupt': good + pemBlock(caDer().subarray(0, 100), 'CERTIFICATE'),
    };
    if (fs.existsSync('/etc/ssl/certs/ca-certificates.crt')) readable.bundle = fs.readFileSync('/etc/ssl/certs/ca-certificates.crt');
    for (const [name, text] of Object.entries(readable)) {
      const f = path.join(dir, `readable-${name.replace(/\W+/g, '-')}.pem`);
      fs.writeFileSync(f, text);
      expect(() => nodeTlsOptions({ tlsCAFile: f }, 'localhost'), name).to.not.throw();
    }
  });

  it('makes one secure context for all the connections of a factory, with no file given too (Node\'s roots)', async function () {
    const server = await new EmbeddedServer({ tls: { key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')) } }).start();
    const made = nodeTls.createSecureContext;
    let contexts = 0;
    try {
      const [host, port] = server.address.replace('127.0.0.1', 'localhost').split(':');
      for (const settings of [{ tls: true }, { tlsAllowInvalidCertificates: true }, { tlsServerName: 'localhost' }, { tlsCAFile: file('ca.pem') }]) {
        const factory = connectionFactory({ ...settings, host, port: Number(port), connectTimeoutMS: 2000 });
        contexts = 0;
        nodeTls.createSecureContext = (...args) => (contexts++, made(...args));
        for (let id = 1; id <= 3; id++) {
          const signal = new AbortController().signal;
          const attempt = firstValueFrom(from(factory({ id, generation: 0, address: `${host}:${port}`, signal })));
          // Without the CA, the embedded server's certificate fails verification: the context is what is counted.
          await attempt.then((c) => c.destroy(), () => undefined);
        }
        nodeTls.createSecureContext = made;
        expect(contexts, JSON.stringify(settings)).to.equal(0);
      }
    } finally {
      nodeTls.createSecureContext = made;
      await server.stop();
    }
  });

  describe('tlsCRLFile (revocation lists)', function () {
    // Embedded endpoint only, whatever MONGODB_URI says: the test needs a server whose certificate a list revokes.
    let server: EmbeddedServer;
    let address: string;
    before(async function () {
      server = await new EmbeddedServer({ tls: { key: fs.readFileSync(file('crl-server.key')), cert: fs.readFileSync(file('crl-server.crt')) } }).start();
      address = server.address.replace('127.0.0.1', 'localhost');
    });
    after(() => server.stop());

    it('refuses a server whose certificate the list revokes (CERT_REVOKED), and connects when the list names another', async function () {
      const refused = await establishOne(address, { tlsCAFile: file('crl-ca.pem'), tlsCRLFile: file('crl-revoked.pem'), connectTimeoutMS: 2000 }).then(
        (c) => (c.destroy(), 'connected'),
        (e: unknown) => e,
      );
      expect(refused).to.be.instanceOf(MongoNetworkError);
      expect((refused as Error & { cause?: { code?: string } }).cause?.code).to.equal('CERT_REVOKED');
      const c = await establishOne(address, { tlsCAFile: file('crl-ca.pem'), tlsCRLFile: file('crl-none-revoked.pem') });
      try {
        expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      } finally {
        c.destroy();
      }
    });

    it('reads every list of the file, not only the first (Node loads only the first of a buffer)', async function () {
      // The server's CA's list second: loaded alone, the first (another CA's) left that CA without a list.
      const both = path.join(dir, 'two-lists.pem');
      fs.writeFileSync(both, fs.readFileSync(file('crl-other-issuer.pem'), 'latin1') + fs.readFileSync(file('crl-revoked.pem'), 'latin1'));
      const refused = await establishOne(address, { tlsCAFile: file('crl-ca.pem'), tlsCRLFile: both, connectTimeoutMS: 2000 }).then(
        (c) => (c.destroy(), 'connected'),
        (e: unknown) => e,
      );
      expect((refused as Error & { cause?: { code?: string } }).cause?.code).to.equal('CERT_REVOKED');
    });

    it('parses the file once, as the secure context is made (a large authority\'s lists hold megabytes)', function () {
      const made = nodeTls.createSecureContext;
      let contexts = 0;
      nodeTls.createSecureContext = (...args) => (contexts++, made(...args));
      try {
        nodeTlsOptions({ tlsCAFile: file('crl-ca.pem'), tlsCRLFile: file('crl-revoked.pem') }, 'localhost');
        nodeTlsOptions({ tls: true, tlsCRLFile: file('crl-revoked.pem') }, 'localhost');
      } finally {
        nodeTls.createSecureContext = made;
      }
      expect(contexts).to.equal(2);
    });

    it('is taken from the URI, as the official driver takes it, and turns TLS on', function () {
      const uri = `mongodb://${address}/?tlsCAFile=${encodeURIComponent(file('crl-ca.pem'))}&tlsCRLFile=${encodeURIComponent(file('crl-revoked.pem'))}`;
      const parsed = parseConnectionString(uri);
      expect(parsed.warnings).to.deep.equal([]);
      expect(parsed.connectionOptions).to.include({ tlsCRLFile: file('crl-revoked.pem') });
      expect(wantsTls({ tlsCRLFile: file('crl-revoked.pem') })).to.equal(true);
    });

    it('a file that cannot be read, holds no list, or a list that does not parse is an InvalidOptionError naming tlsCRLFile', function () {
      const missing = path.join(dir, 'missing-crl.pem');
      expect(() => nodeTlsOptions({ tlsCRLFile: missing }, 'localhost')).to.throw(
        InvalidOptionError,
        `Invalid tlsCRLFile: ${JSON.stringify(missing)} (tlsCRLFile must be a readable PEM file (ENOENT))`,
      );
      // A certificate given by mistake would check nothing.
      expect(() => nodeTlsOptions({ tlsCRLFile: file('crl-ca.pem') }, 'localhost')).to.throw(
        InvalidOptionError,
        `(tlsCRLFile must be a PEM file of certificate revocation lists (-----BEGIN X509 CRL-----); it holds none)`,
      );
      const corrupt = path.join(dir, 'corrupt-crl.pem');
      fs.writeFileSync(corrupt, fs.readFileSync(file('crl-none-revoked.pem'), 'latin1') + '-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n');
      expect(() => nodeTlsOptions({ tlsCRLFile: corrupt }, 'localhost')).to.throw(InvalidOptionError, /^Invalid tlsCRLFile: .*\(tlsCRLFile must be a PEM file of certificate revocation lists \(-----BEGIN X509 CRL-----\) \(.+\)\)$/);
      expect(() => connectionFactory({ tlsCRLFile: corrupt, host: 'localhost', port: 1 })).to.throw(InvalidOptionError, /tlsCRLFile/);
    });

    it('a list cut short (no END line) is an InvalidOptionError naming tlsCRLFile, not left out in silence', function () {
      // A newer list of the server's CA after an older one, truncated (a partial download): left out, the older list
      // alone would be checked, and a certificate only the newer one revokes would be trusted.
      const revoked = fs.readFileSync(file('crl-revoked.pem'), 'latin1');
      const truncated = path.join(dir, 'truncated-crl.pem');
      fs.writeFileSync(truncated, fs.readFileSync(file('crl-none-revoked.pem'), 'latin1') + revoked.slice(0, revoked.indexOf('-----END')));
      expect(() => nodeTlsOptions({ tlsCRLFile: truncated }, 'localhost')).to.throw(
        InvalidOptionError,
        `(tlsCRLFile must be a PEM file of certificate revocation lists (-----BEGIN X509 CRL-----); its list 2 of 2 has no line -----END X509 CRL----- closing it)`,
      );
    });
  });

  describe('an established TLS connection', function () {
    // Embedded endpoint only, whatever MONGODB_URI says: the test needs a server that asks for a client certificate
    // and trusts the fixtures' CA, which MONGODB_URI's server need not do.
    let server: EmbeddedServer;
    before(async function () {
      server = await new EmbeddedServer({
        tls: { key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')), ca: fs.readFileSync(file('ca.pem')), requestCert: true },
      }).start();
    });
    after(() => server.stop());

    it('verifies the server against a CA file in the trusted-certificate form, trust settings and all', async function () {
      const trusted = path.join(dir, 'trusted-with-settings.pem');
      fs.writeFileSync(trusted, pemBlock(Buffer.concat([caDer(), SERVER_AUTH_TRUST]), 'TRUSTED CERTIFICATE'));
      const c = await establishOne(server.address.replace('127.0.0.1', 'localhost'), { tlsCAFile: trusted, tlsCertificateKeyFile: clear });
      try {
        expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      } finally {
        c.destroy();
      }
    });

    it('shows neither the key passphrase nor the private key to inspection', async function () {
      const address = server.address.replace('127.0.0.1', 'localhost');
      for (const [tlsCertificateKeyFile, password] of [[encrypted, PASSPHRASE], [clear, undefined]] as const) {
        const c = await establishOne(address, {
          tlsCAFile: file('ca.pem'),
          tlsCertificateKeyFile,
          ...(password === undefined ? {} : { tlsCertificateKeyFilePassword: password }),
        });
        try {
          expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
          // Node shows a Buffer as the hex of its first bytes; the key file starts with its private key.
          const keyBytes = fs.readFileSync(tlsCertificateKeyFile).subarray(0, 24).toString('hex').replace(/(..)(?!$)/g, '$1 ');
          for (const text of [inspect(c), inspect(c, { depth: Infinity, showHidden: true })]) {
            expect(text).to.not.include(PASSPHRASE);
            expect(text).to.not.include(keyBytes);
            expect(text).to.not.include(keyPem.split('\n')[1]);
          }
        } finally {
          c.destroy();
        }
      }
    });
  });
});
