import * as path from 'node:path';
import { unifiedSuites } from '../support/unified/suite';

const TRANSACTIONS = 'needs sessions and transactions (startTransaction, commitTransaction, abortTransaction), which are not rxcmap\'s';
const RETRYABLE_WRITES = 'needs retryable writes (retryWrites=true: a write whose writeConcernError has the RetryableWriteError label is run again), which rxcmap does not implement';

/**
 * The command logging and monitoring spec's tests (tests/logging and tests/monitoring, unified format, from the
 * specifications repository at 92b3c0b): the CommandStarted/Succeeded/Failed events of a client's connections and
 * their "Command started/succeeded/failed" log messages, run through rxcmap's client by the unified test runner
 * against embedded deployments, or against MONGODB_URI's deployment when set. The runner sends the commands a
 * driver sends for each operation (a bulk write's batches sharing one operationId; an unacknowledged write with
 * moreToCome). Those of features rxcmap or the runner does not have are pending, each with why.
 */
describe('Command logging and monitoring unified tests', function () {
  describe('logging', function () {
    unifiedSuites(path.resolve(__dirname, '../fixtures/command-logging-and-monitoring/logging'), {
      'command.json: A successful commitTransaction command': TRANSACTIONS,
      'command.json: A successful abortTransaction command': TRANSACTIONS,
    });
  });
  describe('monitoring', function () {
    unifiedSuites(path.resolve(__dirname, '../fixtures/command-logging-and-monitoring/monitoring'), {
      'writeConcernError.json: A retryable write with write concern errors publishes success event': RETRYABLE_WRITES,
    });
  });
});
