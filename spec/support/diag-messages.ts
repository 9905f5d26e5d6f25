/**
 * What OpenTelemetry's diag logger receives, for tests of what an instrumentation reports there.
 */
import { diag, DiagLogLevel } from '@opentelemetry/api';

/**
 * Sets a diag logger that keeps the messages logged at `level` (`error` or `warn`; the other levels dropped) in the
 * array returned, until `diag.disable()`.
 */
export function diagMessages(level: 'error' | 'warn'): string[] {
  const messages: string[] = [];
  const keep = (message: string): void => void messages.push(message);
  const drop = (): void => undefined;
  diag.setLogger({ error: level === 'error' ? keep : drop, warn: level === 'warn' ? keep : drop, info: drop, debug: drop, verbose: drop }, level === 'error' ? DiagLogLevel.ERROR : DiagLogLevel.WARN);
  return messages;
}
