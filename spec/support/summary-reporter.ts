/**
 * The test reporter: mocha's spec output, then one closing line `N passed, N failed, N skipped`. When
 * TEST_SUMMARY_FILE is set, the same line is also written to that file (CI reads it from there).
 */
import * as fs from 'node:fs';
import Mocha from 'mocha';

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END } = Mocha.Runner.constants;

class SummaryReporter extends Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const stats = runner.stats ?? { passes: 0, failures: 0, pending: 0 };
      const line = `${stats.passes} passed, ${stats.failures} failed, ${stats.pending} skipped`;
      // After the spec reporter's own epilogue, which it prints on the same event.
      process.nextTick(() => {
        process.stdout.write(`${line}\n`);
        if (process.env.TEST_SUMMARY_FILE) fs.writeFileSync(process.env.TEST_SUMMARY_FILE, `${line}\n`);
      });
    });
  }
}

export = SummaryReporter;
