import * as path from 'node:path';
import { unifiedSuites } from '../support/unified/suite';

const CLIENT_BULK_WRITE = 'needs the client bulkWrite operation (MongoDB 8.0\'s bulkWrite command over many namespaces), which this runner does not implement';

/**
 * The server selection spec's logging tests (tests/logging, unified format, from the specifications repository at
 * 92b3c0b): a client's "Server selection started/succeeded/failed" and "Waiting for suitable server to become
 * available" messages on each topology, run through rxcmap's client by the unified test runner against embedded
 * deployments (a standalone, a three-member replica set, two mongoses, a load balancer), or against MONGODB_URI's
 * deployment when set. The client bulk write tests are pending, as the runner does not implement that operation.
 */
describe('Server selection logging unified tests', function () {
  unifiedSuites(path.resolve(__dirname, '../fixtures/server-selection/logging'), {
    'operation-id.json: Successful client bulkWrite operation: log messages have operationIds': CLIENT_BULK_WRITE,
    'operation-id.json: Failed client bulkWrite operation: log messages have operationIds': CLIENT_BULK_WRITE,
  });
});
