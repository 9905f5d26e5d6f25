/**
 * The official CMAP conformance tests (cmap-format JSON), read from CMAP_SPEC_DIR or ../shared/spec-tests/cmap-format.
 * Unit-style files run on pools of mock connections.
 */
import { ConnectionPool, MockConnectionFactory, type PoolConnection } from '../../lib';
import { runCmapTest } from './runner';
import { loadSpecFiles, specDirectory } from './spec-file';

const dir = specDirectory();
const files = loadSpecFiles(dir);

describe(`CMAP format tests (${dir})`, function () {
  it('finds the test files', function () {
    if (files.length === 0) throw new Error(`no CMAP test files in ${dir}`);
  });

  describe('unit', function () {
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

  describe('integration', function () {
    for (const { file, spec } of files.filter((f) => f.spec.style === 'integration')) {
      it.skip(`${file}: ${spec.description} [skipped: integration tests need the fail-point endpoint]`);
    }
  });
});
