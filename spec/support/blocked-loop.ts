/**
 * Blocks the event loop for `ms` ms, as a long synchronous computation or a GC pause does: nothing else of this
 * process runs meanwhile (no timer, no socket read), while other processes, and the kernel, go on (a peer's bytes
 * arrive in the socket's buffer).
 */
export function blockEventLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: the point is that nothing else runs
  }
}
