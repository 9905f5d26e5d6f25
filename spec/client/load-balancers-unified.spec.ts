import * as path from 'node:path';
import type { Document } from 'bson';
import { unifiedFiles, unifiedSuites } from '../support/unified/suite';

const fixtures = path.resolve(__dirname, '../fixtures/load-balancers');

/** What each operation rxcmap's client does not have needs, for the pending tests' reasons. */
const NEEDS: Readonly<Record<string, string>> = {
  createFindCursor: 'cursors',
  iterateUntilDocumentOrError: 'cursors',
  aggregate: 'cursors',
  listCollections: 'cursors',
  listIndexes: 'cursors',
  createChangeStream: 'change streams',
  createIndex: 'index management',
  startTransaction: 'sessions and transactions',
  commitTransaction: 'sessions and transactions',
  abortTransaction: 'sessions and transactions',
  endSession: 'sessions',
  assertSameLsidOnLastTwoCommands: 'sessions',
};

/** The operation names a test (or its file's entities) uses, nested ones included. */
function operationNames(value: unknown, names = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const item of value) operationNames(item, names);
  else if (typeof value === 'object' && value !== null) {
    const doc = value as Document;
    if (typeof doc.name === 'string' && typeof doc.object === 'string') names.add(doc.name);
    for (const inner of Object.values(doc)) operationNames(inner, names);
  }
  return names;
}

/** The load balancer spec's tests rxcmap cannot run, each with what it needs (a session entity counts). */
function pending(): Record<string, string> {
  const skipped: Record<string, string> = {};
  for (const [name, file] of unifiedFiles(fixtures)) {
    const sessions = JSON.stringify(file.createEntities ?? []).includes('"session"');
    for (const test of file.tests) {
      const needs = new Set([...operationNames(test.operations)].flatMap((op) => (NEEDS[op] === undefined ? [] : [NEEDS[op]!])));
      if (sessions && JSON.stringify(test.operations).includes('"session"')) needs.add('sessions');
      if (needs.size > 0) skipped[`${name}: ${test.description}`] = `needs ${[...needs].join(', ')}, which rxcmap's client does not have`;
    }
  }
  return skipped;
}

/**
 * The load balancer spec's unified tests (load-balancers/tests, from the specifications repository at 92b3c0b), run
 * through rxcmap's client by the unified test runner against an embedded load balancer (or MONGODB_URI's deployment):
 * those that need cursors, sessions, transactions, change streams or index management are pending, each naming what.
 */
describe('load balancer unified tests', function () {
  unifiedSuites(fixtures, pending());
});
