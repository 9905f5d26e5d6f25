/**
 * Runs `fn` (awaited) with a listener on the process's `unhandledRejection`, lets the rejections it left be reported
 * (one `setImmediate`, or `settleMS` ms when given), and resolves to their reasons. Whatever `fn` throws or rejects
 * with is passed on.
 */
export async function unhandledRejectionsOf(fn: () => unknown, settleMS = 0): Promise<unknown[]> {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await fn();
    await new Promise((resolve) => (settleMS > 0 ? setTimeout(resolve, settleMS) : setImmediate(resolve)));
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  return unhandled;
}
