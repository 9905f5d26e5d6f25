/**
 * Refusals of Node's permission model (`--permission`; `--experimental-permission` on Node.js 20): the error Node
 * throws is ERR_ACCESS_DENIED, with the scope refused in `permission` for a file system, child process, worker or
 * addon refusal, and none for a network one (a connect, a DNS query: Node.js 25 and later without `--allow-net`).
 * Node.js 20's message names no flag, and a DNS query's names none on any version (`querySrv ERR_ACCESS_DENIED
 * <name>`), so the words here say which flag allows it.
 *
 * Source: extension (Node.js, "Permissions": the permission model's flags).
 */

/** The flag that allows each scope of Node's permission model, by the `permission` of its ERR_ACCESS_DENIED. */
const FLAGS: Readonly<Record<string, string>> = {
  FileSystemRead: 'to read the file (run it with --allow-fs-read for the file)',
  FileSystemWrite: 'to write the file (run it with --allow-fs-write for the file)',
  Net: 'the network (run it with --allow-net)',
  ChildProcess: 'child processes (run it with --allow-child-process)',
  WorkerThreads: 'worker threads (run it with --allow-worker)',
  Addon: 'native addons (run it with --allow-addons)',
  WASI: 'WASI (run it with --allow-wasi)',
};

/**
 * What Node's permission model refused, with the flag that allows it, when `error` (or its `cause`, as a library that
 * wraps the error keeps it) is its refusal: `Node's permission model does not allow this process …`; else undefined.
 * A refusal with no `permission` is a network one.
 */
export function permissionRefusal(error: unknown): string | undefined {
  try {
    return refusal(error);
  } catch {
    // An error whose `code`, `permission` or `cause` getter throws (a foreign error) is no refusal of Node's.
    return undefined;
  }
}

function refusal(error: unknown): string | undefined {
  for (let e = error, depth = 0; e !== null && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code !== 'ERR_ACCESS_DENIED') continue;
    const permission = (e as { permission?: unknown }).permission;
    return denied(typeof permission === 'string' ? (FLAGS[permission] ?? `what it asked (${permission}; run it with the --allow-* flag that allows it)`) : FLAGS.Net);
  }
  return undefined;
}

/** The words for `what` (one of {@link FLAGS}' values) refused by the permission model. */
function denied(what: string): string {
  return `Node's permission model does not allow this process ${what}`;
}

/**
 * `text`, followed by `: ` and {@link permissionRefusal}'s words when `error` is a refusal of Node's permission model
 * and `text` names no `--allow-*` flag already (Node.js 22 and later name one in their own messages, not Node.js 20,
 * nor a DNS query's or a lookup's message on any version).
 */
export function withPermissionRefusal(text: string, error: unknown): string {
  const words = permissionRefusal(error);
  return words === undefined || text.includes('--allow-') ? text : `${text}: ${words}`;
}

/**
 * Whether Node's permission model is on and does not allow this process native addons (`--permission` without
 * `--allow-addons`); false without the model. Where an addon's loader hides the model's refusal behind its own
 * error (snappy's says it found no binding for the platform), this is how to tell.
 */
export function addonsDenied(): boolean {
  const permission = (process as { permission?: { has(scope: string): boolean } }).permission;
  try {
    return permission !== undefined && !permission.has('addon');
  } catch {
    return false;
  }
}

/** The words for native addons refused by the permission model, as {@link permissionRefusal} gives them. */
export const ADDONS_DENIED = denied(FLAGS.Addon);
