import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { unifiedSuites, type TestContext } from './suite';
import type { Operation, UnifiedTest } from './runner';

describe('unified suites (how each test of a file becomes a mocha test)', function () {
  this.timeout(20_000);

  it('each test awaits its own run: a failing test fails, a passing one passes, one skipped or with a skipReason is pending, an adapted one runs adapted and says so', async function () {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-unified-'));
    try {
      const ping: Operation = { name: 'runCommand', object: 'database', arguments: { command: { ping: 1 }, commandName: 'ping' } };
      const pingFails: Operation = { ...ping, expectError: { isError: true } };
      fs.writeFileSync(
        path.join(directory, 'wiring.json'),
        JSON.stringify({
          description: 'wiring',
          schemaVersion: '1.0',
          createEntities: [{ client: { id: 'client' } }, { database: { id: 'database', client: 'client', databaseName: 'wiring' } }],
          tests: [
            { description: 'passes', operations: [ping] },
            { description: 'fails', operations: [pingFails] },
            { description: 'skipped', operations: [pingFails] },
            { description: 'adapted', operations: [pingFails] },
            { description: 'has a skipReason', skipReason: 'its own reason', operations: [pingFails] },
          ],
        }),
      );
      const suites: string[] = [];
      const tests: { title: string; body: (this: TestContext) => Promise<void> }[] = [];
      unifiedSuites(
        directory,
        { 'wiring.json: skipped': 'not run, with why' },
        { 'wiring.json: adapted': { why: 'without its expected error', adapt: (test: UnifiedTest) => ({ ...test, operations: test.operations.map(({ expectError: _e, ...operation }) => operation) }) } },
        {
          describe: (title, body) => {
            suites.push(title);
            body.call({ timeout: () => undefined });
          },
          it: (title, body) => void tests.push({ title, body }),
        },
      );
      const pending = new Error('pending');
      const outcome = async (title: string): Promise<unknown> => {
        const test = tests.find((t) => t.title === title)!;
        try {
          await test.body.call({
            skip: () => {
              throw pending;
            },
          });
          return 'passed';
        } catch (error) {
          return error === pending ? 'pending' : error;
        }
      };
      expect(suites).to.deep.equal(['wiring.json: wiring']);
      expect(tests.map((t) => t.title)).to.deep.equal(['passes', 'fails', 'skipped', 'adapted (adapted: without its expected error)', 'has a skipReason']);
      expect(await outcome('passes')).to.equal('passed');
      const failed = await outcome('fails');
      expect(failed).to.be.instanceOf(Error);
      expect((failed as Error).message).to.match(/runCommand on database: expected an error/);
      expect(await outcome('skipped')).to.equal('pending');
      expect(await outcome('adapted (adapted: without its expected error)')).to.equal('passed');
      expect(await outcome('has a skipReason')).to.equal('pending');
    } finally {
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});
