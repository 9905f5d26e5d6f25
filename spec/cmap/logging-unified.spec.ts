import * as path from 'node:path';
import { unifiedSuites } from '../support/unified/suite';

const WAIT_QUEUE_SIZE = 'waitQueueSize and waitQueueMultiple are options rxcmap does not implement (ignored with a warning, as the URI options spec asks): the test says drivers that do not support them skip it';

/**
 * CMAP's logging tests (connection monitoring and pooling spec, tests/logging, unified format, from the
 * specifications repository at 92b3c0b), run through rxcmap's client by the unified test runner against an embedded
 * standalone, or against MONGODB_URI's deployment when set. The test whose close ends a session runs up to the
 * session's messages (rxcmap has no sessions); those of options rxcmap does not implement are pending, as they say.
 */
describe('CMAP logging unified tests', function () {
  unifiedSuites(path.resolve(__dirname, '../fixtures/connection-monitoring-and-pooling/logging'), {
    'connection-pool-options.json: waitQueueSize should be included in connection pool created message when specified': WAIT_QUEUE_SIZE,
    'connection-pool-options.json: waitQueueMultiple should be included in connection pool created message when specified': WAIT_QUEUE_SIZE,
  }, {
    'connection-logging.json: Create a client, run a command, and close the client': {
      why: 'without the three messages of the checkout that ends its session at close: rxcmap has no sessions',
      adapt: (test) => ({
        ...test,
        expectLogMessages: test.expectLogMessages!.map((expected) => {
          // The checkout started, checked out and checked in after the command's check-in (the test's comment: "for
          // ending a session").
          const messages = [...expected.messages];
          const checkedIn = messages.findIndex((m) => (m.data as { message?: string }).message === 'Connection checked in');
          messages.splice(checkedIn + 1, 3);
          return { ...expected, messages };
        }),
      }),
    },
  });
});
