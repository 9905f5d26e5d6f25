/**
 * MATCH from the CMAP test format: `expected` is a subset of `actual`, with 42 and "42" meaning "any value that
 * exists". Returns the first mismatch as a path and a reason, or undefined when `actual` matches.
 */
export function mismatch(actual: unknown, expected: unknown, path = '$'): string | undefined {
  if (expected === 42 || expected === '42') {
    return actual === undefined || actual === null ? `${path}: expected a value, got ${String(actual)}` : undefined;
  }
  const expectedType = jsonType(expected);
  const actualType = jsonType(actual);
  if (expectedType !== actualType) return `${path}: expected ${expectedType}, got ${actualType} (${show(actual)})`;
  if (Array.isArray(expected)) {
    const list = actual as unknown[];
    for (let i = 0; i < expected.length; i++) {
      const m = mismatch(list[i], expected[i], `${path}[${i}]`);
      if (m) return m;
    }
    return undefined;
  }
  if (expectedType === 'object') {
    const obj = actual as Record<string, unknown>;
    for (const [key, value] of Object.entries(expected as Record<string, unknown>)) {
      const m = mismatch(obj[key], value, `${path}.${key}`);
      if (m) return m;
    }
    return undefined;
  }
  return expected === actual ? undefined : `${path}: expected ${show(expected)}, got ${show(actual)}`;
}

function jsonType(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function show(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
