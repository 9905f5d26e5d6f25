/**
 * The official CMAP conformance tests (cmap-format JSON), read from CMAP_SPEC_DIR or ../shared/spec-tests/cmap-format.
 * Unit-style files run on pools of mock connections; integration-style files run over real sockets against the
 * embedded endpoint (or the server in MONGODB_URI), with their fail points set before and turned off after.
 */
import { ConnectionPool, type PoolConnection } from '../../lib';
import { MockConnectionFactory } from '../../lib/testing';
import { startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { runCmapTest } from './runner';
import { loadSpecFiles, specDirectory, type CmapSpecFile } from './spec-file';

const dir = specDirectory();
const files = loadSpecFiles(dir);

/** Whether a server of `version` satisfies one of the `runOn` requirements (all when there are none). */
export function runOnSatisfied(runOn: CmapSpecFile['runOn'], version: number[]): boolean {
  if (!runOn || runOn.length === 0) return true;
  const cmp = (a: number[], b: number[]): number => {
    for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
    return 0;
  };
  const parse = (v: string): number[] => v.split('.').map(Number);
  return runOn.some(
    (r) =>
      (r.minServerVersion === undefined || cmp(version, parse(r.minServerVersion)) >= 0) &&
      (r.maxServerVersion === undefined || cmp(version, parse(r.maxServerVersion)) <= 0),
  );
}

describe(`CMAP format tests (${dir})`, function () {
  it('finds the test files', function () {
    if (files.length === 0) throw new Error(`no CMAP test files in ${dir}`);
  });

  describe('unit (mock connections)', function () {
    for (const { file, spec } of files.filter((f) => f.spec.style === 'unit')) {
      it(`${file}: ${spec.description}`, async function () {
        await runCmapTest(spec, (options) => {
          const mock = new MockConnectionFactory();
          return new ConnectionPool<PoolConnection>({
            address: 'localhost:27017',
            ...options,
            connectionFactory: mock.factory,
          });
        });
      });
    }
  });

  describe(`integration (sockets, ${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
    let endpoint: TestEndpoint;
    let version: number[] = [];
    before(async function () {
      endpoint = await startTestEndpoint();
      const info = await endpoint.adminCommand({ buildInfo: 1 });
      version = Array.isArray(info.versionArray) ? info.versionArray : String(info.version).split('.').map(Number);
    });
    after(async function () {
      await endpoint?.stop();
    });

    for (const { file, spec } of files.filter((f) => f.spec.style === 'integration')) {
      it(`${file}: ${spec.description}`, async function () {
        if (!runOnSatisfied(spec.runOn, version)) {
          console.log(`      skipped ${file}: server ${version.join('.')} does not satisfy runOn ${JSON.stringify(spec.runOn)}`);
          this.skip();
        }
        if (spec.failPoint) await endpoint.adminCommand(spec.failPoint);
        try {
          await runCmapTest(spec, ({ appName, ...poolOptions }) =>
            new ConnectionPool({
              address: endpoint.address,
              ...poolOptions,
              connectionOptions: { ...endpoint.connectionOptions, ...(appName === undefined ? {} : { appName: String(appName) }) },
            }) as unknown as ConnectionPool<PoolConnection>,
          );
        } finally {
          if (spec.failPoint) await endpoint.adminCommand({ configureFailPoint: spec.failPoint.configureFailPoint, mode: 'off' });
        }
      });
    }
  });
});
