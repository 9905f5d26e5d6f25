import * as path from 'node:path';
import { unifiedSuites } from '../support/unified/suite';

/**
 * The server selection spec's logging tests (tests/logging, unified format, from the specifications repository at
 * 92b3c0b): a client's "Server selection started/succeeded/failed" and "Waiting for suitable server to become
 * available" messages on each topology, with the operationId of a bulk write and a client bulk write, run through
 * rxcmap's client by the unified test runner against embedded deployments (a standalone, a three-member replica set,
 * two mongoses, a load balancer), or against MONGODB_URI's deployment when set. None is pending.
 */
describe('Server selection logging unified tests', function () {
  unifiedSuites(path.resolve(__dirname, '../fixtures/server-selection/logging'));
});
