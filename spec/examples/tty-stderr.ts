/**
 * Preloaded (`node -r`) into a demo run by its spec: makes stderr look like a terminal of TTY_COLUMNS columns
 * (default 40), so the spec can see what the demo writes to a terminal without one.
 */
Object.defineProperty(process.stderr, 'isTTY', { value: true, configurable: true });
Object.defineProperty(process.stderr, 'columns', { value: Number(process.env.TTY_COLUMNS ?? 40), configurable: true });
