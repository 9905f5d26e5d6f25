/**
 * Runs `fn` (awaited) with a listener on the process's `warning` event, lets the warnings it caused be emitted (one
 * `setImmediate`: Node emits them on the next tick), and resolves to them. Whatever `fn` throws or rejects with is
 * passed on.
 */
export async function warningsOf(fn: () => unknown): Promise<Error[]> {
  const warnings: Error[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning);
  process.on('warning', onWarning);
  try {
    await fn();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  return warnings;
}
