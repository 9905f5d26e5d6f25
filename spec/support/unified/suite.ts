/**
 * Mocha suites of unified test files: one `describe` per file, one `it` per test, run against the deployment of
 * `MONGODB_URI` when set (tests its topology or version does not meet are pending), otherwise against a fresh
 * embedded deployment per test (see {@link embeddedPlan}).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EJSON } from 'bson';
import { describeExternal, embeddedPlan, startEmbedded, type Deployment, type EmbeddedPlan, type RunOnRequirement, type TopologyName } from './deployment';
import { Concurrently } from './concurrently';
import { UnifiedTestRun, type UnifiedFile, type UnifiedTest } from './runner';

/** The unified test files of `directory` (`.json`), parsed as relaxed extended JSON (numbers as numbers), by name. */
export function unifiedFiles(directory: string): [string, UnifiedFile][] {
  return fs
    .readdirSync(directory)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => [name, EJSON.parse(fs.readFileSync(path.join(directory, name), 'utf8')) as UnifiedFile]);
}

/** The embedded deployment a test of `file` runs against: one that meets both the file's and the test's requirements. */
export function planFor(file: UnifiedFile, test: UnifiedTest, topology?: TopologyName): EmbeddedPlan | string {
  const requirements = requirementsOf(file, test);
  if (topology === undefined) return embeddedPlan(requirements);
  return embeddedPlan(requirements.filter((r) => (r.topologies ?? ['single']).includes(topology)).map((r) => ({ ...r, topologies: [topology] })));
}

/** The requirements a test's deployment must meet: each of the file's with each of the test's. */
function requirementsOf(file: UnifiedFile, test: UnifiedTest): RunOnRequirement[] {
  return [...(file.runOnRequirements ?? [{}])].flatMap((f) => (test.runOnRequirements ?? [{}]).map((t) => ({ ...f, ...t })));
}

/**
 * The topologies a test runs on against embedded deployments: the first its requirements allow, or with
 * `UNIFIED_TOPOLOGIES=all` (`npm run test:unified`) every one they list.
 */
function topologiesOf(file: UnifiedFile, test: UnifiedTest): (TopologyName | undefined)[] {
  if (process.env.UNIFIED_TOPOLOGIES !== 'all') return [undefined];
  return [...new Set(requirementsOf(file, test).flatMap((r) => r.topologies ?? (['single'] as const)))];
}

/** How many tests of one suite's files run at once against their embedded deployments. */
const CONCURRENTLY = 4;

/** A test run with a change, and why: the expectations of a feature rxcmap does not have taken out, the rest kept. */
export interface Adaptation {
  readonly why: string;
  readonly adapt: (test: UnifiedTest) => UnifiedTest;
}

/** What a test's body is run with: mocha's context, of which the suites use `skip()`. */
export interface TestContext {
  skip(): void;
}

/** How the suites are defined: mocha's `describe` and `it` (another pair for the suites' own tests). */
export interface SuiteDefinition {
  describe(title: string, body: (this: { timeout(ms: number): void }) => void): void;
  it(title: string, body: (this: TestContext) => Promise<void>): void;
}

/** Mocha's own `describe` and `it`, read when the suites are defined. */
const MOCHA: SuiteDefinition = {
  describe: (title, body) => void describe(title, body as never),
  it: (title, body) => void it(title, body as never),
};

/**
 * Defines the mocha suites of the files of `directory`. `skipped` names tests (`file: description`) the runner
 * does not run, each with why (a feature rxcmap does not have), so each shows as pending with its reason; `adapted`
 * names tests run with a change (their title says so and why). `define` is mocha's `describe` and `it` unless given.
 */
export function unifiedSuites(
  directory: string,
  skipped: Readonly<Record<string, string>> = {},
  adapted: Readonly<Record<string, Adaptation>> = {},
  define: SuiteDefinition = MOCHA,
): void {
  const external = process.env.MONGODB_URI;
  let real: Promise<Deployment> | undefined;
  // Against embedded deployments each test has its own (its fail points, clients and collections touch no other's),
  // so the tests of these files run CONCURRENTLY at a time, most of their time spent waiting on the servers' and
  // the clients' timers; each `it` reports its own. Against MONGODB_URI's one deployment they run one by one.
  const jobs = new Concurrently<void>(CONCURRENTLY);
  for (const [name, file] of unifiedFiles(directory)) {
    define.describe(`${name}: ${file.description}`, function () {
      this.timeout(60_000);
      for (const given of file.tests) {
        const why = skipped[`${name}: ${given.description}`];
        const adaptation = adapted[`${name}: ${given.description}`];
        const test = adaptation === undefined ? given : adaptation.adapt(given);
        for (const topology of external === undefined ? topologiesOf(file, test) : [undefined]) {
          const title = `${test.description}${topology === undefined ? '' : ` [${topology}]`}`;
          // An embedded deployment of the topology the test asks for, made for it alone.
          const runEmbedded = async (): Promise<void> => {
            const plan = planFor(file, test, topology);
            if (typeof plan === 'string') throw new Error(plan);
            const deployment = await startEmbedded(plan);
            try {
              const reason = UnifiedTestRun.skip(file, test, deployment);
              if (reason !== undefined) throw new Error(`the embedded deployment does not meet the test's requirements: ${reason}`);
              await new UnifiedTestRun(file, test, deployment).run();
            } finally {
              await deployment.close();
            }
          };
          // Registered with every other test of these files, started by the first test mocha runs.
          const run = external === undefined && why === undefined && test.skipReason === undefined ? jobs.add(runEmbedded) : undefined;
          define.it(adaptation === undefined ? title : `${title} (adapted: ${adaptation.why})`, async function () {
            if (why !== undefined) this.skip();
            // A file this runner cannot read fails ("Test Runner Support"); a test with a skipReason is skipped anywhere.
            UnifiedTestRun.checkSchema(file);
            if (test.skipReason !== undefined) this.skip();
            if (external === undefined) {
              jobs.start();
              await run;
              return;
            }
            const deployment = await (real ??= describeExternal(external));
            if (UnifiedTestRun.skip(file, test, deployment) !== undefined) this.skip();
            await new UnifiedTestRun(file, test, deployment).run();
          });
        }
      }
    });
  }
}
