/**
 * The examples' one line for a server they could not use: why the first command failed.
 */
import { ServerSelectionError } from '../lib';

/** The one line explaining why the first ping failed: no server in time (with the last check's error), or its error. */
export function unreachable(error: unknown, address: string): string {
  if (error instanceof ServerSelectionError) {
    const cause = error.cause instanceof Error ? error.cause.message : 'no server check completed in time';
    return `cannot reach ${error.hosts.join(', ')} within ${error.serverSelectionTimeoutMS} ms: ${cause}`;
  }
  return `the first ping to ${address} failed: ${error instanceof Error ? error.message : String(error)}`;
}
