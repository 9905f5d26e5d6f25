/**
 * TLS files replaced on disk while the process runs, as production replaces them: a client certificate renewed by
 * cert-manager or Vault, a CA bundle that gains the authority of a CA rotation, a revocation list refreshed before (or
 * after) its nextUpdate passed. Each new connection of a factory uses the files as they are now; one open already keeps
 * what it was made with.
 *
 * Embedded endpoint only, whatever MONGODB_URI says: the tests need servers with the fixtures' certificates.
 */
import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import nodeTls = require('node:tls');
import { inspect } from 'node:util';
import { firstValueFrom, from } from 'rxjs';
import { connect, connectionFactory, MongoNetworkError, ServerSelectionError, type Connection, type ConnectionOptions } from '../../lib';
import { currentTlsOptions, rememberedTlsFileSets } from '../../lib/connection/tls-options';
import { EmbeddedServer } from '../../lib/testing';
import { closedPort } from '../support/endpoint';
import { fullGc } from '../support/full-gc';
import { warningsOf } from '../support/process-warnings';

const fixtures = path.resolve(__dirname, '../fixtures/tls');
const fixture = (name: string): Buffer => fs.readFileSync(path.join(fixtures, name));

/** The subjects of the fixtures' two client certificates, as the endpoint names them (RFC 2253). */
const FIRST_SUBJECT = 'CN=rxcmap client';
const RENEWED_SUBJECT = 'CN=client,OU=Drivers,O=rxcmap\\, test,L=Reykjavik,ST=Reykjavik,C=IS';

/** The PEM block labelled `label` in `pem`. */
const pemBlock = (pem: Buffer, label: string): string =>
  new RegExp(`-----BEGIN ${label}-----[\\s\\S]*?-----END ${label}-----\\n`).exec(pem.toString())![0];

/** Replaces the file at `file` with `contents` as a writer that renames a finished copy over it does (new inode). */
function replaceByRename(file: string, contents: Buffer): void {
  const copy = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(copy, contents);
  fs.renameSync(copy, file);
}

describe('TLS files replaced on disk (tls-options)', function () {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-tls-replaced-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A factory for `server` with `options`, and a function that establishes one more connection with it. */
  function factoryFor(server: EmbeddedServer, options: ConnectionOptions): () => Promise<Connection> {
    const [, port] = server.address.split(':');
    const factory = connectionFactory({ ...options, host: 'localhost', port: Number(port), connectTimeoutMS: 5000 });
    let id = 0;
    return () => firstValueFrom(from(factory({ id: ++id, generation: 0, address: `localhost:${port}`, signal: new AbortController().signal })));
  }

  /** Why `connection` failed: its cause's code (OpenSSL's, through Node), or 'connected' (and it is closed). */
  const outcome = (connection: Promise<Connection>): Promise<string | undefined> =>
    connection.then(
      (c) => (c.destroy(), 'connected'),
      (e: unknown) => (expect(e).to.be.instanceOf(MongoNetworkError), (e as Error & { cause?: { code?: string } }).cause?.code),
    );

  describe('a client certificate renewed', function () {
    let server: EmbeddedServer;
    before(async function () {
      // Trusts the authorities of both client certificates, and names the one each connection presented.
      server = await new EmbeddedServer({
        tls: { key: fixture('server.key'), cert: fixture('server.crt'), ca: Buffer.concat([fixture('ca.pem'), fixture('x509-ca.pem')]), requestCert: true },
      }).start();
      server.handle('whoami', (_command, client) => ({ ok: 1, subject: client.certificateSubject ?? null }));
    });
    after(() => server.stop());

    const subjectOf = async (c: Connection): Promise<unknown> => (await c.command('admin', { whoami: 1 })).subject;

    it('is presented by the next connection when a finished copy is renamed over the file; those open keep the old one', async function () {
      const keyFile = path.join(dir, 'client.pem');
      fs.writeFileSync(keyFile, fixture('client.pem'));
      const next = factoryFor(server, { tlsCAFile: path.join(fixtures, 'ca.pem'), tlsCertificateKeyFile: keyFile });
      const first = await next();
      try {
        expect(await subjectOf(first)).to.equal(FIRST_SUBJECT);
        replaceByRename(keyFile, fixture('x509-client.pem'));
        const second = await next();
        try {
          expect(await subjectOf(second)).to.equal(RENEWED_SUBJECT);
          expect(await subjectOf(first)).to.equal(FIRST_SUBJECT);
        } finally {
          second.destroy();
        }
      } finally {
        first.destroy();
      }
    });

    it('is presented when the file is written in place, and through a Kubernetes Secret volume\'s swapped link', async function () {
      // A Secret volume: the file is a link through `..data`, itself a link to the current version's directory; an
      // update makes a new directory and renames a new `..data` link over the old one.
      fs.mkdirSync(path.join(dir, 'v1'));
      fs.writeFileSync(path.join(dir, 'v1', 'tls.pem'), fixture('client.pem'));
      fs.symlinkSync('v1', path.join(dir, '..data'));
      fs.symlinkSync(path.join('..data', 'tls.pem'), path.join(dir, 'tls.pem'));
      const next = factoryFor(server, { tlsCAFile: path.join(fixtures, 'ca.pem'), tlsCertificateKeyFile: path.join(dir, 'tls.pem') });
      const subjects: unknown[] = [];
      const subjectOfNext = async (): Promise<void> => {
        const c = await next();
        try {
          subjects.push(await subjectOf(c));
        } finally {
          c.destroy();
        }
      };
      await subjectOfNext();
      fs.mkdirSync(path.join(dir, 'v2'));
      fs.writeFileSync(path.join(dir, 'v2', 'tls.pem'), fixture('x509-client.pem'));
      fs.symlinkSync('v2', path.join(dir, '..data_tmp'));
      fs.renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
      await subjectOfNext();
      // In place: the same inode, written again.
      fs.writeFileSync(path.join(dir, 'tls.pem'), fixture('client.pem'));
      await subjectOfNext();
      await subjectOfNext();
      expect(subjects).to.deep.equal([FIRST_SUBJECT, RENEWED_SUBJECT, FIRST_SUBJECT, FIRST_SUBJECT]);
    });

    it('a replacement that cannot be used (half-written, a key not its certificate\'s, removed) leaves the last one in use, with one warning per change naming the file, never the key', async function () {
      const keyFile = path.join(dir, 'client.pem');
      fs.writeFileSync(keyFile, fixture('client.pem'));
      const next = factoryFor(server, { tlsCAFile: path.join(fixtures, 'ca.pem'), tlsCertificateKeyFile: keyFile });
      const subjectOfNext = async (): Promise<unknown> => {
        const c = await next();
        try {
          return await subjectOf(c);
        } finally {
          c.destroy();
        }
      };
      const renewed = fixture('x509-client.pem');
      const keyLine = renewed.toString().split('\n').find((line) => /^[A-Za-z0-9+/]{64}$/.test(line))!;
      const unusable: [string, () => void][] = [
        ['half-written', () => fs.writeFileSync(keyFile, renewed.subarray(0, renewed.length >> 1))],
        // The renewed certificate beside the old key.
        ['key not the certificate\'s', () => fs.writeFileSync(keyFile, pemBlock(fixture('client.pem'), 'PRIVATE KEY') + pemBlock(renewed, 'CERTIFICATE'))],
        ['removed', () => fs.rmSync(keyFile)],
      ];
      for (const [label, change] of unusable) {
        change();
        let subjects: unknown[] = [];
        const warnings = await warningsOf(async () => (subjects = [await subjectOfNext(), await subjectOfNext()]));
        expect(subjects, label).to.deep.equal([FIRST_SUBJECT, FIRST_SUBJECT]);
        expect(warnings.map((w) => (w as Error & { code?: string }).code), label).to.deep.equal(['RXCMAP_TLS_FILES_UNUSABLE']);
        expect(warnings[0].message, label).to.include('tlsCertificateKeyFile').and.include(keyFile).and.not.include(keyLine);
      }
      replaceByRename(keyFile, renewed);
      const warnings = await warningsOf(async () => expect(await subjectOfNext()).to.equal(RENEWED_SUBJECT));
      expect(warnings).to.deep.equal([]);
    });
  });

  it('a CA file that gains the authority of a CA rotation is trusted by the next connection', async function () {
    const server = await new EmbeddedServer({ tls: { key: fixture('crl-server.key'), cert: fixture('crl-server.crt') } }).start();
    try {
      const caFile = path.join(dir, 'ca.pem');
      fs.writeFileSync(caFile, fixture('ca.pem'));
      const next = factoryFor(server, { tlsCAFile: caFile });
      expect(await outcome(next())).to.equal('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
      fs.writeFileSync(caFile, Buffer.concat([fixture('ca.pem'), fixture('crl-ca.pem')]));
      expect(await outcome(next())).to.equal('connected');
    } finally {
      await server.stop();
    }
  });

  describe('a revocation list refreshed', function () {
    it('whose nextUpdate passed (every connection refused: CRL_HAS_EXPIRED) is used by the next connection once refreshed', async function () {
      const server = await new EmbeddedServer({ tls: { key: fixture('dated-server.key'), cert: fixture('dated-server.crt') } }).start();
      try {
        const crlFile = path.join(dir, 'crl.pem');
        fs.writeFileSync(crlFile, fixture('dated-crl-expired.pem'));
        const next = factoryFor(server, { tlsCAFile: path.join(fixtures, 'dated-ca.pem'), tlsCRLFile: crlFile });
        expect(await outcome(next())).to.equal('CRL_HAS_EXPIRED');
        replaceByRename(crlFile, fixture('dated-crl-current.pem'));
        expect(await outcome(next())).to.equal('connected');
      } finally {
        await server.stop();
      }
    });

    it('a client whose list expired (no server selectable) runs commands again once the list is refreshed, without a restart', async function () {
      const server = await new EmbeddedServer({ tls: { key: fixture('dated-server.key'), cert: fixture('dated-server.crt') } }).start();
      const crlFile = path.join(dir, 'crl.pem');
      fs.writeFileSync(crlFile, fixture('dated-crl-expired.pem'));
      const client = connect(`mongodb://localhost:${server.address.split(':')[1]}/?heartbeatFrequencyMS=500&serverSelectionTimeoutMS=1000`, {
        tlsCAFile: path.join(fixtures, 'dated-ca.pem'),
        tlsCRLFile: crlFile,
      });
      try {
        const refused = await client.command('admin', { ping: 1 }).then(() => undefined, (e: unknown) => e);
        expect(refused).to.be.instanceOf(ServerSelectionError);
        expect(inspect(refused)).to.include('CRL_HAS_EXPIRED');
        replaceByRename(crlFile, fixture('dated-crl-current.pem'));
        expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      } finally {
        await client.close();
        await server.stop();
      }
    });

    it('that now revokes the server\'s certificate refuses the next connection (CERT_REVOKED)', async function () {
      const server = await new EmbeddedServer({ tls: { key: fixture('crl-server.key'), cert: fixture('crl-server.crt') } }).start();
      try {
        const crlFile = path.join(dir, 'crl.pem');
        fs.writeFileSync(crlFile, fixture('crl-none-revoked.pem'));
        const next = factoryFor(server, { tlsCAFile: path.join(fixtures, 'crl-ca.pem'), tlsCRLFile: crlFile });
        expect(await outcome(next())).to.equal('connected');
        replaceByRename(crlFile, fixture('crl-revoked.pem'));
        expect(await outcome(next())).to.equal('CERT_REVOKED');
      } finally {
        await server.stop();
      }
    });
  });

  describe('currentTlsOptions', function () {
    it('reads the files again only when one of them changed: the same secure context otherwise', function () {
      const caFile = path.join(dir, 'ca.pem');
      const crlFile = path.join(dir, 'crl.pem');
      fs.writeFileSync(caFile, fixture('crl-ca.pem'));
      fs.writeFileSync(crlFile, fixture('crl-none-revoked.pem'));
      const options = currentTlsOptions({ tlsCAFile: caFile, tlsCRLFile: crlFile }, 'localhost');
      const first = options();
      expect(options().secureContext).to.equal(first.secureContext);
      expect(options()).to.equal(first);
      // Written again in place (the same inode): its size and modification time tell.
      fs.writeFileSync(crlFile, fixture('crl-revoked.pem'));
      const second = options();
      expect(second.secureContext).to.not.equal(first.secureContext);
      expect(options().secureContext).to.equal(second.secureContext);
      // The other file, written in place with a bundle of another size: the same bytes written again within the
      // kernel's timestamp tick (4 ms at HZ=250; the two writes here are some 2 ms apart) would leave its size and times
      // as they were.
      fs.writeFileSync(caFile, Buffer.concat([fixture('crl-ca.pem'), fixture('ca.pem')]));
      expect(options().secureContext).to.not.equal(second.secureContext);
      // What is not read from a file stays as it was.
      expect(options()).to.include({ servername: 'localhost', rejectUnauthorized: true });
    });

    it('does not read a path that became a FIFO or a device (the connection, and the event loop, would wait on it): the last files stay in use, with a warning', async function () {
      const caFile = path.join(dir, 'ca.pem');
      fs.writeFileSync(caFile, fixture('ca.pem'));
      const options = currentTlsOptions({ tlsCAFile: caFile }, 'localhost');
      const first = options();
      fs.rmSync(caFile);
      execFileSync('mkfifo', [caFile]);
      // A writer that holds the FIFO open for 1.5 s and writes nothing: a read of it waits until it closes.
      const writer = spawn('sh', ['-c', `sleep 1.5 > '${caFile}'`], { stdio: 'ignore' });
      try {
        let took = Infinity;
        const warnings = await warningsOf(() => {
          const start = performance.now();
          expect(options()).to.equal(first);
          took = performance.now() - start;
        });
        expect(took).to.be.below(500);
        expect(warnings.map((w) => w.message)).to.have.lengthOf(1);
        expect(warnings[0].message).to.include('ca.pem').and.include('a regular file');
      } finally {
        writer.kill();
      }
    });

    it('reads a renewed file again when the process had no file descriptor left to read it (EMFILE), once it has one', async function () {
      // Takes every descriptor the process may open: only where that is a few tens of thousands.
      const limit = Number(/^Max open files\s+(\d+)/m.exec(fs.existsSync('/proc/self/limits') ? fs.readFileSync('/proc/self/limits', 'utf8') : '')?.[1]);
      if (!(limit <= 65536)) this.skip();
      const keyFile = path.join(dir, 'client.pem');
      fs.writeFileSync(keyFile, fixture('client.pem'));
      const options = currentTlsOptions({ tlsCAFile: path.join(fixtures, 'ca.pem'), tlsCertificateKeyFile: keyFile }, 'localhost');
      const first = options();
      replaceByRename(keyFile, fixture('x509-client.pem'));
      // Every descriptor taken, as by a burst of sockets: the renewal cannot be read now.
      const taken: number[] = [];
      const warnings = await warningsOf(() => {
        try {
          for (;;) taken.push(fs.openSync('/dev/null', 'r'));
        } catch (error) {
          expect((error as NodeJS.ErrnoException).code).to.equal('EMFILE');
        }
        try {
          expect(options()).to.equal(first);
        } finally {
          for (const fd of taken) fs.closeSync(fd);
        }
        expect(options().secureContext).to.not.equal(first.secureContext);
        expect(options().secureContext).to.equal(options().secureContext);
      });
      expect(warnings.map((w) => w.message)).to.have.lengthOf(1);
      expect(warnings[0].message).to.include('EMFILE');
    });

    it('warns once per change in the process, however many factories read the files (a client\'s pool and monitor of each host)', async function () {
      const caFile = path.join(dir, 'ca.pem');
      fs.writeFileSync(caFile, fixture('ca.pem'));
      const [pool, monitor, otherHost] = [0, 1, 2].map(() => currentTlsOptions({ tlsCAFile: caFile }, 'localhost'));
      // A CA bundle half-written.
      fs.writeFileSync(caFile, fixture('ca.pem').subarray(0, 300));
      const warnings = await warningsOf(() => [pool, monitor, otherHost, pool, monitor].forEach((options) => options()));
      expect(warnings.map((w) => w.message)).to.have.lengthOf(1);
      // The next change is warned of again.
      fs.writeFileSync(caFile, fixture('ca.pem').subarray(0, 200));
      expect(await warningsOf(() => [pool, monitor, otherHost].forEach((options) => options()))).to.have.lengthOf(1);
    });

    it('keeps reading the files a relative path named when the factory was made, after the process changes its directory', async function () {
      const first = path.join(dir, 'first');
      const second = path.join(dir, 'second');
      fs.mkdirSync(first);
      fs.mkdirSync(second);
      fs.writeFileSync(path.join(first, 'ca.pem'), fixture('ca.pem'));
      // Another authority under the same relative name, in the directory the process moves to.
      fs.writeFileSync(path.join(second, 'ca.pem'), fixture('other-ca.pem'));
      const cwd = process.cwd();
      try {
        process.chdir(first);
        const options = currentTlsOptions({ tlsCAFile: 'ca.pem' }, 'localhost');
        const made = options();
        process.chdir(second);
        const warnings = await warningsOf(() => expect(options()).to.equal(made));
        expect(warnings).to.deep.equal([]);
        // A change of the file it read is still seen.
        replaceByRename(path.join(first, 'ca.pem'), Buffer.concat([fixture('ca.pem'), fixture('x509-ca.pem')]));
        expect(options().secureContext).to.not.equal(made.secureContext);
      } finally {
        process.chdir(cwd);
      }
    });

    it('reads a changed file once in the process, however many factories use it (a client\'s pool and monitor of each host)', function () {
      const caFile = path.join(dir, 'ca.pem');
      const crlFile = path.join(dir, 'crl.pem');
      fs.writeFileSync(caFile, fixture('crl-ca.pem'));
      fs.writeFileSync(crlFile, fixture('crl-none-revoked.pem'));
      const factories = [0, 1, 2].map(() => currentTlsOptions({ tlsCAFile: caFile, tlsCRLFile: crlFile }, 'localhost'));
      replaceByRename(crlFile, fixture('crl-revoked.pem'));
      const contexts = new Set(factories.map((options) => options().secureContext));
      expect(contexts.size).to.equal(1);
      // Other files are not given that context.
      const other = currentTlsOptions({ tlsCAFile: path.join(fixtures, 'crl-ca.pem'), tlsCRLFile: crlFile }, 'localhost');
      replaceByRename(crlFile, fixture('crl-none-revoked.pem'));
      expect(other().secureContext).to.not.equal(factories[0]().secureContext);
      expect(factories[1]().secureContext).to.equal(factories[0]().secureContext);
    });

    it('loads the files once in the process as factories are made, however many (a client\'s pool and monitor of each host); a file changed since is loaded again', async function () {
      const caFile = path.join(dir, 'ca.pem');
      const crlFile = path.join(dir, 'crl.pem');
      fs.writeFileSync(caFile, fixture('crl-ca.pem'));
      fs.writeFileSync(crlFile, fixture('crl-none-revoked.pem'));
      const made = nodeTls.createSecureContext;
      let contexts = 0;
      nodeTls.createSecureContext = (...args) => (contexts++, made(...args));
      try {
        const factories = Array.from({ length: 10 }, (_, i) => currentTlsOptions({ tlsCAFile: caFile, tlsCRLFile: crlFile }, `h${i}.example.com`));
        expect(contexts, 'contexts made for 10 factories of the same files').to.equal(1);
        expect(new Set(factories.map((options) => options().secureContext)).size).to.equal(1);
        // What is not read from a file stays each factory's own.
        expect(factories[3]!()).to.include({ servername: 'h3.example.com' });
        // A client of three hosts makes a pool and a monitor for each: their factories take that context too.
        const ports = await Promise.all([closedPort(), closedPort(), closedPort()]);
        const client = connect(`mongodb://${ports.map((p) => `localhost:${p}`).join(',')}/?tlsCAFile=${encodeURIComponent(caFile)}&tlsCRLFile=${encodeURIComponent(crlFile)}`);
        await client.close();
        expect(contexts, 'contexts made once a client of three hosts was made too').to.equal(1);
        // The same files under a relative path are the same files.
        currentTlsOptions({ tlsCAFile: path.relative(process.cwd(), caFile), tlsCRLFile: crlFile }, 'localhost');
        expect(contexts, 'a relative path to the same file').to.equal(1);
        // A file changed since: the next factory loads the files again, and the factories made before take its context.
        const before = factories[0]!().secureContext;
        replaceByRename(crlFile, fixture('crl-revoked.pem'));
        const later = currentTlsOptions({ tlsCAFile: caFile, tlsCRLFile: crlFile }, 'localhost');
        expect(contexts, 'a factory made after the list changed').to.equal(2);
        expect(later().secureContext, 'the later factory\'s context').to.not.equal(before);
        expect(factories[0]!().secureContext, 'an older factory, at its next connection').to.equal(later().secureContext);
        expect(contexts, 'contexts made once the older factories read the change').to.equal(2);
        // Other files, or the same files under another passphrase, are not given that context.
        currentTlsOptions({ tlsCAFile: caFile }, 'localhost');
        currentTlsOptions({ tlsCAFile: caFile, tlsCRLFile: crlFile, tlsCertificateKeyFilePassword: 'other' }, 'localhost');
        expect(contexts, 'other files, another passphrase').to.equal(4);
      } finally {
        nodeTls.createSecureContext = made;
      }
    });

    it('gives a factory made after Node\'s TLS defaults changed a context of the new defaults, not the one of the same files made before', async function () {
      const caFile = path.join(dir, 'ca.pem');
      fs.writeFileSync(caFile, fixture('ca.pem'));
      // A server that speaks TLS 1.2 at most, as an old deployment does.
      const server = nodeTls.createServer({ key: fixture('server.key'), cert: fixture('server.crt'), maxVersion: 'TLSv1.2' }, (socket) => socket.end());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as { port: number }).port;
      const protocolOf = (options: nodeTls.ConnectionOptions): Promise<string> =>
        new Promise((resolve) => {
          const socket = nodeTls.connect({ ...options, host: '127.0.0.1', port }, () => (resolve(String(socket.getProtocol())), socket.destroy()));
          socket.on('error', (error: NodeJS.ErrnoException) => resolve(String(error.code)));
        });
      const minimum = nodeTls.DEFAULT_MIN_VERSION;
      try {
        const before = currentTlsOptions({ tlsCAFile: caFile }, 'localhost');
        expect(await protocolOf(before())).to.equal('TLSv1.2');
        // The application requires TLS 1.3 from now on: a client made now must not negotiate less.
        nodeTls.DEFAULT_MIN_VERSION = 'TLSv1.3';
        const after = currentTlsOptions({ tlsCAFile: caFile }, 'localhost');
        expect(await protocolOf(after()), 'a factory made after the default changed').to.equal('ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION');
        expect(await protocolOf(before()), 'a factory made before keeps its context').to.equal('TLSv1.2');
        // Its files replaced: each factory's new context is of the defaults it was made with.
        replaceByRename(caFile, Buffer.concat([fixture('ca.pem'), fixture('x509-ca.pem')]));
        expect(await protocolOf(after()), 'after a change, the later factory').to.equal('ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION');
        expect(await protocolOf(before()), 'after a change, the earlier factory').to.equal('TLSv1.2');
      } finally {
        nodeTls.DEFAULT_MIN_VERSION = minimum;
        server.close();
      }
    });

    it('gives the context of a changed client key file only to the factories of the same passphrase', function () {
      const keyFile = path.join(dir, 'client.pem');
      fs.writeFileSync(keyFile, fixture('client.pem'));
      const [one, sameAsOne, two] = ['one', 'one', 'two'].map((password) => currentTlsOptions({ tlsCertificateKeyFile: keyFile, tlsCertificateKeyFilePassword: password }, 'localhost'));
      replaceByRename(keyFile, fixture('x509-client.pem'));
      expect(sameAsOne!().secureContext).to.equal(one!().secureContext);
      expect(two!().secureContext).to.not.equal(one!().secureContext);
    });

    it('forgets the files of factories gone: a process that makes clients of ever new files keeps nothing of the old ones', async function () {
      const before = rememberedTlsFileSets();
      for (let i = 0; i < 20; i++) {
        const caFile = path.join(dir, `tenant-${i}.pem`);
        fs.writeFileSync(caFile, fixture('ca.pem'));
        let options: (() => unknown) | undefined = currentTlsOptions({ tlsCAFile: caFile }, 'localhost');
        // Renewed, or replaced by a file that cannot be used (a warning).
        fs.writeFileSync(caFile, i % 2 === 0 ? Buffer.concat([fixture('ca.pem'), fixture('x509-ca.pem')]) : fixture('ca.pem').subarray(0, 100));
        await warningsOf(() => options!());
        options = undefined;
      }
      expect(rememberedTlsFileSets(), 'while the factories may live').to.be.at.least(before + 20);
      // Their functions are collected, then the registry's callbacks run in a later turn.
      let remembered = Infinity;
      for (let i = 0; i < 50 && remembered > before; i++) {
        fullGc();
        await new Promise((r) => setTimeout(r, 10));
        remembered = rememberedTlsFileSets();
      }
      expect(remembered, 'once they are gone').to.be.at.most(before);
    });

    it('without files (Node\'s default trust store), gives one set of options', function () {
      const options = currentTlsOptions({ tls: true }, 'localhost');
      expect(options()).to.equal(options());
    });
  });
});
