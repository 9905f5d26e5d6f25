/**
 * A `RunCommand` (what an authentication mechanism sends its commands with) for tests of a mechanism alone: it records
 * each command and its database, and answers with `answer()`, without a server.
 */
import type { Document } from 'bson';
import type { RunCommand } from '../../lib/auth/scram';

export interface RunRecorder {
  /** Each command run, with its database, in order. */
  readonly sent: [string, Document][];
  readonly run: RunCommand;
}

export function recordingRun(answer: () => Promise<Document>): RunRecorder {
  const sent: [string, Document][] = [];
  return { sent, run: async (db: string, command: Document): Promise<Document> => (sent.push([db, command]), answer()) };
}
