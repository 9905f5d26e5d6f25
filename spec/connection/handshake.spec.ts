/**
 * The handshake's client metadata: `client.env` (FaaS and container detection), the driver info of wrapping libraries
 * appended to it, and the 512-byte limit on the `client` document, with the order in which it is reduced to fit.
 */
import { expect } from 'chai';
import { calculateObjectSize, deserialize, serialize, type Document } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import { connectionFactory, IncompatibleServerError, InvalidOptionError, MongoCompatibilityError, MongoNetworkError, type DriverInfoOptions } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import {
  ClientMetadata,
  clientEnv,
  clientMetadata,
  fitClientMetadata,
  incompatibleServer,
  MAX_CLIENT_METADATA_BYTES,
  MAX_SUPPORTED_SERVER_VERSION,
  MAX_SUPPORTED_WIRE_VERSION,
  MIN_SUPPORTED_SERVER_VERSION,
  MIN_SUPPORTED_WIRE_VERSION,
} from '../../lib/connection/handshake';
import { DRIVER_INFO } from '../../lib/version';
import { establishOne, startTestEndpoint } from '../support/endpoint';
import { startWireProxy } from '../support/wire-proxy';

/** An environment with these variables and no `/.dockerenv`, unless `dockerenv` says otherwise. */
const environment = (variables: Record<string, string>, dockerenv = false) => ({ variables, dockerenv });

/**
 * The `client` document of the handshake a connection sends, read by a proxy in front of the test endpoint
 * (MONGODB_URI's server when it is set, else an embedded one). `make` creates the connection factory from the options
 * the endpoint needs (credentials, TLS) and the proxy's host and port. Skips the test over TLS, which the proxy cannot
 * read.
 */
async function handshakeSent(context: Mocha.Context, make: (options: Parameters<typeof connectionFactory>[0]) => ReturnType<typeof connectionFactory>): Promise<Document> {
  const endpoint = await startTestEndpoint();
  if (endpoint.connectionOptions.tls) {
    await endpoint.stop();
    console.log('      skipped: MONGODB_URI uses TLS, which the proxy reading the handshake cannot read');
    context.skip();
  }
  const proxy = await startWireProxy(endpoint.address);
  try {
    let received: Document | undefined;
    proxy.hooks = { request: (command) => ((received ??= command), command) };
    const [host, port] = proxy.address.split(':');
    const factory = make({ ...endpoint.connectionOptions, host, port: Number(port) });
    const signal = new AbortController().signal;
    const connection = await firstValueFrom(from(factory({ id: 1, generation: 0, address: proxy.address, signal })));
    connection.destroy();
    return received?.client as Document;
  } finally {
    await proxy.stop();
    await endpoint.stop();
  }
}

describe('handshake client metadata', function () {
  describe('client.env', function () {
    it('is omitted when no FaaS variable is populated and the process runs in no container', function () {
      expect(clientEnv(environment({}))).to.equal(undefined);
      expect(clientMetadata('app', environment({ AWS_EXECUTION_ENV: 'EC2', VERCEL: '' }))).not.to.have.property('env');
    });

    it('names AWS Lambda, with region and memory_mb as an int32', function () {
      const env = clientEnv(environment({ AWS_EXECUTION_ENV: 'AWS_Lambda_java8', AWS_REGION: 'us-east-2', AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '1024' }));
      expect(env).to.deep.equal({ name: 'aws.lambda', region: 'us-east-2', memory_mb: 1024 });
      // An int32 on the wire (BSON type 0x10), not a double.
      const raw = deserialize(serialize({ env }), { promoteValues: false }) as Document;
      expect(raw.env.memory_mb._bsontype).to.equal('Int32');
      expect(clientEnv(environment({ AWS_LAMBDA_RUNTIME_API: '127.0.0.1:9001' }))).to.deep.equal({ name: 'aws.lambda' });
    });

    it('names Azure Functions, GCP (with memory_mb, timeout_sec and region) and Vercel (with region)', function () {
      expect(clientEnv(environment({ FUNCTIONS_WORKER_RUNTIME: 'node' }))).to.deep.equal({ name: 'azure.func' });
      const gcp = { K_SERVICE: 'svc', FUNCTION_MEMORY_MB: '1024', FUNCTION_TIMEOUT_SEC: '60', FUNCTION_REGION: 'us-central1' };
      expect(clientEnv(environment(gcp))).to.deep.equal({ name: 'gcp.func', memory_mb: 1024, timeout_sec: 60, region: 'us-central1' });
      expect(clientEnv(environment({ FUNCTION_NAME: 'f' }))).to.deep.equal({ name: 'gcp.func' });
      expect(clientEnv(environment({ VERCEL: '1', VERCEL_REGION: 'cdg1' }))).to.deep.equal({ name: 'vercel', region: 'cdg1' });
    });

    it('Vercel takes precedence over AWS Lambda; any other combination of providers reports no FaaS', function () {
      const both = { AWS_EXECUTION_ENV: 'AWS_Lambda_java8', AWS_REGION: 'us-east-2', VERCEL: '1', VERCEL_REGION: 'cdg1' };
      expect(clientEnv(environment(both))).to.deep.equal({ name: 'vercel', region: 'cdg1' });
      expect(clientEnv(environment({ AWS_EXECUTION_ENV: 'AWS_Lambda_java8', FUNCTIONS_WORKER_RUNTIME: 'node' }))).to.equal(undefined);
      expect(clientEnv(environment({ VERCEL: '1', K_SERVICE: 'svc' }))).to.equal(undefined);
    });

    it('sends a zero written with a sign ("-0", "+0") as the int32 0, not as a double', function () {
      for (const size of ['-0', '+0', '-00']) {
        const env = clientEnv(environment({ AWS_EXECUTION_ENV: 'AWS_Lambda_java8', AWS_LAMBDA_FUNCTION_MEMORY_SIZE: size }));
        const raw = deserialize(serialize({ env }), { promoteValues: false }) as Document;
        expect(raw.env.memory_mb?._bsontype, size).to.equal('Int32');
        expect(raw.env.memory_mb.value, size).to.equal(0);
      }
    });

    it('leaves out a field whose variable is not of the expected type, without an error', function () {
      for (const size of ['big', '1.5', '', '2147483648', '1e3']) {
        const env = clientEnv(environment({ AWS_EXECUTION_ENV: 'AWS_Lambda_java8', AWS_LAMBDA_FUNCTION_MEMORY_SIZE: size }));
        expect(env, size).to.deep.equal({ name: 'aws.lambda' });
      }
    });

    it('reports the container runtime and orchestrator, with the FaaS when both are present', function () {
      expect(clientEnv(environment({}, true))).to.deep.equal({ container: { runtime: 'docker' } });
      expect(clientEnv(environment({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }))).to.deep.equal({ container: { orchestrator: 'kubernetes' } });
      expect(clientEnv(environment({ AWS_EXECUTION_ENV: 'AWS_Lambda_java8', KUBERNETES_SERVICE_HOST: '10.0.0.1' }, true))).to.deep.equal({
        name: 'aws.lambda',
        container: { runtime: 'docker', orchestrator: 'kubernetes' },
      });
    });

    it('reaches the server in the handshake', async function () {
      const sent = await handshakeSent(this, (options) => {
        const saved = process.env.KUBERNETES_SERVICE_HOST;
        process.env.KUBERNETES_SERVICE_HOST = '10.0.0.1';
        try {
          return connectionFactory({ ...options, appName: 'env-test' });
        } finally {
          if (saved === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
          else process.env.KUBERNETES_SERVICE_HOST = saved;
        }
      });
      expect(sent?.env?.container?.orchestrator).to.equal('kubernetes');
    });
  });

  describe('driver info of wrapping libraries', function () {
    const platform = clientMetadata().platform as string;

    /** The `client` document the handshake of a connection made by a factory with these options sends. */
    const sentBy = (context: Mocha.Context, extra: { driverInfo?: unknown }): Promise<Document> =>
      handshakeSent(context, (options) => connectionFactory({ ...options, ...(extra as { driverInfo?: DriverInfoOptions }) }));

    it("reaches the server appended to driver.name, driver.version and platform after a '|', replacing nothing", async function () {
      expect((await sentBy(this, {})).driver).to.deep.equal({ name: DRIVER_INFO.name, version: DRIVER_INFO.version });
      const sent = await sentBy(this, { driverInfo: { name: 'odm', version: '2.1.0', platform: 'edge runtime' } });
      expect(sent.driver).to.deep.equal({ name: `${DRIVER_INFO.name}|odm`, version: `${DRIVER_INFO.version}|2.1.0` });
      expect(sent.platform).to.equal(`${platform}|edge runtime`);
    });

    it('treats an empty string as unset: it appends nothing', async function () {
      const sent = await sentBy(this, { driverInfo: { name: 'odm', version: '', platform: '' } });
      expect(sent.driver).to.deep.equal({ name: `${DRIVER_INFO.name}|odm`, version: DRIVER_INFO.version });
      expect(sent.platform).to.equal(platform);
    });

    it("refuses a field containing '|', and a value of the wrong type, naming the field and what is allowed", function () {
      const refused = (driverInfo: unknown): InvalidOptionError => {
        try {
          connectionFactory({ host: 'h', port: 1, driverInfo: driverInfo as DriverInfoOptions });
        } catch (error) {
          expect(error).to.be.instanceOf(InvalidOptionError);
          return error as InvalidOptionError;
        }
        throw new Error(`driverInfo ${JSON.stringify(driverInfo)} was accepted`);
      };
      expect(refused({ name: 'a|b' })).to.include({ option: 'driverInfo.name' });
      expect(refused({ name: 'a|b' }).message).to.match(/driverInfo.name must be a string without '\|'/);
      expect(refused({ name: 'a', version: '1|2' })).to.include({ option: 'driverInfo.version' });
      expect(refused({ name: 'a', platform: '|' })).to.include({ option: 'driverInfo.platform' });
      expect(refused({ version: '1' })).to.include({ option: 'driverInfo.name' });
      expect(refused({ name: 5 })).to.include({ option: 'driverInfo.name' });
      expect(refused({ name: 'a', version: null })).to.include({ option: 'driverInfo.version' });
      expect(refused('odm')).to.include({ option: 'driverInfo' });
      expect(refused({ name: 'a', platfrom: 'p' })).to.include({ option: 'driverInfo.platfrom', suggestion: 'platform' });
    });

    it('appends an equal driver info only once, an empty string being equal to unset', function () {
      const metadata = new ClientMetadata(undefined, { name: 'odm', version: '2.1.0' });
      const first = metadata.document;
      expect(metadata.append({ name: 'odm', version: '2.1.0', platform: '' })).to.equal(false);
      expect(metadata.append({ name: 'Odm', version: '2.1.0' })).to.equal(true);
      expect(metadata.append({ name: 'odm', version: '2.1.0', platform: 'p' })).to.equal(true);
      expect(metadata.append({ name: 'Odm', version: '2.1.0' })).to.equal(false);
      expect(metadata.append({ name: '' })).to.equal(false);
      expect(first.driver.name).to.equal(`${DRIVER_INFO.name}|odm`);
      expect(metadata.document.driver).to.deep.equal({
        name: `${DRIVER_INFO.name}|odm|Odm|odm`,
        version: `${DRIVER_INFO.version}|2.1.0|2.1.0|2.1.0`,
      });
      expect(metadata.document.platform).to.equal(`${platform}|p`);
    });

    it("reads each field once: a getter that gives a checked value and then one with '|' or of another type appends what was checked", function () {
      /** A driver info whose `field` is first `checked`, then, on every later read, `later`. */
      const flipping = (field: 'name' | 'version' | 'platform', checked: string, later: unknown): { info: DriverInfoOptions; reads: () => number } => {
        let reads = 0;
        const info = Object.defineProperty({ name: 'odm' }, field, { enumerable: true, get: () => (reads++ === 0 ? checked : later) });
        return { info: info as DriverInfoOptions, reads: () => reads };
      };
      const byAppend = new ClientMetadata();
      const name = flipping('name', 'odm', 'odm|injected');
      expect(byAppend.append(name.info)).to.equal(true);
      expect(byAppend.document.driver.name).to.equal(`${DRIVER_INFO.name}|odm`);
      expect(name.reads()).to.equal(1);
      const platformField = flipping('platform', 'p', { toString: () => 'not a string' });
      byAppend.append(platformField.info);
      expect(byAppend.document.platform).to.equal(`${platform}|p`);
      const byConstructor = new ClientMetadata(undefined, flipping('version', '1.0', '1|0').info);
      expect(byConstructor.document.driver.version).to.equal(`${DRIVER_INFO.version}|1.0`);
    });

    it('a platform too long for the limit is cut; a name and version too long for it are refused, the metadata unchanged', function () {
      const environment = { variables: {}, dockerenv: false };
      const long = clientMetadata('a'.repeat(128), environment, [{ name: 'odm', platform: 'p'.repeat(600) }]);
      expect(calculateObjectSize(long)).to.be.within(MAX_CLIENT_METADATA_BYTES - 1, MAX_CLIENT_METADATA_BYTES);
      expect(long.driver.name).to.equal(`${DRIVER_INFO.name}|odm`);
      expect(long.platform).to.match(new RegExp(`^${platform.replace(/[.()]/g, '\\$&')}\\|p+$`));
      const tooLong = { name: 'n'.repeat(300), version: 'v'.repeat(200) };
      expect(() => connectionFactory({ host: 'h', port: 1, driverInfo: tooLong })).to.throw(InvalidOptionError, /Invalid driverInfo: .*fit in 512 bytes/);
      const metadata = new ClientMetadata('app', { name: 'odm' }, environment);
      const before = metadata.document;
      expect(() => metadata.append(tooLong)).to.throw(InvalidOptionError);
      expect(metadata.document).to.equal(before);
      expect(metadata.append({ name: 'odm2' })).to.equal(true);
      expect(metadata.document.driver.name).to.equal(`${DRIVER_INFO.name}|odm|odm2`);
    });
  });

  describe(`the ${MAX_CLIENT_METADATA_BYTES}-byte limit`, function () {
    it('a FaaS region too long for the limit leaves only env.name, the rest intact', function () {
      const variables = { AWS_EXECUTION_ENV: 'AWS_Lambda_java8', AWS_REGION: 'a'.repeat(512), KUBERNETES_SERVICE_HOST: 'k' };
      const metadata = clientMetadata('a'.repeat(128), environment(variables, true));
      expect(metadata.env).to.deep.equal({ name: 'aws.lambda' });
      expect(metadata.os).to.have.all.keys('type', 'name', 'architecture', 'version');
      expect(metadata.application).to.deep.equal({ name: 'a'.repeat(128) });
      expect(calculateObjectSize(metadata)).to.be.at.most(MAX_CLIENT_METADATA_BYTES);
    });

    it('a container-only env too long for the limit is omitted at the first step', function () {
      const metadata = fitClientMetadata({
        driver: { name: 'd', version: '1' },
        os: { type: 'Linux', name: 'n' },
        platform: 'p',
        env: { container: { runtime: 'x'.repeat(600) } },
      });
      expect(metadata).to.deep.equal({ driver: { name: 'd', version: '1' }, os: { type: 'Linux', name: 'n' }, platform: 'p' });
    });

    it('then keeps only os.type; then drops env; then cuts platform, in that order and only as far as needed', function () {
      const base = (): Document => ({
        application: { name: 'app' },
        driver: { name: 'd', version: '1' },
        os: { type: 'Linux', name: 'n'.repeat(200), architecture: 'x64', version: '1' },
        platform: 'p',
        env: { name: 'aws.lambda', region: 'r'.repeat(200) },
      });
      // Step 1 is enough.
      const one = fitClientMetadata(base());
      expect(one.env).to.deep.equal({ name: 'aws.lambda' });
      expect(one.os.name).to.equal('n'.repeat(200));
      // Step 2: os is reduced to its type, env.name stays.
      const two = base();
      two.os.name = 'n'.repeat(450);
      expect(fitClientMetadata(two)).to.deep.include({ os: { type: 'Linux' }, env: { name: 'aws.lambda' }, platform: 'p' });
      // Step 3: env goes when os alone is not enough.
      const three = base();
      three.env.name = 'e'.repeat(440);
      const fitted3 = fitClientMetadata(three);
      expect(fitted3).not.to.have.property('env');
      expect(fitted3).to.deep.include({ os: { type: 'Linux' }, platform: 'p' });
      // Step 4: platform is cut to exactly the bytes that fit, never inside a character.
      const four = base();
      four.platform = 'é'.repeat(400);
      const fitted4 = fitClientMetadata(four);
      expect(fitted4).not.to.have.property('env');
      expect(fitted4.application).to.deep.equal({ name: 'app' });
      expect(fitted4.platform).to.match(/^é+$/);
      const size = calculateObjectSize(fitted4);
      expect(size).to.be.within(MAX_CLIENT_METADATA_BYTES - 1, MAX_CLIENT_METADATA_BYTES);
    });

    it('leaves a document within the limit untouched', function () {
      const metadata = clientMetadata('a'.repeat(128), environment({ VERCEL: '1', VERCEL_REGION: 'cdg1' }, true));
      expect(metadata.env).to.deep.equal({ name: 'vercel', region: 'cdg1', container: { runtime: 'docker' } });
      expect(metadata.os).to.have.all.keys('type', 'name', 'architecture', 'version');
    });
  });
});

describe('wire version compatibility (server discovery and monitoring spec, "Checking wire protocol compatibility")', function () {
  /** What establishing one connection to an embedded endpoint with `options` gives: the connection, or the error. */
  async function establishAgainst(options: ConstructorParameters<typeof EmbeddedServer>[0]): Promise<{ error: unknown; server: EmbeddedServer; address: string }> {
    const server = new EmbeddedServer(options);
    await server.start();
    try {
      const connection = await establishOne(server.address, { connectTimeoutMS: 2000 });
      connection.destroy();
      return { error: undefined, server, address: server.address };
    } catch (error) {
      return { error, server, address: server.address };
    } finally {
      await server.stop();
    }
  }

  it('rxcmap speaks wire versions 8 (MongoDB 4.2) to 25 (MongoDB 8.0)', function () {
    expect([MIN_SUPPORTED_WIRE_VERSION, MIN_SUPPORTED_SERVER_VERSION, MAX_SUPPORTED_WIRE_VERSION, MAX_SUPPORTED_SERVER_VERSION]).to.deep.equal([8, '4.2', 25, '8.0']);
  });

  it('a server too old (maxWireVersion 7, MongoDB 4.0) fails the establishment with IncompatibleServerError naming it and both ranges', async function () {
    const { error, address } = await establishAgainst({ maxWireVersion: 7 });
    expect(error).to.be.instanceOf(IncompatibleServerError).and.instanceOf(MongoCompatibilityError);
    const e = error as IncompatibleServerError;
    expect({ address: e.address, min: e.minWireVersion, max: e.maxWireVersion, labels: [...e.errorLabels] }).to.deep.equal({ address, min: 0, max: 7, labels: [] });
    expect(e.message).to.equal(
      `Server at ${address} reports wire version 7, but this version of rxcmap requires at least 8 (MongoDB 4.2): the server speaks wire versions 0 to 7, rxcmap 8 to 25 (MongoDB 4.2 to 8.0)`,
    );
  });

  it('a server too new (minWireVersion 26) fails the establishment with IncompatibleServerError', async function () {
    const { error, address } = await establishAgainst({ maxWireVersion: 30, minWireVersion: 26 });
    expect(error).to.be.instanceOf(IncompatibleServerError);
    expect((error as IncompatibleServerError).message).to.equal(
      `Server at ${address} requires wire version 26, but this version of rxcmap only supports up to 25: the server speaks wire versions 26 to 30, rxcmap 8 to 25 (MongoDB 4.2 to 8.0)`,
    );
  });

  it('the bounds themselves are compatible: maxWireVersion 8, minWireVersion 25, and a newer server that still speaks 25', async function () {
    for (const options of [{ maxWireVersion: 8 }, { maxWireVersion: 25, minWireVersion: 25 }, { maxWireVersion: 30, minWireVersion: 0 }]) {
      const { error } = await establishAgainst(options);
      expect(error, JSON.stringify(options)).to.equal(undefined);
    }
  });

  it('an incompatible server gets nothing after the hello: no authentication, the connection closed', async function () {
    const server = new EmbeddedServer({ maxWireVersion: 7, users: [{ username: 'u', password: 'p' }] });
    await server.start();
    try {
      const error = await establishOne(server.address, { credentials: { username: 'u', password: 'p' } }).then(() => undefined, (e: unknown) => e);
      expect(error).to.be.instanceOf(IncompatibleServerError);
      expect(server.scramConversations().started).to.equal(0);
      expect(await server.waitForOpenConnections(0)).to.equal(0);
    } finally {
      await server.stop();
    }
  });

  it('a server before OP_MSG (maxWireVersion 5, MongoDB 3.4), which closes the connection on the OP_MSG handshake, is a network error: its wire version is never read', async function () {
    const { error, server } = await establishAgainst({ maxWireVersion: 5 });
    expect(error).to.be.instanceOf(MongoNetworkError).and.not.instanceOf(IncompatibleServerError);
    expect(server.connectionsAccepted).to.equal(1);
  });

  it('incompatibleServer: one compare per bound, a reply without wire versions (0 to 0) is too old', function () {
    expect(incompatibleServer('h:1', 0, 8)).to.equal(undefined);
    expect(incompatibleServer('h:1', 25, 25)).to.equal(undefined);
    expect(incompatibleServer('h:1', 0, 0)?.maxWireVersion).to.equal(0);
    expect(incompatibleServer('h:1', 26, 26)?.message).to.match(/^Server at h:1 requires wire version 26/);
    expect(incompatibleServer('h:1', 0, 7)?.message).to.match(/^Server at h:1 reports wire version 7/);
  });
});
