import { expect } from 'chai';
import { inspect } from 'node:util';
import { InvalidOptionError, MongoCredentials } from '../lib';
import { authMechanismPropertiesValue, parseConnectionString, parseConnectionStringForClient, parseConnectionStringWithCredentials } from '../lib/connection-string';
import { PRIMARY, READ_PREFERENCE_MODES, readPreferenceFrom, type ReadPreference } from '../lib/read-preference';
import { parseTxtOptions, resolvedUri } from '../lib/client/srv';
import { SrvResolutionError } from '../lib/errors';

/** What parseConnectionString throws for `uri` (undefined when it does not throw). */
function parseError(uri: string): unknown {
  try {
    parseConnectionString(uri);
  } catch (e) {
    return e;
  }
  return undefined;
}

describe('parseConnectionString', function () {
  it('reads every CMAP pool option under the spec name, case-insensitively', function () {
    const p = parseConnectionString('mongodb://h/?maxPoolSize=7&MINPOOLSIZE=2&maxIdleTimeMS=3000&maxConnecting=3&waitQueueTimeoutMS=500');
    expect(p.poolOptions).to.deep.equal({ maxPoolSize: 7, minPoolSize: 2, maxIdleTimeMS: 3000, maxConnecting: 3, waitQueueTimeoutMS: 500 });
    expect(p.warnings).to.deep.equal([]);
  });

  it('ignores an invalid pool option value with a warning', function () {
    const p = parseConnectionString('mongodb://h/?maxPoolSize=-1&maxConnecting=0&minPoolSize=abc&waitQueueTimeoutMS=1.5');
    expect(p.poolOptions).to.deep.equal({});
    expect(p.warnings).to.deep.equal([
      'maxPoolSize="-1" is ignored: maxPoolSize must be an integer >= 0',
      'maxConnecting="0" is ignored: maxConnecting must be an integer > 0',
      'minPoolSize="abc" is ignored: minPoolSize must be an integer >= 0',
      'waitQueueTimeoutMS="1.5" is ignored: waitQueueTimeoutMS must be an integer number of ms >= 0',
    ]);
  });

  it('ignores minPoolSize above maxPoolSize with a warning', function () {
    const p = parseConnectionString('mongodb://h/?maxPoolSize=2&minPoolSize=5');
    expect(p.poolOptions).to.deep.equal({ maxPoolSize: 2 });
    expect(p.warnings[0]).to.match(/minPoolSize=5 is ignored/);
    // Without maxPoolSize, against the default (100); maxPoolSize=0 is no limit.
    const d = parseConnectionString('mongodb://h/?minPoolSize=150');
    expect(d.poolOptions).to.deep.equal({});
    expect(d.warnings).to.deep.equal(['minPoolSize=150 is ignored: it must be <= the default maxPoolSize (100)']);
    expect(parseConnectionString('mongodb://h/?maxPoolSize=0&minPoolSize=150').poolOptions).to.deep.equal({ maxPoolSize: 0, minPoolSize: 150 });
  });

  it('warns about unknown and unsupported keys, and repeated ones', function () {
    const p = parseConnectionString('mongodb://h/?fooBar=1&readConcernLevel=majority&appName=a&appName=b');
    expect(p.warnings).to.deep.equal([
      'unknown option fooBar is ignored',
      'readConcernLevel is not supported by rxcmap and is ignored',
      'appName is given more than once; using the last valid value',
    ]);
    expect(p.appName).to.equal('b');
  });

  it('lower-cases only the ASCII letters of a key: a Kelvin sign is no "k"', function () {
    // U+212A KELVIN SIGN, which toLowerCase() turns into "k": the key is not tlsCertificateKeyFile.
    const p = parseConnectionString('mongodb://h/?tlsCertificate%E2%84%AAeyFile=%2Fclient.pem&TLSCERTIFICATEKEYFILEPASSWORD=x');
    expect(p.connectionOptions).to.not.have.property('tlsCertificateKeyFile');
    expect(p.connectionOptions.tlsCertificateKeyFilePassword).to.equal('x');
    expect(p.warnings).to.have.length(1);
    expect(p.warnings[0]).to.match(/^unknown option tlsCertificate\u212AeyFile is ignored/);
    expect(p.redacted).to.not.include('client.pem');
  });

  it('says a repeated key takes its last valid value, which an invalid last value leaves as it was', function () {
    const p = parseConnectionString('mongodb://h/?maxPoolSize=5&maxPoolSize=abc');
    expect(p.poolOptions).to.deep.equal({ maxPoolSize: 5 });
    expect(p.warnings).to.deep.equal([
      'maxPoolSize is given more than once; using the last valid value',
      'maxPoolSize="abc" is ignored: maxPoolSize must be an integer >= 0',
    ]);
  });

  it("says where an option of connect()'s options object goes when it is given in the URI", function () {
    const p = parseConnectionString('mongodb://h/?maxLifeTimeMS=5000&keepaliveinitialdelay=1&tlsServerName=x&backgroundThreadIntervalMS=9');
    expect(p.warnings).to.deep.equal([
      'maxLifeTimeMS is ignored: it is not a connection string option; give maxLifeTimeMS in the options of connect()',
      'keepaliveinitialdelay is ignored: it is not a connection string option; give keepAliveInitialDelay in the options of connect()',
      'tlsServerName is ignored: it is not a connection string option; give tlsServerName in the options of connect()',
      'backgroundThreadIntervalMS is ignored: it is not a connection string option; give backgroundThreadIntervalMS in the options of connect()',
    ]);
    expect(p.poolOptions).to.deep.equal({});
    expect(p.connectionOptions).to.not.have.property('tlsServerName');
  });

  it('names the closest known key of an unknown one, and takes only "true" / "false" for booleans', function () {
    const p = parseConnectionString('mongodb://h/?maxPoolSze=5&conectTimeoutMS=10&loadBalanced=yes&tls=TRUE&directConnection=false');
    expect(p.warnings).to.deep.equal([
      'unknown option maxPoolSze is ignored (did you mean maxPoolSize?)',
      'unknown option conectTimeoutMS is ignored (did you mean connectTimeoutMS?)',
      'loadBalanced="yes" is ignored: loadBalanced must be "true" or "false"',
      'tls="TRUE" is ignored: tls must be "true" or "false"',
    ]);
    expect(p.poolOptions).to.deep.equal({});
    expect(p.clientOptions).to.deep.equal({ directConnection: false });
  });

  it('reads connection and client options: timeouts, TLS, compression, heartbeat, loadBalanced', function () {
    const p = parseConnectionString(
      'mongodb://h:27018/?connectTimeoutMS=100&socketTimeoutMS=200&tls=true&tlsCAFile=/ca.pem&compressors=lz4,zlib&zlibCompressionLevel=5&heartbeatFrequencyMS=800&serverSelectionTimeoutMS=900&loadBalanced=true',
    );
    expect(p.hosts).to.deep.equal(['h:27018']);
    expect(p.connectionOptions).to.deep.equal({
      connectTimeoutMS: 100,
      socketTimeoutMS: 200,
      tls: true,
      tlsCAFile: '/ca.pem',
      compressors: ['zlib'],
      zlibCompressionLevel: 5,
    });
    expect(p.clientOptions).to.deep.equal({ heartbeatFrequencyMS: 800, serverSelectionTimeoutMS: 900, loadBalanced: true });
    expect(p.warnings).to.deep.equal(['compressors lz4 are not supported and are ignored']);
  });

  it('ignores a serverSelectionTimeoutMS beyond 2147483647 ms (what one timer holds) with a warning', function () {
    const p = parseConnectionString('mongodb://h/?serverSelectionTimeoutMS=2147483648');
    expect(p.clientOptions).to.deep.equal({});
    expect(p.warnings).to.deep.equal([
      'serverSelectionTimeoutMS="2147483648" is ignored: serverSelectionTimeoutMS must be an integer number of ms from 1 to 2147483647',
    ]);
    expect(parseConnectionString('mongodb://h/?serverSelectionTimeoutMS=2147483647').clientOptions).to.deep.equal({ serverSelectionTimeoutMS: 2147483647 });
    expect(parseConnectionString('mongodb://h/?serverSelectionTimeoutMS=0').warnings).to.deep.equal([
      'serverSelectionTimeoutMS="0" is ignored: serverSelectionTimeoutMS must be an integer number of ms from 1 to 2147483647',
    ]);
  });

  it('ignores a connectTimeoutMS or socketTimeoutMS beyond 2147483647 ms (what one timer holds) with a warning', function () {
    const p = parseConnectionString('mongodb://h/?connectTimeoutMS=2147483648&socketTimeoutMS=3000000000');
    expect(p.connectionOptions).to.deep.equal({});
    expect(p.warnings).to.deep.equal([
      'connectTimeoutMS="2147483648" is ignored: connectTimeoutMS must be an integer number of ms from 0 to 2147483647',
      'socketTimeoutMS="3000000000" is ignored: socketTimeoutMS must be an integer number of ms from 0 to 2147483647',
    ]);
    const longest = parseConnectionString('mongodb://h/?connectTimeoutMS=2147483647&socketTimeoutMS=0');
    expect(longest.connectionOptions).to.deep.equal({ connectTimeoutMS: 2147483647, socketTimeoutMS: 0 });
    expect(longest.warnings).to.deep.equal([]);
  });

  it('builds credentials with authSource (or the URI database, or admin) and redacts the password everywhere', function () {
    const p = parseConnectionString('mongodb://alice:s3cr%40t@h/app?authMechanism=SCRAM-SHA-256&tlsCertificateKeyFilePassword=hunter2&tlsCertificateKeyFilePassword=x');
    const credentials = p.connectionOptions.credentials as MongoCredentials;
    expect(credentials).to.be.instanceOf(MongoCredentials);
    expect(credentials).to.include({ username: 'alice', password: 's3cr@t', source: 'app', mechanism: 'SCRAM-SHA-256' });
    expect(JSON.stringify(p) + inspect(p, { depth: 5 })).to.not.include('s3cr');
    expect(p.redacted).to.not.include('s3cr');
    expect(JSON.stringify(p.warnings)).to.not.include('hunter2');
    expect(parseConnectionString('mongodb://a:b@h/?authSource=other').connectionOptions.credentials).to.include({ source: 'other' });
    expect(parseConnectionString('mongodb://a:b@h').connectionOptions.credentials).to.include({ source: 'admin' });
  });

  it('uses a host listed more than once once, with a warning', function () {
    const p = parseConnectionString('mongodb://a:1,b,a:1,b:27017/');
    expect(p.hosts).to.deep.equal(['a:1', 'b:27017']);
    expect(p.warnings).to.deep.equal(['host a:1 is listed 2 times; it is used once', 'host b:27017 is listed 2 times; it is used once']);
  });

  it('uses one server spelt in several ways once: a host name in any case, an IPv6 address in any case or form', function () {
    const p = parseConnectionString('mongodb://Db.Example.com,db.example.COM:27017,[FE80::A]:1,[fe80::a]:1,[0:0:0:0:0:0:0:1],[::1]:27017,[fe80::1%25Eth0]');
    expect(p.hosts).to.deep.equal(['db.example.com:27017', '[fe80::a]:1', '[::1]:27017', '[fe80::1%Eth0]:27017']);
    expect(p.warnings).to.deep.equal([
      'host db.example.com:27017 is listed 2 times; it is used once',
      'host [fe80::a]:1 is listed 2 times; it is used once',
      'host [::1]:27017 is listed 2 times; it is used once',
    ]);
  });

  it('decodes a percent-encoded Unix domain socket path, absolute or relative, keeping its case', function () {
    const p = parseConnectionString('mongodb://carol:pw@%2Fvar%2Frun%2FMongo.d%2Fdb-1.sock,sockets%2Fdb%202.sock,%2Fvar%2Frun%2FMongo.d%2Fdb-1.sock/orders');
    expect(p.hosts).to.deep.equal(['/var/run/Mongo.d/db-1.sock', 'sockets/db 2.sock']);
    expect(p.warnings).to.deep.equal(['host /var/run/Mongo.d/db-1.sock is listed 2 times; it is used once']);
    expect(p.connectionOptions.credentials).to.include({ username: 'carol', source: 'orders' });
    expect(parseConnectionString('mongodb://10.0.0.7:27018,%2Frun%2Fm.sock').hosts).to.deep.equal(['10.0.0.7:27018', '/run/m.sock']);
  });

  it('reads a host ending in .sock without a "/" as a host name, as the connection string spec\'s tests do', function () {
    // "hostname resembling relative path": otherwise the pool would dial a socket file of the working directory.
    expect(parseConnectionString('mongodb://mongodb-27017.sock,%2Ftmp%2Fmongodb-27018.sock').hosts).to.deep.equal(['mongodb-27017.sock:27017', '/tmp/mongodb-27018.sock']);
    expect(parseConnectionString('mongodb://mongodb-27017.sock,rel%2Fmongodb-27018.sock').hosts).to.deep.equal(['mongodb-27017.sock:27017', 'rel/mongodb-27018.sock']);
  });

  it('refuses a Unix domain socket path whose slashes are not URL encoded, saying so, never echoing credentials', function () {
    // Connection string spec, "Host": "an exception MUST be thrown informing users that paths must be URL encoded".
    // A relative path too (./, ../), now that `mongodb-27017.sock` alone is a host name: unescaped, its "/" ended the
    // host list, read as the host "." and the auth database "mongodb-27017.sock".
    for (const [uri, path] of [
      ['mongodb:///tmp/mongodb-27017.sock', '/tmp/mongodb-27017.sock'],
      ['mongodb://carol:hunter2@/tmp/mongodb-27017.sock/orders?appName=a', '/tmp/mongodb-27017.sock'],
      ['mongodb://10.0.0.7:27018,/tmp/mongodb-27017.sock', '/tmp/mongodb-27017.sock'],
      ['mongodb:///tmp/mongodb-27017.sock/mongodb.sock', '/tmp/mongodb-27017.sock'],
      ['mongodb://./mongodb-27017.sock', './mongodb-27017.sock'],
      ['mongodb://carol:hunter2@./mongodb-27017.sock/orders?appName=a', './mongodb-27017.sock'],
      ['mongodb://10.0.0.7,../run/mongodb-27017.sock', '../run/mongodb-27017.sock'],
      ['mongodb:///tmp/a#b.sock', '/tmp/a#b.sock'],
      ['mongodb:///tmp/mongodb-27017.sock#x', '/tmp/mongodb-27017.sock'],
    ]) {
      const error = parseError(uri);
      expect(error, uri).to.be.instanceOf(InvalidOptionError).with.property('option', 'uri');
      expect((error as Error).message, uri).to.equal(`Unsupported host '${path}', UNIX socket domain paths must be URL encoded (write ${encodeURIComponent(path)})`);
      expect(inspect(error)).to.not.include('hunter2');
    }
    expect(parseConnectionString('mongodb://%2Ftmp%2Fmongodb-27017.sock/orders').hosts).to.deep.equal(['/tmp/mongodb-27017.sock']);
    expect(parseConnectionString('mongodb://.%2Fmongodb-27017.sock').hosts).to.deep.equal(['./mongodb-27017.sock']);
    expect(parseConnectionString('mongodb://%2Ftmp%2Fa%23b.sock').hosts).to.deep.equal(['/tmp/a#b.sock']);
    // A host and a dotted auth database stay what they are (connection string spec, valid-db-with-dotted-name).
    expect(parseConnectionString('mongodb://localhost/admin.sock').hosts).to.deep.equal(['localhost:27017']);
  });

  it('never shows the query up to an unescaped "@" in an option value, which the URL library reads as a user name', function () {
    for (const uri of ['mongodb://db/?proxyHost=p&proxyUsername=u&proxyPassword=s3cret@x', 'mongodb://db/?tlsCertificateKeyFilePassword=s3cret@x', 'mongodb://us[er:pw@db']) {
      const error = parseError(uri);
      expect(error, uri).to.be.instanceOf(InvalidOptionError).with.property('option', 'uri');
      expect((error as Error).message, uri).to.not.match(/s3cret|proxyPassword|us\[er/);
      expect((error as Error).message, uri).to.include('not percent-encoded (%40)');
    }
  });

  it('refuses a host whose percent-encoding is malformed with an InvalidOptionError, never echoing credentials', function () {
    for (const uri of ['mongodb://db%zz.example.com:27017', 'mongodb://10.0.0.7,%E0%A4%A.sock', 'mongodb://db%']) {
      expect(() => parseConnectionString(uri), uri).to.throw(InvalidOptionError, /Invalid address: .*percent-encoding/);
    }
    let error: unknown;
    try {
      parseConnectionString('mongodb://carol:hunter2@db%zz.example.com');
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect(inspect(error)).to.not.include('hunter2');
  });

  it('hides the value of every key it does not know, where a misspelt secret key would show its secret', function () {
    const p = parseConnectionString('mongodb://h/?tlsCertificateKeyFilePasword=hunter2&password=hunter3&maxPoolSize=5&appName=orders');
    expect(p.redacted).to.not.match(/hunter/);
    expect(p.redacted).to.include('maxPoolSize=5').and.include('appName=orders').and.include('tlsCertificateKeyFilePasword=_credentials_');
    expect(JSON.stringify(p.warnings)).to.not.match(/hunter/);
    // The rest is left as written: a known key's value is not re-encoded, a repeated key stays repeated.
    const q = parseConnectionString('mongodb://h/?appName=my%20app&compressors=zlib,snappy&typo=a&typo=b');
    expect(q.redacted).to.equal('mongodb://h/?appName=my%20app&compressors=zlib,snappy&typo=_credentials_&typo=_credentials_');
  });

  it('shows as written the values of the URI options spec\'s keys it does not act on, as in an Atlas connection string', function () {
    const p = parseConnectionString('mongodb+srv://u:pw@cluster0.abcde.mongodb.net/?retryWrites=true&w=majority&appName=Cluster0&readPreference=secondaryPreferred&apiVersion=1');
    expect(p.redacted).to.equal('mongodb+srv://_credentials_@cluster0.abcde.mongodb.net/?retryWrites=true&w=majority&appName=Cluster0&readPreference=secondaryPreferred&apiVersion=1');
    expect(parseConnectionString('mongodb://h/?W=1&RETRYWRITES=false').redacted, 'keys in any case').to.equal('mongodb://h/?W=1&RETRYWRITES=false');
  });

  it('keeps the known keys\' text as written beside a secret key, whose value it hides, in any case, as the proxy\'s user name', function () {
    const p = parseConnectionString(
      'mongodb://u:pw@h/?readPreference=nearest&readPreferenceTags=dc:ny,rack:1&tlsCertificateKeyFile=/a/b.pem&TLSCERTIFICATEKEYFILEPASSWORD=se:cret&proxyHost=px&proxyUsername=pu&ProxyPassword=pp',
    );
    expect(p.redacted).to.equal(
      'mongodb://_credentials_@h/?readPreference=nearest&readPreferenceTags=dc:ny,rack:1&tlsCertificateKeyFile=/a/b.pem&TLSCERTIFICATEKEYFILEPASSWORD=_credentials_&proxyHost=px&proxyUsername=_credentials_&ProxyPassword=_credentials_',
    );
    const oidc = parseConnectionString('mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:azure,TOKEN_RESOURCE:api://x&appName=a:b');
    expect(oidc.redacted).to.equal('mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=_credentials_&appName=a:b');
  });

  it('rejects a key with no "=" and value, naming it, instead of reading it as an empty value', function () {
    for (const [uri, key] of [
      ['mongodb://h/?tls', 'tls'],
      ['mongodb://h/?maxPoolSize=5&readPreference', 'readPreference'],
      ['mongodb://h/?app%20name&appName=x', 'app name'],
    ]) {
      const error = parseError(uri);
      expect(error, uri).to.be.instanceOf(InvalidOptionError);
      expect(error).to.include({ option: key, allowed: 'a key=value pair' });
      expect((error as Error).message).to.equal(`Invalid connection string option ${key}: it has no "=" and value (write ${key}=<value>, or leave it out)`);
    }
    // An empty value is still a value (ignored with a warning where the key takes none), and empty pieces are skipped.
    expect(parseConnectionString('mongodb://h/?maxPoolSize=&&appName=a').warnings).to.deep.equal([
      'maxPoolSize="" is ignored: maxPoolSize must be an integer >= 0',
    ]);
  });

  it('rejects an authMechanism without credentials in the URI, and ignores an authSource without them with a warning', function () {
    for (const mechanism of ['SCRAM-SHA-1', 'SCRAM-SHA-256']) {
      let error: unknown;
      try {
        parseConnectionString(`mongodb://h/reports?authMechanism=${mechanism}&authSource=reports`);
      } catch (e) {
        error = e;
      }
      expect(error).to.be.instanceOf(InvalidOptionError);
      expect((error as Error).message).to.equal(
        `Invalid authMechanism: "${mechanism}" (authMechanism must be given with credentials (user[:password]@host in the URI, or the credentials option of connect()): SCRAM needs a user name)`,
      );
    }
    const p = parseConnectionString('mongodb://h/reports?authSource=reports');
    expect(p.connectionOptions).to.deep.equal({});
    expect(p.warnings).to.deep.equal(['authSource is ignored: the URI has no credentials']);
  });

  it('warns that a URI authSource or authMechanism is ignored for credentials given as an option that set their own', function () {
    // A MongoCredentials authenticated against admin, its default source, while the URI said reports, and nothing
    // said so.
    const credentials = new MongoCredentials({ username: 'bob', password: 'pw' });
    const p = parseConnectionStringWithCredentials('mongodb://h/?authSource=reports', credentials);
    expect(p.connectionOptions.credentials).to.equal(credentials);
    expect(p.warnings).to.deep.equal(['authSource=reports is ignored: the credentials option sets its own source (admin)']);
    const own = { username: 'bob', password: 'pw', source: 'sales', mechanism: 'SCRAM-SHA-1' as const };
    expect(parseConnectionStringWithCredentials('mongodb://h/?authSource=reports&authMechanism=SCRAM-SHA-256', own).warnings).to.deep.equal([
      'authSource=reports is ignored: the credentials option sets its own source (sales)',
      'authMechanism=SCRAM-SHA-256 is ignored: the credentials option sets its own mechanism (SCRAM-SHA-1)',
    ]);
    // The same values, or credentials that leave them unset (and take the URI's), are not a warning.
    expect(parseConnectionStringWithCredentials('mongodb://h/?authSource=admin', credentials).warnings).to.deep.equal([]);
    const plain = parseConnectionStringWithCredentials('mongodb://h/?authSource=reports&authMechanism=SCRAM-SHA-1', { username: 'bob', password: 'pw' });
    expect(plain.warnings).to.deep.equal([]);
    expect(plain.connectionOptions.credentials).to.deep.include({ source: 'reports', mechanism: 'SCRAM-SHA-1' });
  });

  it("gives credentials passed as an option without a source the URI database as their source, as URI credentials get", function () {
    // Auth spec, SCRAM "source": defaults to the database name if supplied on the connection string, else admin.
    const given = { username: 'bob', password: 'pw' };
    expect(parseConnectionStringWithCredentials('mongodb://h/sales', given).connectionOptions.credentials).to.deep.include({ source: 'sales' });
    expect(parseConnectionString('mongodb://bob:pw@h/sales').connectionOptions.credentials).to.deep.include({ source: 'sales' });
    // authSource still comes first, then the credentials' own source; with neither and no database, admin.
    expect(parseConnectionStringWithCredentials('mongodb://h/sales?authSource=reports', given).connectionOptions.credentials).to.deep.include({ source: 'reports' });
    expect(parseConnectionStringWithCredentials('mongodb://h/sales', { ...given, source: 'hr' }).connectionOptions.credentials).to.deep.include({ source: 'hr' });
    const none = parseConnectionStringWithCredentials('mongodb://h/', given).connectionOptions.credentials;
    expect(new MongoCredentials(none as typeof given).source).to.equal('admin');
  });

  it('refuses a URI database that is the source of credentials but malformed (percent-encoding) or holds / \\ space " or $, with an InvalidOptionError that shows no password', function () {
    const given = { username: 'bob', password: 'hunter2' };
    for (const database of ['sales%ZZ', '%E0%A4%A', 'a%2Fb', 'a%5Cb', 'a%20b', 'a%22b', 'a%24b', 'a$b']) {
      for (const parse of [() => parseConnectionString(`mongodb://bob:hunter2@h/${database}`), () => parseConnectionStringWithCredentials(`mongodb://h/${database}`, given)]) {
        let error: unknown;
        try {
          parse();
        } catch (e) {
          error = e;
        }
        expect(error, database).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option, database).to.equal('database');
        expect(inspect(error)).to.not.include('hunter2');
      }
    }
    // Periods may express a namespace; an authSource, which comes first, leaves the database unused.
    expect(parseConnectionStringWithCredentials('mongodb://h/sales.orders', given).connectionOptions.credentials).to.deep.include({ source: 'sales.orders' });
    expect(parseConnectionStringWithCredentials('mongodb://h/sales%ZZ?authSource=hr', given).connectionOptions.credentials).to.deep.include({ source: 'hr' });
  });

  it('makes credentials passed as a plain object one MongoCredentials, whose salted-password cache every pool of the client shares', function () {
    // Kept plain, each pool's connection factory made its own MongoCredentials: one key derivation per server.
    for (const uri of ['mongodb://a,b,c/', 'mongodb://a,b,c/sales?authMechanism=SCRAM-SHA-256']) {
      const credentials = parseConnectionStringWithCredentials(uri, { username: 'bob', password: 'Pw-s3cret' }).connectionOptions.credentials;
      expect(credentials, uri).to.be.instanceOf(MongoCredentials);
      expect(JSON.stringify(credentials)).to.not.include('Pw-s3cret');
    }
  });

  it('reads the SRV options of a mongodb+srv URI, and ignores an invalid value with a warning', function () {
    const p = parseConnectionString('mongodb+srv://cluster0.example.net/?srvServiceName=mongo-east&srvMaxHosts=2');
    expect(p.isSRV).to.equal(true);
    expect(p.warnings).to.deep.equal([]);
    expect(p).to.include({ srvServiceName: 'mongo-east', srvMaxHosts: 2 });
    const q = parseConnectionString('mongodb+srv://cluster0.example.net/?srvServiceName=-east&srvMaxHosts=-1');
    expect(q).to.not.have.property('srvServiceName');
    expect(q).to.not.have.property('srvMaxHosts');
    expect(q.warnings).to.deep.equal([
      'srvServiceName="-east" is ignored: srvServiceName must be an SRV service name: letters, digits and single hyphens (not first or last), with a letter, at most 62 characters',
      'srvMaxHosts="-1" is ignored: srvMaxHosts must be an integer >= 0',
    ]);
    // Up to 62 characters (63 with the "_" of the DNS label), more than RFC 6335's 15.
    expect(parseConnectionString(`mongodb+srv://c.example.net/?srvServiceName=${'a'.repeat(62)}`).srvServiceName).to.equal('a'.repeat(62));
    expect(parseConnectionString(`mongodb+srv://c.example.net/?srvServiceName=${'a'.repeat(63)}`)).to.not.have.property('srvServiceName');
    expect(parseConnectionString('mongodb+srv://c.example.net/?srvServiceName=a--b')).to.not.have.property('srvServiceName');
    expect(parseConnectionString('mongodb+srv://c.example.net/?srvServiceName=123')).to.not.have.property('srvServiceName');
    expect(parseConnectionString('mongodb+srv://c.example.net/?srvServiceName=customname').srvServiceName).to.equal('customname');
  });

  it('refuses a positive srvMaxHosts with replicaSet or loadBalanced=true, and accepts srvMaxHosts=0 with them', function () {
    expect(() => parseConnectionString('mongodb+srv://c.example.net/?replicaSet=repl0&srvMaxHosts=1'))
      .to.throw(InvalidOptionError, 'Invalid srvMaxHosts: 1 (srvMaxHosts must be 0 (or absent) with replicaSet)');
    expect(() => parseConnectionString('mongodb+srv://c.example.net/?loadBalanced=true&srvMaxHosts=1'))
      .to.throw(InvalidOptionError, 'Invalid srvMaxHosts: 1 (srvMaxHosts must be 0 (or absent) with loadBalanced=true)');
    expect(parseConnectionString('mongodb+srv://c.example.net/?replicaSet=repl0&srvMaxHosts=0').srvMaxHosts).to.equal(0);
    expect(parseConnectionString('mongodb+srv://c.example.net/?loadBalanced=true&srvMaxHosts=0').srvMaxHosts).to.equal(0);
    expect(parseConnectionString('mongodb+srv://c.example.net/?loadBalanced=false&srvMaxHosts=3').srvMaxHosts).to.equal(3);
  });

  it('rejects every pair of conflicting TLS keys, whatever their values, including the two it does not act on', function () {
    const conflicts: [string, string][] = [
      ['tlsInsecure', 'tlsAllowInvalidCertificates'],
      ['tlsInsecure', 'tlsAllowInvalidHostnames'],
      ['tlsInsecure', 'tlsDisableOCSPEndpointCheck'],
      ['tlsInsecure', 'tlsDisableCertificateRevocationCheck'],
      ['tlsAllowInvalidCertificates', 'tlsDisableOCSPEndpointCheck'],
      ['tlsAllowInvalidCertificates', 'tlsDisableCertificateRevocationCheck'],
      ['tlsDisableOCSPEndpointCheck', 'tlsDisableCertificateRevocationCheck'],
    ];
    for (const [first, second] of conflicts) {
      for (const [a, b] of [['true', 'false'], ['false', 'false']]) {
        // Either order in the URI, keys in any case: the error names the first key of the pair, and the other.
        for (const query of [`${first}=${a}&${second}=${b}`, `${second.toUpperCase()}=${b}&${first}=${a}`]) {
          let error: unknown;
          try {
            parseConnectionString(`mongodb://h/?tls=true&${query}`);
          } catch (e) {
            error = e;
          }
          expect(error, query).to.be.instanceOf(InvalidOptionError);
          expect((error as Error).message, query).to.equal(`Invalid ${first}: "${a}" (${first} must be not combined with ${second})`);
        }
      }
    }
    // Alone, a key this library does not act on is ignored with a warning.
    expect(parseConnectionString('mongodb://h/?tls=true&tlsDisableOCSPEndpointCheck=true').warnings).to.deep.equal([
      'tlsDisableOCSPEndpointCheck is not supported by rxcmap and is ignored',
    ]);
  });

  it('raises an error when the instances of tls and ssl do not all have the same value, a repeated tls or ssl included (URI options spec, "Conflicting TLS options", item 8)', function () {
    for (const query of ['tls=true&tls=false', 'ssl=true&ssl=false', 'tls=true&ssl=true&tls=false', 'TLS=false&tls=true', 'tls=true&ssl=true&SSL=false']) {
      expect(() => parseConnectionString(`mongodb://h/?${query}`), query).to.throw(InvalidOptionError, /same value/);
    }
    for (const [query, tls] of [['tls=true&tls=true', true], ['ssl=false&tls=false&ssl=false', false], ['TLS=true&ssl=true&Ssl=true', true]] as const) {
      const parsed = parseConnectionString(`mongodb://h/?${query}`);
      expect(parsed.connectionOptions.tls, query).to.equal(tls);
    }
  });

  const errors: [string, RegExp][] = [
    ['postgres://user:s3cret@host', /Invalid uri/],
    ['mongodb://h/?tlsInsecure=true&tlsAllowInvalidCertificates=true', /tlsInsecure/],
    ['mongodb://h/?tls=true&ssl=false', /Invalid ssl/],
    ['mongodb://a,b/?directConnection=true', /directConnection/],
    ['mongodb://a,b/?loadBalanced=true', /loadBalanced/],
    ['mongodb://a/?loadBalanced=true&replicaSet=rs', /loadBalanced/],
    ['mongodb://a/?loadBalanced=true&directConnection=true', /loadBalanced/],
    ['mongodb://u:p@a/?authMechanism=GSSAPI', /authMechanism/],
    ['mongodb://a/?srvServiceName=mongo-east', /^Invalid srvServiceName: "mongo-east" \(srvServiceName must be given only in a mongodb\+srv:\/\/ URI\)$/],
    ['mongodb://a,b/?SRVMAXHOSTS=0', /^Invalid srvMaxHosts: "0" \(srvMaxHosts must be given only in a mongodb\+srv:\/\/ URI\)$/],
    ['mongodb://u:s3cret@a/db?authSource=', /^Invalid authSource: "" \(authSource must be a non-empty database name\)$/],
    ['mongodb://a/db?authSource=&maxPoolSize=5', /^Invalid authSource: "" \(authSource must be a non-empty database name\)$/],
  ];
  for (const [uri, message] of errors) {
    it(`rejects ${uri.replace('s3cret', '***')}`, function () {
      const error = parseError(uri);
      expect(error).to.be.instanceOf(InvalidOptionError);
      expect((error as Error).message).to.match(message);
      expect((error as Error).message).to.not.include('s3cret');
    });
  }

  it('never shows a password with an unescaped /, even when it makes the host list invalid', function () {
    let error: unknown;
    try {
      parseConnectionString('mongodb://alice:S3cretPw/x@::1/db');
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect(String((error as Error).message)).to.not.include('S3cretPw');
    expect((error as Error).message).to.match(/must be percent-encoded/);
  });

  it('reads a "#" after the host list as part of the auth database or option value, never as the start of a fragment', function () {
    // Connection string spec: the options run to the end of the string. As a URL fragment, "#b&tls=true" would be
    // dropped in silence: appName "a" and no TLS.
    const p = parseConnectionString('mongodb://u:p@h/my#db?appName=a#b&tls=true&tlsCertificateKeyFilePassword=k#3y');
    expect(p.appName).to.equal('a#b');
    expect(p.connectionOptions.tls).to.equal(true);
    expect(p.connectionOptions.tlsCertificateKeyFilePassword).to.equal('k#3y');
    expect((p.connectionOptions.credentials as MongoCredentials).source).to.equal('my#db');
    expect(p.warnings).to.deep.equal([]);
    // The redacted form shows no part of a secret that follows a "#".
    expect(p.redacted).to.not.include('3y');
  });
});

describe('parseConnectionString: values at and beyond the limits of each key', function () {
  /** The options a URI sets, and its warnings. */
  function read(query: string): { pool: object; connection: object; client: object; warnings: readonly string[] } {
    const p = parseConnectionString(`mongodb://h/?${query}`);
    return { pool: { ...p.poolOptions }, connection: { ...p.connectionOptions }, client: { ...p.clientOptions }, warnings: p.warnings };
  }

  it('takes an integer as decimal digits only (surrounding spaces aside), not "+5", "5e1" or "0x10", which Number() reads', function () {
    expect(read('maxPoolSize=%205%20').pool).to.deep.equal({ maxPoolSize: 5 });
    for (const value of ['%2B5', '5e1', '0x10', '5abc', 'abc5']) {
      expect(read(`maxPoolSize=${value}`), value).to.deep.include({ pool: {} }).and.have.property('warnings').that.has.length(1);
    }
  });

  it('takes 0 but no negative number of ms for the pool and the connection timeouts', function () {
    expect(read('maxIdleTimeMS=0&connectTimeoutMS=0')).to.deep.include({ pool: { maxIdleTimeMS: 0 }, connection: { connectTimeoutMS: 0 }, warnings: [] });
    expect(read('maxIdleTimeMS=-1&connectTimeoutMS=-1&socketTimeoutMS=-5')).to.deep.include({
      pool: {},
      connection: {},
      warnings: [
        'maxIdleTimeMS="-1" is ignored: maxIdleTimeMS must be an integer number of ms >= 0',
        'connectTimeoutMS="-1" is ignored: connectTimeoutMS must be an integer number of ms from 0 to 2147483647',
        'socketTimeoutMS="-5" is ignored: socketTimeoutMS must be an integer number of ms from 0 to 2147483647',
      ],
    });
  });

  it('takes a heartbeatFrequencyMS from 500 ms, and a zlibCompressionLevel from -1 to 9', function () {
    expect(read('heartbeatFrequencyMS=500&zlibCompressionLevel=-1').client).to.deep.equal({ heartbeatFrequencyMS: 500 });
    expect(read('zlibCompressionLevel=-1').connection).to.deep.equal({ zlibCompressionLevel: -1 });
    expect(read('zlibCompressionLevel=0').connection).to.deep.equal({ zlibCompressionLevel: 0 });
    expect(read('zlibCompressionLevel=9').connection).to.deep.equal({ zlibCompressionLevel: 9 });
    expect(read('heartbeatFrequencyMS=499&zlibCompressionLevel=10')).to.deep.include({
      client: {},
      connection: {},
      warnings: [
        'heartbeatFrequencyMS="499" is ignored: heartbeatFrequencyMS must be an integer number of ms >= 500',
        'zlibCompressionLevel="10" is ignored: zlibCompressionLevel must be an integer from -1 to 9',
      ],
    });
    expect(read('zlibCompressionLevel=-2')).to.deep.include({ connection: {}, warnings: ['zlibCompressionLevel="-2" is ignored: zlibCompressionLevel must be an integer from -1 to 9'] });
  });

  it('takes each serverMonitoringMode', function () {
    for (const mode of ['auto', 'stream', 'poll']) expect(read(`serverMonitoringMode=${mode}`), mode).to.deep.include({ client: { serverMonitoringMode: mode }, warnings: [] });
    expect(read('serverMonitoringMode=Auto').warnings).to.deep.equal(['serverMonitoringMode="Auto" is ignored: serverMonitoringMode must be one of "auto", "stream", "poll"']);
  });

  it('ignores an empty file name or key password with a warning that never shows the password, and an appName beyond 128 bytes', function () {
    expect(read('tlsCertificateKeyFilePassword=&tlsCAFile=')).to.deep.include({
      connection: {},
      warnings: [
        'tlsCertificateKeyFilePassword=<not shown> is ignored: tlsCertificateKeyFilePassword must be a non-empty string',
        'tlsCAFile="" is ignored: tlsCAFile must be a non-empty string',
      ],
    });
    const longest = 'é'.repeat(64);
    expect(read(`appName=${encodeURIComponent(longest)}`)).to.deep.include({ connection: { appName: longest }, warnings: [] });
    expect(read(`appName=${encodeURIComponent(`${longest}a`)}`)).to.deep.include({
      connection: {},
      warnings: [`appName="${longest}a" is ignored: appName must be at most 128 bytes`],
    });
  });

  it('reads compressors as a trimmed list, empty entries and "none" included, naming each one it drops', function () {
    expect(read('compressors=zlib,')).to.deep.include({ connection: { compressors: ['zlib'] }, warnings: [] });
    expect(read('compressors=%20none%20,zlib')).to.deep.include({ connection: { compressors: ['none', 'zlib'] }, warnings: [] });
    expect(read('compressors=lz4,zlib,brotli').warnings).to.deep.equal(['compressors lz4, brotli are not supported and are ignored']);
  });

  it('reads ssl as tls, and the two tlsAllow keys as booleans', function () {
    expect(read('ssl=true')).to.deep.include({ connection: { tls: true }, warnings: [] });
    expect(read('ssl=false')).to.deep.include({ connection: { tls: false }, warnings: [] });
    expect(read('tls=true&tlsAllowInvalidCertificates=true')).to.deep.include({ connection: { tls: true, tlsAllowInvalidCertificates: true }, warnings: [] });
    expect(read('tls=true&tlsAllowInvalidHostnames=false')).to.deep.include({ connection: { tls: true, tlsAllowInvalidHostnames: false }, warnings: [] });
  });

  it('turns TLS on for a mongodb+srv URI unless tls=false, and leaves it unset for a mongodb:// one', function () {
    expect(parseConnectionString('mongodb+srv://cluster0.example.net/').connectionOptions).to.deep.equal({ tls: true });
    expect(parseConnectionString('mongodb+srv://cluster0.example.net/?tls=false').connectionOptions).to.deep.equal({ tls: false });
    expect(parseConnectionString('mongodb://h/').connectionOptions).to.deep.equal({});
  });

  it('says that each key of the URI options spec it does not act on is not supported, not that it is unknown', function () {
    const keys = ['journal', 'readConcernLevel',
      'retryReads', 'retryWrites', 'serverSelectionTryOnce', 'socketCheckIntervalMS', 'timeoutMS', 'tlsDisableCertificateRevocationCheck', 'tlsDisableOCSPEndpointCheck',
      'w', 'wTimeoutMS', 'waitQueueMultiple', 'waitQueueSize', 'maxAdaptiveRetries', 'enableOverloadRetargeting', 'uuidRepresentation'];
    for (const key of keys) expect(read(`${key}=1`).warnings, key).to.deep.equal([`${key} is not supported by rxcmap and is ignored`]);
  });

  it('takes localThresholdMS (an integer number of ms >= 0) and replicaSet (a non-empty string), and ignores an invalid one with a warning', function () {
    const p = parseConnectionString('mongodb://a,b/?localThresholdMS=0&replicaSet=rs0');
    expect(p.clientOptions).to.deep.equal({ localThresholdMS: 0 });
    expect(p.replicaSet).to.equal('rs0');
    expect(p.warnings).to.deep.equal([]);
    expect(parseConnectionString('mongodb://h/?localThresholdMS=250').clientOptions).to.deep.equal({ localThresholdMS: 250 });
    const bad = parseConnectionString('mongodb://h/?localThresholdMS=-1&replicaSet=');
    expect(bad.clientOptions).to.deep.equal({});
    expect(bad).to.not.have.property('replicaSet');
    expect(bad.warnings).to.deep.equal([
      'localThresholdMS="-1" is ignored: localThresholdMS must be an integer number of ms >= 0',
      'replicaSet="" is ignored: replicaSet must be a non-empty string',
    ]);
    // An ignored replicaSet conflicts with nothing: loadBalanced stays allowed.
    expect(parseConnectionString('mongodb://h/?replicaSet=&loadBalanced=true').clientOptions).to.include({ loadBalanced: true });
    expect(() => parseConnectionString('mongodb://h/?replicaSet=rs0&loadBalanced=true')).to.throw(InvalidOptionError, /replicaSet/);
  });

  it('sets appName and replicaSet on the result only when given, so that spreading it overrides nothing', function () {
    expect(Object.keys(parseConnectionString('mongodb://h/'))).to.not.include.members(['appName']).and.not.include.members(['replicaSet']);
    expect(parseConnectionString('mongodb://h/?appName=a&replicaSet=rs')).to.include({ appName: 'a', replicaSet: 'rs' });
  });

  it('takes minPoolSize equal to maxPoolSize, and says which maxPoolSize a larger one exceeds', function () {
    expect(parseConnectionString('mongodb://h/?maxPoolSize=5&minPoolSize=5').poolOptions).to.deep.equal({ maxPoolSize: 5, minPoolSize: 5 });
    expect(parseConnectionString('mongodb://h/?maxPoolSize=2&minPoolSize=5').warnings).to.deep.equal(['minPoolSize=5 is ignored: it must be <= maxPoolSize (2)']);
    expect(parseConnectionStringForClient('mongodb://h/?maxPoolSize=9&minPoolSize=5', { maxPoolSize: 3 }).warnings).to.deep.equal([
      'minPoolSize=5 is ignored: it must be <= the maxPoolSize option (3)',
    ]);
  });

  it('names the topology conflicts with the value true and what it conflicts with', function () {
    for (const [uri, message] of [
      ['mongodb://a,b/?directConnection=true', 'Invalid directConnection: true (directConnection must be false (or absent) with several hosts or a mongodb+srv URI)'],
      ['mongodb+srv://a.example.net/?directConnection=true', 'Invalid directConnection: true (directConnection must be false (or absent) with several hosts or a mongodb+srv URI)'],
      ['mongodb://a,b/?loadBalanced=true', 'Invalid loadBalanced: true (loadBalanced must be false (or absent) with several hosts)'],
      ['mongodb://a/?loadBalanced=true&replicaSet=rs', 'Invalid loadBalanced: true (loadBalanced must be false (or absent) with replicaSet)'],
      ['mongodb://a/?loadBalanced=true&directConnection=true', 'Invalid loadBalanced: true (loadBalanced must be false (or absent) with directConnection=true)'],
    ]) {
      expect(() => parseConnectionString(uri), uri).to.throw(InvalidOptionError).with.property('message', message);
    }
  });

  it('names the authMechanisms it supports for another one, with or without credentials', function () {
    for (const uri of ['mongodb://u:p@a/?authMechanism=GSSAPI', 'mongodb://a/?authMechanism=GSSAPI']) {
      expect(() => parseConnectionString(uri), uri).to.throw(InvalidOptionError).with.property('message', 'Invalid authMechanism: "GSSAPI" (authMechanism must be one of SCRAM-SHA-256, SCRAM-SHA-1, MONGODB-X509, PLAIN, MONGODB-AWS, MONGODB-OIDC)');
    }
  });

  it("checks a proxyPort when it reads the URI for connect(), whose options object may complete the other proxy options", function () {
    // The proxy options that must come together are checked once merged with the options object: a proxyPort alone is no error here.
    expect(parseConnectionStringForClient('mongodb://h/?proxyPort=1080', {}).connectionOptions).to.deep.equal({ proxyPort: 1080 });
    expect(parseConnectionStringForClient('mongodb://h/?proxyPort=1', {}).connectionOptions).to.deep.equal({ proxyPort: 1 });
    expect(parseConnectionStringForClient('mongodb://h/?proxyPort=65535', {}).connectionOptions).to.deep.equal({ proxyPort: 65535 });
    for (const port of ['0', '65536', '-1', 'abc', '1080.5']) {
      expect(() => parseConnectionStringForClient(`mongodb://h/?proxyPort=${port}`, {}), port)
        .to.throw(InvalidOptionError)
        .with.property('message', `Invalid proxyPort: "${port}" (proxyPort must be an integer from 1 to 65535: the TCP port of the SOCKS5 proxy)`);
    }
  });
});

describe('parseConnectionString: what its errors and redacted URI show', function () {
  it('names an unescaped socket path holding an "@" by a placeholder, with no encoded form', function () {
    let error: unknown;
    try {
      parseConnectionString('mongodb:///tmp/a@b.sock');
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(InvalidOptionError).and.include({ option: 'uri', value: '<connection string not shown>', allowed: 'a host list whose Unix domain socket paths are URL encoded' });
    expect((error as Error).message).to.equal("Unsupported host '<path not shown>', UNIX socket domain paths must be URL encoded");
  });

  it('names a host list made invalid by credentials as the uri, never showing it', function () {
    expect(() => parseConnectionString('mongodb://alice:S3cretPw/x@::1/db'))
      .to.throw(InvalidOptionError)
      .with.property('message', "Invalid uri: <connection string not shown> (uri must be a host list of host[:port] entries (a user name or password containing '/', ':', '@', '?' or '#' must be percent-encoded))");
  });

  it('names a key with no value by its decoded name, "+" as a space', function () {
    expect(() => parseConnectionString('mongodb://h/?app+name')).to.throw(InvalidOptionError).with.property('option', 'app name');
  });

  it('leaves a URI without a query or with empty pieces as it is, and hides the value of an empty or "+"-spelt key', function () {
    expect(parseConnectionString('mongodb://u:pw@h/db').redacted).to.equal('mongodb://_credentials_@h/db');
    expect(parseConnectionString('mongodb://h/?appName=a&&tls=true').redacted).to.equal('mongodb://h/?appName=a&&tls=true');
    expect(parseConnectionString('mongodb://h/?=s3cret').redacted).to.equal('mongodb://h/?=_credentials_');
    // "+" is a space in a query: tlsCertificateKeyFile Password is no known key, and its value is hidden.
    expect(parseConnectionString('mongodb://h/?tlsCertificateKeyFile+Password=s3cret').redacted).to.equal('mongodb://h/?tlsCertificateKeyFile+Password=_credentials_');
  });
});

describe('parseConnectionStringWithCredentials: what the URI adds to the credentials option', function () {
  it('gives credentials without a mechanism the URI authMechanism, in a new MongoCredentials', function () {
    const credentials = new MongoCredentials({ username: 'bob', password: 'pw' });
    const p = parseConnectionStringWithCredentials('mongodb://h/?authMechanism=SCRAM-SHA-256', credentials);
    expect(p.connectionOptions.credentials).to.be.instanceOf(MongoCredentials).and.include({ username: 'bob', mechanism: 'SCRAM-SHA-256' });
    expect(p.connectionOptions.credentials).to.not.equal(credentials);
    expect(p.warnings).to.deep.equal([]);
  });

  it('warns about no authSource or authMechanism the URI does not give', function () {
    expect(parseConnectionStringWithCredentials('mongodb://h/', new MongoCredentials({ username: 'bob', password: 'pw', source: 'hr' })).warnings).to.deep.equal([]);
    expect(parseConnectionStringWithCredentials('mongodb://h/', { username: 'bob', password: 'pw', mechanism: 'SCRAM-SHA-1' }).warnings).to.deep.equal([]);
  });
});

describe('parseConnectionString*() given a URI that is not a string', () => {
  for (const [label, value] of [['a number', 5], ['null', null], ['undefined', undefined], ['an object', {}], ['a URL', new URL('mongodb://localhost')]] as const) {
    it(`refuses ${label} with an InvalidOptionError naming uri and saying a string is allowed`, () => {
      for (const parse of [(uri: unknown) => parseConnectionString(uri as string), (uri: unknown) => parseConnectionStringWithCredentials(uri as string, { username: 'u', password: 'p' })]) {
        let thrown: unknown;
        try {
          parse(value);
        } catch (error) {
          thrown = error;
        }
        expect(thrown).to.be.instanceOf(InvalidOptionError);
        const error = thrown as InvalidOptionError;
        expect(error.option).to.equal('uri');
        expect(error.allowed).to.match(/^a string/);
        expect(error.message).to.not.match(/startsWith|Cannot read|is not a function/);
      }
    });
  }
});

describe('parseConnectionString: the proxy options (SOCKS5 support spec; URI options spec, proxy-options tests)', function () {
  /** The URI options spec's proxy-options test cases: the URI, and whether it is valid. */
  const cases: readonly (readonly [string, boolean])[] = [
    ['mongodb://localhost/?proxyPort=1080', false],
    ['mongodb://localhost/?proxyUsername=abc', false],
    ['mongodb://localhost/?proxyPassword=def', false],
    ['mongodb://localhost/?proxyPort=1080&proxyUsername=abc&proxyPassword=def', false],
    ['mongodb://localhost/?proxyHost=localhost&proxyUsername=abc', false],
    ['mongodb://localhost/?proxyHost=localhost&proxyPassword=def', false],
    ['mongodb://localhost/?proxyHost=localhost&proxyHost=localhost2', false],
    ['mongodb://localhost/?proxyHost=localhost&proxyPort=1234&proxyPort=12345', false],
    ['mongodb://localhost/?proxyHost=localhost&proxyUsername=abc&proxyUsername=def&proxyPassword=123', false],
    ['mongodb://localhost/?proxyHost=localhost&proxyUsername=abc&proxyPassword=123&proxyPassword=456', false],
    ['mongodb://localhost/?proxyHost=localhost', true],
    ['mongodb://localhost/?proxyHost=localhost&proxyPort=1080', true],
    ['mongodb://localhost/?proxyHost=localhost&proxyPort=12345', true],
    ['mongodb://rs1,rs2,rs3/?proxyHost=localhost&proxyPort=12345', true],
    ['mongodb://rs1,rs2,rs3/?proxyHost=localhost&proxyPort=12345&proxyUsername=asdf&proxyPassword=qwerty', true],
  ];
  for (const [uri, valid] of cases) {
    it(`${valid ? 'accepts' : 'refuses'} ${uri}`, function () {
      let error: unknown;
      let parsed;
      try {
        parsed = parseConnectionString(uri);
      } catch (e) {
        error = e;
      }
      if (valid) {
        expect(error).to.equal(undefined);
        expect(parsed!.warnings).to.deep.equal([]);
        expect(parsed!.connectionOptions.proxyHost).to.equal('localhost');
      } else {
        expect(error).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).to.match(/^proxy(Host|Port|Username|Password)$/);
        // The passwords of these cases (def, 123, 456) are never shown.
        if ((error as InvalidOptionError).option === 'proxyPassword') expect((error as Error).message).to.not.match(/def|123|456/);
      }
    });
  }

  it('reads the four options, proxyPort as a number, and keeps the proxy password out of warnings and the redacted URI', function () {
    const p = parseConnectionString('mongodb://h/?proxyHost=proxy.example&proxyPort=1081&proxyUsername=bob&proxyPassword=Pr0xyS3cret&proxyPassword=Pr0xyS3cret');
    expect(p.connectionOptions).to.include({ proxyHost: 'proxy.example', proxyPort: 1081, proxyUsername: 'bob', proxyPassword: 'Pr0xyS3cret' });
    expect(p.warnings).to.deep.equal([]);
    expect(p.redacted).to.not.include('Pr0xyS3cret');
  });

  it('refuses a proxyPort that is not an integer from 1 to 65535, rather than ignoring it (which would pick port 1080)', function () {
    for (const port of ['0', '65536', '-1', 'abc', '1080.5', '']) {
      expect(() => parseConnectionString(`mongodb://h/?proxyHost=p&proxyPort=${port}`), port).to.throw(InvalidOptionError, /proxyPort.*1 to 65535/);
    }
  });

  it('names a proxy option given twice with different values by its last value, quoted once', function () {
    for (const [query, message] of [
      ['proxyHost=p1&proxyHost=p2', 'Invalid proxyHost: "p2" (proxyHost must be given once (or each time with the same value))'],
      ['proxyHost=p&proxyPort=1080&proxyPort=1081', 'Invalid proxyPort: "1081" (proxyPort must be given once (or each time with the same value))'],
      ['proxyHost=p&proxyUsername=u1&proxyUsername=u2&proxyPassword=pw', 'Invalid proxyUsername: "u2" (proxyUsername must be given once (or each time with the same value))'],
    ]) {
      expect(() => parseConnectionString(`mongodb://h/?${query}`), query).to.throw(InvalidOptionError).with.property('message', message);
    }
  });

  it('never shows a repeated proxyPassword', function () {
    const uri = 'mongodb://h/?proxyHost=p&proxyUsername=u&proxyPassword=Pr0xyS3cret&proxyPassword=Other5ecret';
    expect(() => parseConnectionString(uri))
      .to.throw(InvalidOptionError, /^Invalid proxyPassword: "<not shown>"/)
      .that.satisfies((error: unknown) => !/Pr0xyS3cret|Other5ecret/.test(inspect(error)));
  });
});

describe('parseConnectionString: authMechanismProperties', function () {
  it('splits KEY:value pairs at each first colon, a value keeping later colons; a malformed list or a repeated KEY is refused', function () {
    expect({ ...authMechanismPropertiesValue('TOKEN_RESOURCE:api://x:8080/a,ENVIRONMENT:azure').value }).to.deep.equal({ TOKEN_RESOURCE: 'api://x:8080/a', ENVIRONMENT: 'azure' });
    expect(Object.getPrototypeOf(authMechanismPropertiesValue('A:b').value)).to.equal(null);
    expect({ ...authMechanismPropertiesValue('A:').value }).to.deep.equal({ A: '' });
    for (const text of ['', 'A', ':b', 'A:b,', 'A:b,,C:d']) expect(authMechanismPropertiesValue(text), text).to.deep.equal({ error: "a list of KEY:value pairs separated by ','" });
    expect(authMechanismPropertiesValue('A:b,A:c')).to.deep.equal({ error: 'a list of KEY:value pairs, each KEY once (A is given twice)' });
  });

  it('refuses with the credentials a key their mechanism does not take (SCRAM, PLAIN, MONGODB-X509 take none), never showing the value', function () {
    for (const uri of [
      'mongodb://u:p@h/?authMechanismProperties=SERVICE_NAME:s3cr3t',
      'mongodb://u:p@h/?authMechanism=SCRAM-SHA-1&authMechanismProperties=SERVICE_NAME:s3cr3t',
      'mongodb://u:p@h/?authMechanism=PLAIN&authMechanismProperties=SERVICE_NAME:s3cr3t',
      'mongodb://h/?authMechanism=MONGODB-X509&authMechanismProperties=SERVICE_NAME:s3cr3t',
    ]) {
      expect(() => parseConnectionString(uri), uri)
        .to.throw(InvalidOptionError, /^Invalid authMechanismProperties\.SERVICE_NAME \(authMechanismProperties\.SERVICE_NAME must be absent: .* takes no mechanism properties\)$/)
        .that.satisfies((error: unknown) => !inspect(error, { showHidden: true }).includes('s3cr3t'));
    }
    expect(() => parseConnectionStringWithCredentials('mongodb://h/?authMechanismProperties=SERVICE_NAME:s3cr3t', { username: 'u', password: 'p' })).to.throw(
      InvalidOptionError,
      /^Invalid authMechanismProperties\.SERVICE_NAME /,
    );
  });

  it('ignores with a warning a malformed list, and one without credentials; never shows its values, in warnings or the redacted URI', function () {
    const malformed = parseConnectionString('mongodb://u:p@h/?authMechanismProperties=s3cr3t');
    expect(malformed.warnings).to.deep.equal(["authMechanismProperties=<not shown> is ignored: authMechanismProperties must be a list of KEY:value pairs separated by ','"]);
    expect(malformed.connectionOptions.credentials?.mechanismProperties).to.deep.equal({});
    const alone = parseConnectionString('mongodb://h/?authMechanismProperties=A:s3cr3t');
    expect(alone.warnings).to.deep.equal(['authMechanismProperties is ignored: the URI has no credentials']);
    expect(alone.connectionOptions).to.not.have.property('authMechanismProperties');
    expect(alone.redacted).to.equal('mongodb://h/?authMechanismProperties=_credentials_');
    const twice = parseConnectionString('mongodb://h/?authMechanismProperties=A:s3cr3t&authMechanismProperties=A:x');
    expect(twice.warnings.join()).to.not.include('s3cr3t');
  });

  it('is no longer among the keys that are not supported', function () {
    expect(parseConnectionString('mongodb://h/?authMechanismProperties=A:b').warnings.join()).to.not.include('not supported');
  });
});

describe('parseConnectionString: readPreference, readPreferenceTags, maxStalenessSeconds (URI options spec; max staleness spec, "API")', function () {
  /**
   * The URI options spec's read-preference-options tests: description, URI, whether it warns, and the read preference
   * rxcmap gives (undefined where the test's options are null: nothing valid is given).
   */
  const cases: readonly (readonly [string, string, boolean, ReadPreference | undefined])[] = [
    [
      'Valid read preference options are parsed correctly',
      'mongodb://example.com/?readPreference=primaryPreferred&readPreferenceTags=dc:ny,rack:1&maxStalenessSeconds=120&readPreferenceTags=dc:ny',
      false,
      { mode: 'primaryPreferred', tags: [{ dc: 'ny', rack: '1' }, { dc: 'ny' }], maxStalenessSeconds: 120 },
    ],
    ['Single readPreferenceTags is parsed as array of size one', 'mongodb://example.com/?readPreference=secondary&readPreferenceTags=dc:ny', false, { mode: 'secondary', tags: [{ dc: 'ny' }] }],
    ['Read preference tags are case sensitive', 'mongodb://example.com/?readPreference=secondary&readPreferenceTags=dc:NY', false, { mode: 'secondary', tags: [{ dc: 'NY' }] }],
    ['Invalid readPreferenceTags causes a warning', 'mongodb://example.com/?readPreferenceTags=invalid', true, undefined],
    ['Non-numeric maxStalenessSeconds causes a warning', 'mongodb://example.com/?maxStalenessSeconds=invalid', true, undefined],
    ['Too low maxStalenessSeconds causes a warning', 'mongodb://example.com/?maxStalenessSeconds=-2', true, undefined],
  ];
  /** `readPreference` without its keys that are undefined (readPreferenceFrom gives `tags: undefined` and the like). */
  const plain = (readPreference: ReadPreference | undefined): unknown => (readPreference === undefined ? undefined : JSON.parse(JSON.stringify(readPreference)));
  for (const [description, uri, warning, expected] of cases) {
    it(`read-preference-options: ${description}`, function () {
      const p = parseConnectionString(uri);
      expect(p.warnings, 'warnings').to.have.length(warning ? 1 : 0);
      if (warning) expect(p.warnings[0]).to.match(/^(readPreferenceTags|maxStalenessSeconds)=".*" is ignored: /);
      expect(plain(p.readPreference)).to.deep.equal(expected);
      if (expected === undefined) expect(p).to.not.have.property('readPreference');
    });
  }

  it('gives the read preference readPreferenceFrom makes, frozen to its tag sets: the same object for a mode alone', function () {
    const p = parseConnectionString('mongodb://h/?readPreference=nearest&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=dc:sf&maxStalenessSeconds=90');
    const rp = p.readPreference!;
    expect(rp).to.deep.equal(readPreferenceFrom('readPreference', { mode: 'nearest', tags: [{ dc: 'ny', rack: '1' }, { dc: 'sf' }], maxStalenessSeconds: 90 }));
    expect(Object.isFrozen(rp) && Object.isFrozen(rp.tags) && rp.tags!.every((set) => Object.isFrozen(set))).to.equal(true);
    for (const mode of READ_PREFERENCE_MODES) {
      expect(parseConnectionString(`mongodb://h/?readPreference=${mode}`).readPreference, mode).to.equal(readPreferenceFrom('readPreference', mode));
    }
    expect(parseConnectionString('mongodb://h/?readPreference=primary').readPreference).to.equal(PRIMARY);
    expect(parseConnectionString('mongodb://h/').readPreference).to.equal(undefined);
  });

  it('takes a mode only as written, in lowercase camelCase: another is ignored with a warning naming the closest mode', function () {
    // URI options spec: readPreference values "must be lowercase camelCase"; connection string spec, "Values": an
    // invalid value is ignored with a warning. The mode left is primary, the default.
    for (const [value, hint] of [['SECONDARY', ' (did you mean secondary?)'], ['Secondary', ' (did you mean secondary?)'], ['primarypreferred', ' (did you mean primaryPreferred?)'], ['', ''], ['fastest', '']]) {
      const p = parseConnectionString(`mongodb://h/?readPreference=${value}`);
      expect(p.readPreference, value).to.equal(undefined);
      expect(p.warnings, value).to.deep.equal([
        `readPreference=${JSON.stringify(value)} is ignored: readPreference must be one of primary, primaryPreferred, secondary, secondaryPreferred, nearest, written in lowercase camelCase${hint}`,
      ]);
    }
  });

  it('takes the last valid readPreference or maxStalenessSeconds of several, saying the key is repeated', function () {
    const p = parseConnectionString('mongodb://h/?readPreference=secondary&readPreference=Nearest&maxStalenessSeconds=120&maxStalenessSeconds=150');
    expect(plain(p.readPreference)).to.deep.equal({ mode: 'secondary', maxStalenessSeconds: 150 });
    expect(p.warnings).to.deep.equal([
      'readPreference is given more than once; using the last valid value',
      'readPreference="Nearest" is ignored: readPreference must be one of primary, primaryPreferred, secondary, secondaryPreferred, nearest, written in lowercase camelCase (did you mean nearest?)',
      'maxStalenessSeconds is given more than once; using the last valid value',
    ]);
  });

  it('reads each readPreferenceTags as one tag set, in order, without a repeated-key warning; the empty one is {}', function () {
    // Connection string spec, "Values" (Lists): ?readPreferenceTags=dc:ny,rack:1&readPreferenceTags=dc:ny&readPreferenceTags=
    const p = parseConnectionString('mongodb://h/?readPreference=secondary&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=dc:ny&readPreferenceTags=');
    expect(plain(p.readPreference)).to.deep.equal({ mode: 'secondary', tags: [{ dc: 'ny', rack: '1' }, { dc: 'ny' }, {}] });
    expect(p.warnings).to.deep.equal([]);
    const reversed = parseConnectionString('mongodb://h/?readPreferenceTags=dc:sf&readPreference=secondary&readPreferenceTags=dc:ny&readPreferenceTags=dc:ny');
    expect(reversed.readPreference?.tags).to.deep.equal([{ dc: 'sf' }, { dc: 'ny' }, { dc: 'ny' }]);
    expect(reversed.warnings).to.deep.equal([]);
    // A first tag set {} matches every candidate: no tags, as readPreferenceFrom gives.
    expect(plain(parseConnectionString('mongodb://h/?readPreference=secondary&readPreferenceTags=&readPreferenceTags=dc:ny').readPreference)).to.deep.equal({ mode: 'secondary' });
  });

  it('splits a tag at its first ":" and ignores, with a warning, a tag set that is not name:value pairs, keeping the others in order', function () {
    expect(parseConnectionString('mongodb://h/?readPreference=nearest&readPreferenceTags=rack:a:b,dc:').readPreference?.tags).to.deep.equal([{ rack: 'a:b', dc: '' }]);
    expect(parseConnectionString('mongodb://h/?readPreference=nearest&readPreferenceTags=__proto__:x').readPreference?.tags).to.deep.equal([{ ['__proto__']: 'x' }]);
    for (const bad of ['invalid', 'dc:ny,', ':ny', 'dc:ny,,rack:1', 'dc:ny,dc:sf']) {
      const p = parseConnectionString(`mongodb://h/?readPreference=nearest&readPreferenceTags=dc:a&readPreferenceTags=${bad}&readPreferenceTags=dc:b`);
      expect(p.readPreference?.tags, bad).to.deep.equal([{ dc: 'a' }, { dc: 'b' }]);
      expect(p.warnings, bad).to.deep.equal([
        `readPreferenceTags=${JSON.stringify(bad)} is ignored: readPreferenceTags must be a tag set: name:value pairs separated by "," (e.g. dc:ny,rack:1), each name once; or empty, for the tag set {} that every server matches`,
      ]);
    }
  });

  it('takes maxStalenessSeconds -1 as no maximum and an integer from 1 to 2147483647; ignores 0, a fraction, an empty value or one beyond an int32 with a warning', function () {
    // Max staleness spec, "API": -1 is "no maximum staleness"; a positive integer otherwise. 0 is too low, as -2 is.
    expect(parseConnectionString('mongodb://h/?readPreference=secondary&maxStalenessSeconds=-1').readPreference).to.equal(readPreferenceFrom('readPreference', 'secondary'));
    expect(parseConnectionString('mongodb://h/?maxStalenessSeconds=-1').readPreference).to.equal(PRIMARY);
    // Whether it is at least 90 is checked in a replica set, at selection: a sharded cluster takes less.
    expect(plain(parseConnectionString('mongodb://h/?readPreference=secondary&maxStalenessSeconds=1').readPreference)).to.deep.equal({ mode: 'secondary', maxStalenessSeconds: 1 });
    // $readPreference carries it as an int32 (the URI options spec: integer options are 32-bit).
    expect(plain(parseConnectionString('mongodb://h/?readPreference=secondary&maxStalenessSeconds=2147483647').readPreference)).to.deep.equal({ mode: 'secondary', maxStalenessSeconds: 2147483647 });
    for (const value of ['0', '1.5', '', '-3', '2147483648', '4294967296', '9007199254740993']) {
      const p = parseConnectionString(`mongodb://h/?readPreference=secondary&maxStalenessSeconds=${value}`);
      expect(p.readPreference, value).to.equal(readPreferenceFrom('readPreference', 'secondary'));
      expect(p.warnings, value).to.deep.equal([`maxStalenessSeconds=${JSON.stringify(value)} is ignored: maxStalenessSeconds must be an integer from 1 to 2147483647 (seconds), or -1 for no maximum`]);
    }
  });

  it('refuses a positive maxStalenessSeconds with mode primary, given or by default, naming a mode it ignored', function () {
    // Max staleness spec, "API": such a connection string "MUST be considered invalid; this includes connection
    // strings with no explicit read preference mode".
    for (const [query, why] of [
      ['readPreference=primary&maxStalenessSeconds=120', 'readPreference=primary'],
      ['maxStalenessSeconds=120', 'the URI gives no readPreference'],
      ['readPreference=Secondary&maxStalenessSeconds=120', 'the URI\'s readPreference="Secondary" is no mode and is ignored'],
    ]) {
      expect(() => parseConnectionString(`mongodb://h/?${query}`), query)
        .to.throw(InvalidOptionError)
        .that.includes({ option: 'maxStalenessSeconds', value: 120 })
        .and.has.property('message', `Invalid maxStalenessSeconds: 120 (maxStalenessSeconds must be -1 (or absent) with read preference mode primary (${why}): a primary is never stale; give a readPreference other than primary)`);
    }
    // No maximum, or one ignored with a warning, is no conflict.
    expect(parseConnectionString('mongodb://h/?readPreference=primary&maxStalenessSeconds=-1').readPreference).to.equal(PRIMARY);
    expect(parseConnectionString('mongodb://h/?maxStalenessSeconds=0').warnings).to.have.length(1);
  });

  it('refuses a non-empty tag set with mode primary, given or by default, wherever it is in the list', function () {
    // Server selection spec, "tag_sets": "Clients MUST raise an error if a non-empty tag set is given in tag_sets and
    // the mode field is 'primary'"; URI options spec: readPreferenceTags "only valid if the read preference mode is not
    // primary".
    for (const [query, written, why] of [
      ['readPreference=primary&readPreferenceTags=dc:ny,rack:1', 'dc:ny,rack:1', 'readPreference=primary'],
      ['readPreferenceTags=dc:ny', 'dc:ny', 'the URI gives no readPreference'],
      ['readPreferenceTags=&readPreferenceTags=dc:sf', 'dc:sf', 'the URI gives no readPreference'],
    ]) {
      expect(() => parseConnectionString(`mongodb://h/?${query}`), query)
        .to.throw(InvalidOptionError)
        .that.includes({ option: 'readPreferenceTags', value: written })
        .and.has.property('message', `Invalid readPreferenceTags: "${written}" (readPreferenceTags must be empty (or absent) with read preference mode primary (${why}): only the primary is suitable, whatever its tags; give a readPreference other than primary)`);
    }
    // The empty tag set matches the primary: no conflict; nor is a tag set ignored with a warning.
    expect(parseConnectionString('mongodb://h/?readPreference=primary&readPreferenceTags=').readPreference).to.equal(PRIMARY);
    expect(parseConnectionString('mongodb://h/?readPreferenceTags=').readPreference).to.equal(PRIMARY);
    expect(parseConnectionString('mongodb://h/?readPreferenceTags=invalid').warnings).to.have.length(1);
  });

  it('never shows the password beside a read preference, parsed, warned about or refused; shows its values in the redacted URI', function () {
    const uri = 'mongodb://alice:S3cretPw@h/?readPreference=nearest&readPreferenceTags=dc:ny&readPreferenceTags=bad&maxStalenessSeconds=0';
    const p = parseConnectionString(uri);
    expect(plain(p.readPreference)).to.deep.equal({ mode: 'nearest', tags: [{ dc: 'ny' }] });
    expect([...p.warnings, p.redacted, inspect(p, { depth: 6 }), JSON.stringify(p)].join('\n')).to.not.include('S3cretPw');
    expect(p.redacted).to.equal('mongodb://_credentials_@h/?readPreference=nearest&readPreferenceTags=dc:ny&readPreferenceTags=bad&maxStalenessSeconds=0');
    for (const refused of ['mongodb://alice:S3cretPw@h/?maxStalenessSeconds=120', 'mongodb://alice:S3cretPw@h/?readPreferenceTags=dc:ny']) {
      expect(() => parseConnectionString(refused))
        .to.throw(InvalidOptionError)
        .that.satisfies((error: unknown) => !inspect(error, { showHidden: true }).includes('S3cretPw'));
    }
  });

  it('takes none of them from a TXT record, and keeps a mongodb+srv URI\'s tag sets in order once its hosts are known', function () {
    // Initial DNS seedlist discovery spec, "Default Connection String Options": only authSource, replicaSet and
    // loadBalanced in a TXT record; any other option is an error.
    for (const option of ['readPreference=secondary', 'readPreferenceTags=dc:ny', 'maxStalenessSeconds=120']) {
      expect(() => parseTxtOptions('cluster0.example.net', `replicaSet=rs0&${option}`), option).to.throw(SrvResolutionError, /a TXT record may give only authSource, replicaSet and loadBalanced$/);
    }
    const srv = 'mongodb+srv://cluster0.example.net/?readPreference=secondary&readPreferenceTags=dc:sf&readPreferenceTags=dc:ny&readPreferenceTags=&maxStalenessSeconds=90';
    expect(plain(parseConnectionString(srv).readPreference)).to.deep.equal({ mode: 'secondary', tags: [{ dc: 'sf' }, { dc: 'ny' }, {}], maxStalenessSeconds: 90 });
    const resolved = parseConnectionString(resolvedUri(srv, ['a.example.net:27017', 'b.example.net:27017'], [['replicaSet', 'rs0']]));
    expect(plain(resolved.readPreference)).to.deep.equal({ mode: 'secondary', tags: [{ dc: 'sf' }, { dc: 'ny' }, {}], maxStalenessSeconds: 90 });
    expect(resolved.replicaSet).to.equal('rs0');
    expect(resolved.warnings).to.deep.equal([]);
  });
});
