/**
 * Initial DNS seedlist discovery (mongodb+srv://): the spec's prose tests on the domain checks, its JSON test cases
 * run through Node's real resolver against a local DNS responder serving the records of the spec tests' README, and a
 * client connecting through the hosts found (a SOCKS5 proxy sends them to an EmbeddedServer).
 *
 * Source: initial DNS seedlist discovery spec and its tests (tests/README.md; replica-set, load-balanced, sharded).
 */
import { expect } from 'chai';
import * as dns from 'node:dns';
import { getEventListeners } from 'node:events';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { ClientClosedError, CommandCancelledError, connect, InvalidOptionError, MongoCredentials, ServerSelectionError, SrvResolutionError, type Client } from '../../lib';
import { connectedSettings } from '../../lib/client/client';
import { discoverSeedlist, matchesParentDomain, parseTxtOptions, pickAtRandom, resolvedUri } from '../../lib/client/srv';
import { EmbeddedServer } from '../../lib/testing';
import { DnsResponder, type Zone } from '../support/dns-responder';
import { eventually } from '../support/endpoint';
import { startSocks5Proxy, type Socks5Proxy } from '../support/socks5-proxy';

const fixtures = path.resolve(__dirname, '../fixtures/initial-dns-seedlist-discovery');
const tlsFixtures = path.resolve(__dirname, '../fixtures/tls');

/** The records of the spec tests' README (tests/README.md, "Test Setup"). */
const L = 'localhost.test.build.10gen.cc';
const srv = (name: string, ...answers: [string, number][]): [string, { target: string; port: number }[]] => [
  `_mongodb._tcp.${name}.test.build.10gen.cc`,
  answers.map(([target, port]) => ({ target, port })),
];
const SPEC_ZONE: Zone = {
  srv: Object.fromEntries([
    srv('test1', [L, 27017], [L, 27018]),
    srv('test2', [L, 27018], [L, 27019]),
    srv('test3', [L, 27017]),
    srv('test5', [L, 27017]),
    srv('test6', [L, 27017]),
    srv('test7', [L, 27017]),
    srv('test8', [L, 27017]),
    srv('test10', [L, 27017]),
    srv('test11', [L, 27017]),
    srv('test12', ['localhost.build.10gen.cc', 27017]),
    srv('test13', ['test.build.10gen.cc', 27017]),
    srv('test14', ['localhost.not-test.build.10gen.cc', 27017]),
    srv('test15', ['localhost.test.not-build.10gen.cc', 27017]),
    srv('test16', ['localhost.test.build.not-10gen.cc', 27017]),
    srv('test17', ['localhost.test.build.10gen.not-cc', 27017]),
    srv('test18', ['localhost.sub.test.build.10gen.cc', 27017]),
    srv('test19', ['localhost.evil.build.10gen.cc', 27017], [L, 27017]),
    srv('test20', [L, 27017]),
    srv('test21', [L, 27017]),
    // The README lists one record here, but the test (srv-service-name) expects the seeds 27017 and 27018: the test zone
    // has both.
    ['_customname._tcp.test22.test.build.10gen.cc', [{ target: L, port: 27017 }, { target: L, port: 27018 }]],
    srv('test23', [L, 8000]),
    srv('test24', [L, 8000]),
  ]),
  txt: {
    'test5.test.build.10gen.cc': [['replicaSet=repl0&authSource=thisDB']],
    'test6.test.build.10gen.cc': [['replicaSet=repl0'], ['authSource=otherDB']],
    'test7.test.build.10gen.cc': [['ssl=false']],
    'test8.test.build.10gen.cc': [['authSource']],
    'test10.test.build.10gen.cc': [['socketTimeoutMS=500']],
    'test11.test.build.10gen.cc': [['replicaS', 'et=rep', 'l0']],
    'test20.test.build.10gen.cc': [['loadBalanced=true']],
    'test21.test.build.10gen.cc': [['loadBalanced=false']],
    'test24.test.build.10gen.cc': [['loadBalanced=true']],
  },
};

/** Why each failing case fails: the error's message (a refusal before DNS: InvalidOptionError; after: SrvResolutionError). */
const EXPECTED_ERRORS: Record<string, RegExp> = {
  'replica-set/direct-connection-true.json': /^Invalid directConnection: true \(directConnection must be false \(or absent\) with several hosts or a mongodb\+srv URI\)$/,
  'replica-set/misformatted-option.json': /the TXT record of test8\.test\.build\.10gen\.cc holds an option that is not key=value$/,
  'replica-set/no-results.json': /the DNS query of SRV _mongodb\._tcp\.test4\.test\.build\.10gen\.cc failed: ENOTFOUND/,
  'replica-set/not-enough-parts.json': /the DNS query of SRV _mongodb\._tcp\.10gen\.cc failed: ENOTFOUND/,
  'replica-set/parent-part-mismatch1.json': /the SRV target localhost\.not-test\.build\.10gen\.cc is not in the domain of test14\.test\.build\.10gen\.cc$/,
  'replica-set/parent-part-mismatch2.json': /the SRV target localhost\.test\.not-build\.10gen\.cc is not in the domain/,
  'replica-set/parent-part-mismatch3.json': /the SRV target localhost\.test\.build\.not-10gen\.cc is not in the domain/,
  'replica-set/parent-part-mismatch4.json': /the SRV target localhost\.test\.build\.10gen\.not-cc is not in the domain/,
  'replica-set/parent-part-mismatch5.json': /the SRV target localhost\.evil\.build\.10gen\.cc is not in the domain/,
  'replica-set/returned-parent-too-short.json': /the SRV target test\.build\.10gen\.cc is not in the domain/,
  'replica-set/returned-parent-wrong.json': /the SRV target localhost\.build\.10gen\.cc is not in the domain/,
  'replica-set/srvMaxHosts-conflicts_with_replicaSet-txt.json': /cannot be used: Invalid srvMaxHosts: 1 \(srvMaxHosts must be 0 \(or absent\) with replicaSet\)$/,
  'replica-set/srvMaxHosts-conflicts_with_replicaSet.json': /^Invalid srvMaxHosts: 1 \(srvMaxHosts must be 0 \(or absent\) with replicaSet\)$/,
  'replica-set/two-txt-records.json': /test6\.test\.build\.10gen\.cc has 2 TXT records; at most one is allowed$/,
  'replica-set/txt-record-not-allowed-option.json': /gives socketTimeoutMS, but a TXT record may give only authSource, replicaSet and loadBalanced$/,
  'replica-set/txt-record-with-unallowed-option.json': /gives ssl, but a TXT record may give only authSource, replicaSet and loadBalanced$/,
  'replica-set/uri-with-port.json': /mongodb\+srv URI cannot have port number/,
  'replica-set/uri-with-two-hosts.json': /mongodb\+srv URI cannot have multiple service names/,
  'load-balanced/loadBalanced-no-results.json': /the DNS query of SRV _mongodb\._tcp\.test4\.test\.build\.10gen\.cc failed: ENOTFOUND/,
  'load-balanced/loadBalanced-replicaSet-errors.json': /cannot be used: Invalid loadBalanced: true \(loadBalanced must be false \(or absent\) with replicaSet\)$/,
  'load-balanced/loadBalanced-true-multiple-hosts.json': /cannot be used: Invalid loadBalanced: true \(loadBalanced must be false \(or absent\) with several hosts\)$/,
  'load-balanced/srvMaxHosts-conflicts_with_loadBalanced-true-txt.json': /cannot be used: Invalid srvMaxHosts: 1 \(srvMaxHosts must be 0 \(or absent\) with loadBalanced=true\)$/,
  'load-balanced/srvMaxHosts-conflicts_with_loadBalanced-true.json': /^Invalid srvMaxHosts: 1 \(srvMaxHosts must be 0 \(or absent\) with loadBalanced=true\)$/,
};

interface SpecCase {
  uri: string;
  seeds?: string[];
  numSeeds?: number;
  hosts?: string[];
  numHosts?: number;
  options?: Record<string, unknown>;
  parsed_options?: Record<string, unknown>;
  error?: boolean;
  ping?: boolean;
  comment?: string;
}

/** The hosts of `client` once its seedlist is discovered (its discovery's error otherwise). */
async function discovered(client: Client): Promise<readonly string[]> {
  await client['discover']();
  return client.hosts;
}

describe('mongodb+srv:// (initial DNS seedlist discovery)', function () {
  let responder: DnsResponder;
  let servers: string[];
  const clients: Client[] = [];
  // The hosts found are the spec's names, which no test reaches: unless a test gives its own proxy, the client's
  // connections go to a SOCKS5 proxy port nothing listens on, so they fail at once and never ask the system resolver
  // (getaddrinfo, on libuv's thread pool, where a slow answer for those names held the lookups of later tests).
  let refusingPort: number;
  const open = (uri: string, options?: Parameters<typeof connect>[1]): Client => {
    const ownProxy = /[?&]proxyHost=/i.test(uri) || options?.proxyHost !== undefined;
    const noLookup = ownProxy ? {} : { proxyHost: '127.0.0.1', proxyPort: refusingPort };
    const client = connect(uri, { heartbeatFrequencyMS: 60_000, ...noLookup, ...options });
    clients.push(client);
    return client;
  };

  before(async function () {
    const closed = net.createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => closed.once('listening', resolve));
    refusingPort = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    servers = dns.getServers();
    responder = await new DnsResponder(SPEC_ZONE).start();
    dns.setServers([responder.server]);
  });
  afterEach(async function () {
    responder.setZone(SPEC_ZONE);
    responder.delayMS = 0;
    responder.silent = false;
    await Promise.all(clients.splice(0).map((c) => c.close()));
    responder.questions.length = 0;
  });
  after(async function () {
    dns.setServers(servers);
    await responder.close();
  });

  describe('prose tests: the parent domain of the SRV targets', function () {
    it('1. allows SRV host names of fewer than three parts', function () {
      for (const uri of ['mongodb+srv://localhost', 'mongodb+srv://mongo.local']) expect(() => open(uri), uri).to.not.throw();
    });

    it('2. refuses a target that does not end with the SRV domain', function () {
      expect(matchesParentDomain('localhost.mongodb', 'localhost')).to.equal(false);
      expect(matchesParentDomain('test_1.evil.local', 'mongo.local')).to.equal(false);
      expect(matchesParentDomain('blogs.evil.com', 'blogs.mongodb.com')).to.equal(false);
    });

    it('3. refuses a target identical to an SRV host name of fewer than three parts', function () {
      expect(matchesParentDomain('localhost', 'localhost')).to.equal(false);
      expect(matchesParentDomain('mongo.local', 'mongo.local')).to.equal(false);
      expect(matchesParentDomain('MONGO.LOCAL.', 'mongo.local')).to.equal(false);
    });

    it('4. refuses a target sharing the domain without the "." before it', function () {
      expect(matchesParentDomain('test_1.cluster_1localhost', 'localhost')).to.equal(false);
      expect(matchesParentDomain('test_1.my_hostmongo.local', 'mongo.local')).to.equal(false);
      expect(matchesParentDomain('cluster.testmongodb.com', 'blogs.mongodb.com')).to.equal(false);
    });

    it('accepts targets one level or more below the domain, any case, with or without the trailing dot', function () {
      expect(matchesParentDomain('a.localhost', 'localhost')).to.equal(true);
      expect(matchesParentDomain('a.b.mongo.local', 'mongo.local')).to.equal(true);
      expect(matchesParentDomain('shard-00.mongodb.com', 'blogs.mongodb.com')).to.equal(true);
      expect(matchesParentDomain('SHARD-00.MongoDB.com.', 'Blogs.mongodb.COM')).to.equal(true);
      // {domainname} of a name of three or more parts is all but its left-most part: a sibling of the host is in it.
      expect(matchesParentDomain('localhost.test.build.10gen.cc', 'test1.test.build.10gen.cc')).to.equal(true);
      expect(matchesParentDomain('test.build.10gen.cc', 'test1.test.build.10gen.cc')).to.equal(false);
      expect(matchesParentDomain('.mongodb.com', 'blogs.mongodb.com')).to.equal(false);
    });

    it('refuses such a target through the client too, naming it, and opens no pool', async function () {
      responder.setZone({ srv: { '_mongodb._tcp.mongo.local': [{ target: 'test_1.evil.local', port: 27017 }] } });
      const client = open('mongodb+srv://mongo.local');
      const error = await discovered(client).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(SrvResolutionError);
      expect((error as Error).message).to.equal('The hosts of mongodb+srv://mongo.local could not be found: the SRV target test_1.evil.local is not in the domain of mongo.local');
      expect(client.pools.size).to.equal(0);
    });
    it('refuses a target that is no host name (a comma, a slash, a space...) or has port 0, rather than reading more hosts out of it', async function () {
      // Read as a connection string's hosts, "localhost,a.test.build.10gen.cc" would be two hosts, the first one outside the domain.
      for (const [target, port] of [['localhost,a.test.build.10gen.cc', 27017], ['evil.example:1,a.test.build.10gen.cc', 27017], ['a/b?c=d.test.build.10gen.cc', 27017], ['sp ace.test.build.10gen.cc', 27017], ['a.test.build.10gen.cc', 0]] as const) {
        responder.setZone({ srv: { '_mongodb._tcp.test1.test.build.10gen.cc': [{ target, port }, { target: 'b.test.build.10gen.cc', port: 27017 }] } });
        const client = open('mongodb+srv://test1.test.build.10gen.cc/');
        const error = await discovered(client).catch((e: unknown) => e);
        expect(error, `${target}:${port}`).to.be.instanceOf(SrvResolutionError);
        expect((error as Error).message).to.equal(`The hosts of mongodb+srv://test1.test.build.10gen.cc could not be found: the SRV target ${target} (port ${port}) is not a host name and port a client can connect to`);
        expect(client.pools.size).to.equal(0);
      }
    });

    it('accepts the targets of an internationalized host name, which DNS gives in their A-label (xn--) form', async function () {
      expect(matchesParentDomain('a.xn--bcher-kva.example', 'c0.bücher.example')).to.equal(true);
      expect(matchesParentDomain('A.XN--BCHER-KVA.example.', 'C0.Bücher.example')).to.equal(true);
      expect(matchesParentDomain('a.bücher.example', 'c0.xn--bcher-kva.example')).to.equal(true);
      expect(matchesParentDomain('a.xn--bcher-kva.example', 'c0.bucher.example')).to.equal(false);
      // The resolver asks for the A-label form of the host name; the target it answers with is in its domain.
      responder.setZone({ srv: { '_mongodb._tcp.c0.xn--bcher-kva.example': [{ target: 'a.xn--bcher-kva.example', port: 27017 }] } });
      expect(await discovered(open('mongodb+srv://c0.bücher.example/'))).to.deep.equal(['a.xn--bcher-kva.example:27017']);
    });
  });

  describe('the spec test cases, through a local DNS responder', function () {
    const files = ['replica-set', 'load-balanced', 'sharded'].flatMap((dir) => fs.readdirSync(path.join(fixtures, dir)).map((f) => `${dir}/${f}`));
    for (const file of files) {
      const test: SpecCase = JSON.parse(fs.readFileSync(path.join(fixtures, file), 'utf8'));
      it(`${file}${test.comment === undefined ? '' : `: ${test.comment}`}`, async function () {
        let client: Client;
        try {
          client = open(test.uri);
        } catch (error) {
          // Refused before any DNS question (a port, two hosts, directConnection=true, srvMaxHosts with replicaSet).
          expect(test.error, (error as Error).message).to.equal(true);
          expect(error).to.be.instanceOf(InvalidOptionError);
          expect((error as Error).message).to.match(EXPECTED_ERRORS[file]);
          expect(responder.questions, 'no DNS question').to.deep.equal([]);
          return;
        }
        const result = await discovered(client).catch((e: unknown) => e);
        if (test.error === true) {
          expect(result).to.be.instanceOf(SrvResolutionError);
          expect((result as Error).message).to.match(EXPECTED_ERRORS[file]);
          expect(client.pools.size, 'no pool').to.equal(0);
          return;
        }
        if (result instanceof Error) throw result;
        const hosts = result as readonly string[];
        if (test.seeds !== undefined && test.numSeeds === undefined) expect([...hosts].sort()).to.deep.equal([...test.seeds].sort());
        if (test.numSeeds !== undefined) {
          expect(hosts).to.have.length(test.numSeeds);
          expect(new Set(hosts).size).to.equal(test.numSeeds);
          for (const host of hosts) expect(['localhost.test.build.10gen.cc:27017', 'localhost.test.build.10gen.cc:27018']).to.include(host);
        }
        // rxcmap does no topology discovery: its servers are its seeds. Load-balanced: no monitor.
        expect([...client.pools.keys()]).to.deep.equal(hosts);
        const settings = connectedSettings(client)!;
        for (const [option, value] of Object.entries(test.options ?? {})) {
          switch (option) {
            case 'ssl':
              expect(settings.connectionOptions.tls, option).to.equal(value);
              break;
            case 'loadBalanced':
              expect(settings.loadBalanced, option).to.equal(value);
              expect(client.monitors.size, 'monitors').to.equal(value === true ? 0 : hosts.length);
              break;
            case 'replicaSet':
              expect(settings.replicaSet, option).to.equal(value);
              break;
            case 'srvMaxHosts':
              expect(settings.srvMaxHosts, option).to.equal(value);
              break;
            case 'srvServiceName':
              expect(settings.srvServiceName, option).to.equal(value);
              break;
            case 'directConnection':
              expect(value, option).to.equal(false);
              break;
            case 'authSource': {
              // Without credentials an authSource applies to nothing (ignored with a warning); with them, it is
              // their source.
              expect(client.warnings).to.include('authSource is ignored: the URI has no credentials');
              const withCredentials = open(test.uri.replace('mongodb+srv://', 'mongodb+srv://u:p@'));
              await discovered(withCredentials);
              expect(connectedSettings(withCredentials)!.connectionOptions.credentials?.source, option).to.equal(value);
              break;
            }
            default:
              expect.fail(`option ${option} is not checked`);
          }
        }
        for (const [option, value] of Object.entries(test.parsed_options ?? {})) {
          const credentials = settings.connectionOptions.credentials as MongoCredentials | undefined;
          if (option === 'user') expect(credentials?.username).to.equal(value);
          else if (option === 'password') expect(credentials?.password).to.equal(value);
          else if (option === 'db' || option === 'auth_database') expect(credentials?.source ?? client.redactedUri).to.include(value as string);
          else if (option === 'defaultDatabase') expect(decodeURIComponent(new URL(client.redactedUri.replace('mongodb+srv', 'http')).pathname.slice(1))).to.equal(value);
          else expect.fail(`parsed option ${option} is not checked`);
        }
      });
    }
  });

  describe('a client of a mongodb+srv URI', function () {
    let server: EmbeddedServer;
    let proxy: Socks5Proxy;
    /** Where the proxy sent each connection, by the host:port it was asked for. */
    const asked: string[] = [];
    const ca = encodeURIComponent(path.join(tlsFixtures, 'ca.pem'));

    before(async function () {
      const key = fs.readFileSync(path.join(tlsFixtures, 'server.key'));
      const cert = fs.readFileSync(path.join(tlsFixtures, 'server.crt'));
      // The primary of the replica set the TXT records name (repl0): a client of test5 selects only a primary of it.
      // The set's configuration names it as the SRV record does (as a cloud deployment's does).
      const replicaSetMember = { setName: 'repl0', state: 'primary', hosts: ['localhost.test.build.10gen.cc:27017'] } as const;
      server = await new EmbeddedServer({ tls: { key, cert }, users: [{ username: 'alice', password: 's3cret', db: 'thisDB' }], replicaSetMember: { ...replicaSetMember, hosts: [...replicaSetMember.hosts] } }).start();
      const port = Number(server.address.split(':')[1]);
      // The SRV targets (localhost.test.build.10gen.cc) do not resolve here: the proxy sends them to the server.
      proxy = await startSocks5Proxy({
        map: (host, p) => {
          asked.push(`${host}:${p}`);
          return { host: '127.0.0.1', port };
        },
      });
    });
    after(async function () {
      await proxy.close();
      await server.stop();
    });
    const via = (): string => `proxyHost=127.0.0.1&proxyPort=${proxy.port}&tlsCAFile=${ca}&tlsAllowInvalidHostnames=true`;

    it('with a replicaSet its members are not of, every host is removed and a command fails at once: no SRV polling can list another', async function () {
      const client = open(`mongodb+srv://test5.test.build.10gen.cc/?${via()}&replicaSet=other&serverSelectionTimeoutMS=60000&heartbeatFrequencyMS=500`);
      const error = (await client.command('admin', { ping: 1 }).catch((e: unknown) => e)) as ServerSelectionError;
      expect(error).to.be.instanceOf(ServerSelectionError);
      expect(error.message).to.equal('No suitable server: the topology has no server left (read preference primary)');
      expect(client.hosts).to.deep.equal([]);
    });

    it('runs a command on the hosts the SRV records gave, over TLS by default, with the TXT record\'s options', async function () {
      asked.length = 0;
      const client = open(`mongodb+srv://test5.test.build.10gen.cc/?${via()}`);
      expect(client.hosts).to.deep.equal([]);
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(client.hosts).to.deep.equal(['localhost.test.build.10gen.cc:27017']);
      expect(asked).to.include('localhost.test.build.10gen.cc:27017');
      expect(connectedSettings(client)).to.include({ replicaSet: 'repl0', loadBalanced: false });
      expect(connectedSettings(client)!.connectionOptions.tls).to.equal(true);
      // The TXT record's authSource is ignored with a warning, as in a URI without credentials; its replicaSet is taken.
      expect(client.warnings).to.deep.equal(['authSource is ignored: the URI has no credentials']);
      expect(responder.questions).to.deep.equal(['SRV _mongodb._tcp.test5.test.build.10gen.cc', 'TXT test5.test.build.10gen.cc']);
    });

    it('authenticates on the TXT record\'s authSource, and on the URI\'s or the credentials option\'s source over it', async function () {
      const ok = open(`mongodb+srv://alice:s3cret@test5.test.build.10gen.cc/?${via()}`);
      expect(await ok.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(connectedSettings(ok)!.connectionOptions.credentials?.source).to.equal('thisDB');
      const uri = open(`mongodb+srv://alice:s3cret@test5.test.build.10gen.cc/?authSource=otherDB&${via()}`);
      await discovered(uri);
      expect(connectedSettings(uri)!.connectionOptions.credentials?.source).to.equal('otherDB');
      const option = open(`mongodb+srv://test5.test.build.10gen.cc/?${via()}`, { credentials: new MongoCredentials({ username: 'alice', password: 's3cret', source: 'admin' }) });
      await discovered(option);
      expect(connectedSettings(option)!.connectionOptions.credentials?.source).to.equal('admin');
    });

    it('leaves the TXT record\'s authSource to credentials whose source is $external (MONGODB-X509), as the URI\'s own is not', async function () {
      const certificate = encodeURIComponent(path.join(tlsFixtures, 'client.pem'));
      const client = open(`mongodb+srv://test5.test.build.10gen.cc/?authMechanism=MONGODB-X509&tlsCertificateKeyFile=${certificate}`);
      await discovered(client);
      expect(connectedSettings(client)!.connectionOptions.credentials).to.include({ mechanism: 'MONGODB-X509', source: '$external' });
      expect(connectedSettings(client)!.replicaSet).to.equal('repl0');
      const option = open('mongodb+srv://test5.test.build.10gen.cc/', { credentials: { mechanism: 'MONGODB-X509' }, tlsCertificateKeyFile: path.join(tlsFixtures, 'client.pem') });
      await discovered(option);
      expect(connectedSettings(option)!.connectionOptions.credentials).to.include({ mechanism: 'MONGODB-X509', source: '$external' });
      // A URI's own authSource other than $external stays an error.
      expect(() => open(`mongodb+srv://test5.test.build.10gen.cc/?authMechanism=MONGODB-X509&authSource=thisDB`)).to.throw(InvalidOptionError, /\$external/);
    });

    it('leaves the TXT record\'s authSource to MONGODB-AWS and MONGODB-OIDC credentials too, whose source is $external', async function () {
      for (const query of ['authMechanism=MONGODB-AWS', 'authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test']) {
        const client = open(`mongodb+srv://test5.test.build.10gen.cc/?${query}`);
        await discovered(client);
        expect(connectedSettings(client)?.connectionOptions.credentials?.source, query).to.equal('$external');
        expect(connectedSettings(client)!.replicaSet).to.equal('repl0');
      }
    });

    it('turns TLS off only with tls=false in the URI or the options, never through the TXT record', async function () {
      const uri = open('mongodb+srv://test1.test.build.10gen.cc/?tls=false');
      await discovered(uri);
      expect(connectedSettings(uri)!.connectionOptions.tls).to.equal(false);
      const option = open('mongodb+srv://test1.test.build.10gen.cc/', { tls: false });
      await discovered(option);
      expect(connectedSettings(option)!.connectionOptions.tls).to.equal(false);
      const ssl = open('mongodb+srv://test1.test.build.10gen.cc/?ssl=false');
      await discovered(ssl);
      expect(connectedSettings(ssl)!.connectionOptions.tls).to.equal(false);
      expect(await discovered(open('mongodb+srv://test7.test.build.10gen.cc/')).catch((e: unknown) => e)).to.be.instanceOf(SrvResolutionError);
    });

    it('lets the options object override the TXT record\'s loadBalanced, and checks it against the hosts found', async function () {
      const off = open('mongodb+srv://test24.test.build.10gen.cc/', { loadBalanced: false });
      await discovered(off);
      expect(connectedSettings(off)!.loadBalanced).to.equal(false);
      expect(off.monitors.size).to.equal(1);
      const two = open('mongodb+srv://test1.test.build.10gen.cc/', { loadBalanced: true });
      const error = await discovered(two).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(SrvResolutionError).with.property('cause').that.is.instanceOf(InvalidOptionError);
      expect(() => open('mongodb+srv://test1.test.build.10gen.cc/', { directConnection: true })).to.throw(InvalidOptionError, /mongodb\+srv URI/);
      expect(() => open('mongodb+srv://test1.test.build.10gen.cc/?srvMaxHosts=1', { loadBalanced: true })).to.throw(InvalidOptionError, 'srvMaxHosts must be 0 (or absent) with loadBalanced=true');
    });

    it('fails a command with SrvResolutionError naming the host, never the password, and resolves again for the next one', async function () {
      const client = open('mongodb+srv://alice:s3cret@test4.test.build.10gen.cc/', { serverSelectionTimeoutMS: 300 });
      const error = await client.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(SrvResolutionError).with.property('hostname', 'test4.test.build.10gen.cc');
      expect((error as Error).message).to.equal('The hosts of mongodb+srv://test4.test.build.10gen.cc could not be found: the DNS query of SRV _mongodb._tcp.test4.test.build.10gen.cc failed: ENOTFOUND (querySrv ENOTFOUND _mongodb._tcp.test4.test.build.10gen.cc)');
      expect(JSON.stringify(error)).to.not.include('s3cret');
      const asked = responder.questions.filter((q) => q.startsWith('SRV')).length;
      // The record appears: the next command finds it.
      responder.setZone({ ...SPEC_ZONE, srv: { ...SPEC_ZONE.srv, '_mongodb._tcp.test4.test.build.10gen.cc': [{ target: L, port: 27017 }] } });
      expect(await discovered(client)).to.deep.equal(['localhost.test.build.10gen.cc:27017']);
      expect(responder.questions.filter((q) => q.startsWith('SRV')).length).to.equal(asked + 1);
      // Once found, never asked again.
      await discovered(client);
      await client.selectPool().catch(() => undefined);
      expect(responder.questions.filter((q) => q.startsWith('SRV')).length).to.equal(asked + 1);
    });

    it('fails for an SRV name that exists with no SRV record (an empty answer: ENODATA)', async function () {
      // The name exists (NOERROR) with no SRV record in the answer.
      responder.setZone({ srv: { '_mongodb._tcp.nosrv.test.build.10gen.cc': [] }, txt: { 'nosrv.test.build.10gen.cc': [['replicaSet=r']] } });
      const error = await discovered(open('mongodb+srv://nosrv.test.build.10gen.cc/')).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(SrvResolutionError);
      expect((error as Error).message).to.match(/the DNS query of SRV _mongodb\._tcp\.nosrv\.test\.build\.10gen\.cc failed: ENODATA/);
    });

    it('names --allow-net when Node\'s permission model refuses the SRV query (Node.js 25+ without it: the query\'s own message names no flag)', async function () {
      // What Node.js 26 rejects a query with under --permission without --allow-net: no `permission`, a bare message.
      const resolveSrv = dns.promises.Resolver.prototype.resolveSrv;
      dns.promises.Resolver.prototype.resolveSrv = function (name: string) {
        return Promise.reject(Object.assign(new Error(`querySrv ERR_ACCESS_DENIED ${name}`), { code: 'ERR_ACCESS_DENIED' }));
      };
      try {
        const error = await discoverSeedlist('test1.test.build.10gen.cc').catch((e: unknown) => e);
        expect(error).to.be.instanceOf(SrvResolutionError);
        expect((error as Error).message).to.equal(
          "The hosts of mongodb+srv://test1.test.build.10gen.cc could not be found: the DNS query of SRV _mongodb._tcp.test1.test.build.10gen.cc failed: ERR_ACCESS_DENIED (querySrv ERR_ACCESS_DENIED _mongodb._tcp.test1.test.build.10gen.cc): Node's permission model does not allow this process the network (run it with --allow-net)",
        );
      } finally {
        dns.promises.Resolver.prototype.resolveSrv = resolveSrv;
      }
    });

    it('makes commands wait for the DNS answers, and fails them with ServerSelectionError when their wait ends first', async function () {
      // The answers come 1 s late: a command that waited for them would end then, not at its 100 ms; 900 ms leaves a
      // loaded machine's pauses room.
      responder.delayMS = 1000;
      const slow = open('mongodb+srv://test3.test.build.10gen.cc/', { serverSelectionTimeoutMS: 100 });
      const started = Date.now();
      const error = await slow.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(Date.now() - started).to.be.within(90, 900);
      expect(error).to.be.instanceOf(ServerSelectionError);
      expect((error as Error).message).to.equal('No suitable server of test3.test.build.10gen.cc (read preference primary) within serverSelectionTimeoutMS=100 ms; last check failed with: The hosts of mongodb+srv://test3.test.build.10gen.cc could not be found: the DNS queries are still in progress');
      // The discovery goes on: the hosts are there once it answers.
      expect(await discovered(slow)).to.deep.equal(['localhost.test.build.10gen.cc:27017']);
    });

    it('a command whose signal aborts while it waits for the DNS answers fails at once with CommandCancelledError, listening no more', async function () {
      responder.delayMS = 1500;
      const asked = responder.questions.length;
      const slow = open('mongodb+srv://test3.test.build.10gen.cc/', { serverSelectionTimeoutMS: 5000 });
      const controller = new AbortController();
      const settled = slow.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e);
      // The command waits for the DNS answers: the questions have reached the responder, which holds the answers back.
      expect(await eventually(() => responder.questions.length >= asked + 2), 'SRV and TXT questions asked').to.equal(true);
      expect(getEventListeners(controller.signal, 'abort').length, 'listeners while it waits').to.equal(1);
      const abortedAt = Date.now();
      controller.abort();
      const error = await settled;
      expect(Date.now() - abortedAt, 'ms from the abort to the rejection (the DNS answers come at 1.5 s)').to.be.below(1000);
      expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ address: undefined, sent: false, cause: controller.signal.reason });
      expect((error as Error).message).to.equal('Command ping was cancelled before a server was selected');
      expect(getEventListeners(controller.signal, 'abort').length, 'listeners once it settled').to.equal(0);
      expect(await discovered(slow)).to.deep.equal(['localhost.test.build.10gen.cc:27017']);
    });

    it('gives up the DNS queries at connectTimeoutMS', async function () {
      responder.silent = true;
      const client = open('mongodb+srv://test3.test.build.10gen.cc/?connectTimeoutMS=200');
      const started = Date.now();
      const error = await discovered(client).catch((e: unknown) => e);
      expect(Date.now() - started).to.be.within(180, 1500);
      expect(error).to.be.instanceOf(SrvResolutionError);
      expect((error as Error).message).to.match(/did not answer within 200 ms$/);
    });

    it('connectTimeoutMS=0 sets no deadline of its own: answers 100 ms late are taken', async function () {
      responder.delayMS = 100;
      const client = open('mongodb+srv://test3.test.build.10gen.cc/?connectTimeoutMS=0');
      expect(await discovered(client)).to.deep.equal(['localhost.test.build.10gen.cc:27017']);
    });

    it('a target the SRV answer lists twice (in any case, with or without the trailing dot) is one host', async function () {
      const L = 'localhost.test.build.10gen.cc';
      responder.setZone({
        srv: { '_mongodb._tcp.test1.test.build.10gen.cc': [{ target: L, port: 27017 }, { target: `${L.toUpperCase()}.`, port: 27017 }, { target: L, port: 27018 }] },
      });
      expect([...(await discovered(open('mongodb+srv://test1.test.build.10gen.cc/')))].sort()).to.deep.equal([`${L}:27017`, `${L}:27018`]);
      // srvMaxHosts picks among hosts, not records: 2 of them are always 2 hosts (a pick of both copies would be 1).
      for (let i = 0; i < 30; i++) {
        const { hosts } = await discoverSeedlist('test1.test.build.10gen.cc', { srvMaxHosts: 2 });
        expect([...hosts].sort()).to.deep.equal([`${L}:27017`, `${L}:27018`]);
      }
    });

    it('close() during the DNS queries cancels them: waiting commands fail with ClientClosedError at once, nothing is opened', async function () {
      responder.silent = true;
      const asked = responder.questions.length;
      const client = open('mongodb+srv://test3.test.build.10gen.cc/');
      const events: string[] = [];
      const sub = client.events$.subscribe({ next: (e) => events.push(e.type), complete: () => events.push('complete') });
      const command = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
      const pool = client.selectPool().catch((e: unknown) => e);
      // The DNS queries are in progress: their questions reached the responder, which never answers.
      expect(await eventually(() => responder.questions.length >= asked + 2), 'SRV and TXT questions asked').to.equal(true);
      const started = Date.now();
      await client.close();
      const [a, b] = await Promise.all([command, pool]);
      // Not cancelled, they would wait for the DNS deadline (connectTimeoutMS, 10 s) or serverSelectionTimeoutMS
      // (30 s).
      expect(Date.now() - started).to.be.below(2000);
      for (const e of [a, b]) {
        expect(e).to.be.instanceOf(ClientClosedError);
        expect((e as Error).message).to.equal('The client of test3.test.build.10gen.cc was closed');
      }
      expect(client.pools.size).to.equal(0);
      expect(client.hosts).to.deep.equal([]);
      expect(events).to.deep.equal(['complete']);
      sub.unsubscribe();
      expect(await client.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(ClientClosedError);
    });

    it('close() after the answers but before they are used opens nothing', async function () {
      responder.delayMS = 50;
      const client = open('mongodb+srv://test3.test.build.10gen.cc/');
      const discovery = discovered(client).catch((e: unknown) => e);
      await client.close();
      expect(await discovery).to.be.instanceOf(ClientClosedError);
      // The discovery that was in progress has ended (a failed one is not kept; one that took the answers, 50 ms on,
      // would be): nothing more can come of it.
      expect(await eventually(() => client['srv']?.discovery === undefined), 'the discovery in progress at close() ended').to.equal(true);
      expect(client.pools.size).to.equal(0);
    });

    it('publishes the events of the pools and monitors opened after the discovery to a subscriber that came before', async function () {
      const client = open('mongodb+srv://test24.test.build.10gen.cc/');
      const events: string[] = [];
      client.events$.subscribe((e) => events.push(`${e.type} ${e.address}`));
      const logs: string[] = [];
      client.log$.subscribe((m) => logs.push(String(m.fields.message)));
      await discovered(client);
      expect(events).to.deep.equal(['ConnectionPoolCreated localhost.test.build.10gen.cc:8000', 'ConnectionPoolReady localhost.test.build.10gen.cc:8000']);
    });

    it('logs the warnings the TXT record adds as the client component\'s warn messages', async function () {
      const messages: string[] = [];
      const client = open('mongodb+srv://test5.test.build.10gen.cc/', { logging: { componentSeverities: { client: 'warn' }, path: { write: (m: { fields: { message?: unknown } }) => void messages.push(String(m.fields.message)) } } as never });
      const logged: string[] = [];
      client.log$.subscribe((m) => logged.push(String(m.fields.message)));
      await discovered(client);
      expect(client.warnings).to.deep.equal(['authSource is ignored: the URI has no credentials']);
      expect(logged).to.deep.equal(['authSource is ignored: the URI has no credentials']);
      expect(messages).to.deep.equal(['authSource is ignored: the URI has no credentials']);
    });

    it('gives the warnings the TXT record adds to a log$ subscriber that comes after the discovery, as it gives the URI\'s', async function () {
      const logging = { componentSeverities: { client: 'warn' }, path: { write: () => undefined } } as never;
      const client = open('mongodb+srv://test5.test.build.10gen.cc/?foo=1', { logging });
      await discovered(client);
      const logged: string[] = [];
      client.log$.subscribe((m) => logged.push(String(m.fields.message)));
      expect(client.warnings).to.have.length(2);
      expect(logged).to.deep.equal(client.warnings);
    });

    it('picks srvMaxHosts hosts at random among the SRV records', async function () {
      const targets = [27017, 27018, 27019, 27020, 27021].map((port) => ({ target: L, port }));
      responder.setZone({ srv: { '_mongodb._tcp.test1.test.build.10gen.cc': targets } });
      const seen = new Map<string, number>();
      for (let i = 0; i < 40; i++) {
        const client = open('mongodb+srv://test1.test.build.10gen.cc/?srvMaxHosts=2');
        const hosts = await discovered(client);
        expect(new Set(hosts).size).to.equal(2);
        for (const host of hosts) seen.set(host, (seen.get(host) ?? 0) + 1);
        await client.close();
      }
      // 80 picks among 5: each about 16 times; none missing (chance of one missing: 5 * (3/5)^40, about 7e-9).
      expect(seen.size).to.equal(5);
      for (const count of seen.values()) expect(count).to.be.within(4, 35);
    });

    it('queries the service name srvServiceName gives', async function () {
      const client = open('mongodb+srv://test22.test.build.10gen.cc/?srvServiceName=customname');
      await discovered(client);
      expect(responder.questions).to.include('SRV _customname._tcp.test22.test.build.10gen.cc');
    });
  });

  describe('its parts', function () {
    it('the DNS responder: closing it with answers held back (delayMS) drops them, without an uncaught error', async function () {
      const own = await new DnsResponder(SPEC_ZONE).start();
      own.delayMS = 50;
      const resolver = new dns.promises.Resolver({ timeout: 100, tries: 1 });
      resolver.setServers([own.server]);
      const asked = resolver.resolveSrv('_mongodb._tcp.test1.test.build.10gen.cc').catch((e: { code?: string }) => e.code);
      expect(await eventually(() => own.questions.length === 1), 'the question reached it, its answer held back').to.equal(true);
      await own.close();
      expect(await asked).to.equal('ETIMEOUT');
      // The answer held back was due 50 ms after the question, before the resolver's 100 ms timeout ended `asked`:
      // sent on the closed socket, it would have thrown by now.
    });

    it('SrvResolutionError: its name, host name and reason, in its message and JSON form', function () {
      const error = new SrvResolutionError('cluster0.example.net', 'no SRV record for _mongodb._tcp.cluster0.example.net');
      expect(error.name).to.equal('SrvResolutionError');
      expect(error.message).to.equal('The hosts of mongodb+srv://cluster0.example.net could not be found: no SRV record for _mongodb._tcp.cluster0.example.net');
      expect(JSON.parse(JSON.stringify(error))).to.include({ name: 'SrvResolutionError', hostname: 'cluster0.example.net', reason: 'no SRV record for _mongodb._tcp.cluster0.example.net' });
    });

    it('parseTxtOptions: only authSource, replicaSet and loadBalanced, any case, each key=value, percent-decoded', function () {
      expect(parseTxtOptions('h', 'replicaSet=repl0&AUTHSOURCE=a%2Fb&loadbalanced=true')).to.deep.equal([['replicaSet', 'repl0'], ['AUTHSOURCE', 'a/b'], ['loadbalanced', 'true']]);
      expect(parseTxtOptions('h', '')).to.deep.equal([]);
      expect(() => parseTxtOptions('h', 'authSource')).to.throw(SrvResolutionError, 'not key=value');
      expect(() => parseTxtOptions('h', '=x')).to.throw(SrvResolutionError, 'not key=value');
      expect(() => parseTxtOptions('h', 'replicaSet=')).to.throw(SrvResolutionError, 'the TXT record of h gives replicaSet no value');
      expect(() => parseTxtOptions('h', 'authSource=&replicaSet=r')).to.throw(SrvResolutionError, 'gives authSource no value');
      expect(() => parseTxtOptions('h', 'tls=false')).to.throw(SrvResolutionError, 'gives tls,');
      expect(() => parseTxtOptions('h', 'authSource=%zz')).to.throw(SrvResolutionError, 'percent-encoding');
    });

    it('pickAtRandom: all, in order, for 0 or at least their number; otherwise that many, distinct (Fisher-Yates)', function () {
      expect(pickAtRandom([1, 2, 3], 0)).to.deep.equal([1, 2, 3]);
      expect(pickAtRandom([1, 2, 3], 3)).to.deep.equal([1, 2, 3]);
      expect(pickAtRandom([1, 2, 3], 4)).to.deep.equal([1, 2, 3]);
      // random() always 0: each step swaps the last with the first.
      expect(pickAtRandom([1, 2, 3, 4], 2, () => 0)).to.deep.equal([2, 3]);
      expect(pickAtRandom([1, 2, 3, 4], 2, () => 0.999)).to.deep.equal([1, 2]);
    });

    it('resolvedUri: the hosts in place of the host name, the TXT options the URI lacks, tls=true unless tls or ssl is given', function () {
      expect(resolvedUri('mongodb+srv://u:p%40@h.example.com/db?srvServiceName=x&SRVMAXHOSTS=0&authSource=a', ['a.example.com:1', 'b.example.com:2'], [['authSource', 'b'], ['replicaSet', 'r s']]))
        .to.equal('mongodb://u:p%40@a.example.com:1,b.example.com:2/db?authSource=a&replicaSet=r%20s&tls=true');
      expect(resolvedUri('mongodb+srv://h.example.com', ['a.example.com:1'], [])).to.equal('mongodb://a.example.com:1/?tls=true');
      expect(resolvedUri('mongodb+srv://h.example.com/?ssl=false', ['a.example.com:1'], [['loadBalanced', 'true']])).to.equal('mongodb://a.example.com:1/?ssl=false&loadBalanced=true');
    });
  });
});

describe('mongodb+srv:// against MONGODB_URI', function () {
  const uri = process.env.MONGODB_URI;
  before(function () {
    if (uri === undefined || !uri.startsWith('mongodb+srv://')) this.skip();
  });

  it('finds the hosts of the deployment by DNS and runs ping on one', async function () {
    const client = connect(uri!);
    try {
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(client.hosts.length).to.be.greaterThan(0);
      expect(connectedSettings(client)!.connectionOptions.tls).to.not.equal(undefined);
    } finally {
      await client.close();
    }
  });
});
