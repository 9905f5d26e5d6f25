/**
 * Reading a token file that an identity platform writes for the process (AWS_WEB_IDENTITY_TOKEN_FILE,
 * AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, OIDC_TOKEN_FILE, Kubernetes' service account token): bounded, and never
 * waiting on something that is not a file.
 *
 * Source: extension (the tokens are a few KiB; STS takes a web identity token of up to 20,000 characters).
 */
import type { Stats } from 'node:fs';
import type * as FsPromises from 'node:fs/promises';
import { withPermissionRefusal } from '../permission-model';

/** The most a token file may hold, in bytes; a longer one is refused, read no further. */
export const MAX_TOKEN_FILE_BYTES = 65_536;

/**
 * The text (UTF-8, as written) of token file `file`, which the errors call `name`. node:fs/promises is loaded on the
 * first call, not with the package (only these mechanisms need it).
 *
 * @throws the error `fail(why, cause?)` builds, with `why` one of `${name} cannot be read` (a file that cannot be
 *   opened or read; `cause` an Error giving only the system error's name and code, never its message; the flag to
 *   give where Node's permission model refused the open), `${name} is not a
 *   regular file` (a FIFO, a device such as /dev/zero, a directory: opened without waiting and never read, since a FIFO
 *   no one writes to would hold the authentication, and a libuv thread, for ever, and a device could fill the memory),
 *   or `${name} holds more than 65536 bytes`.
 */
export async function readTokenFile(file: string, name: string, fail: (why: string, cause?: Error) => Error): Promise<string> {
  const fs = require('node:fs/promises') as typeof FsPromises;
  const systemError = (error: unknown): Error => {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    return new Error(`${error instanceof Error ? error.name : typeof error}${typeof code === 'string' ? ` ${code}` : ''} (message not shown)`);
  };
  let handle: FsPromises.FileHandle;
  try {
    handle = await fs.open(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (error) {
    // Node's permission model (`--permission`) refuses the open of a file outside what --allow-fs-read allows.
    throw fail(withPermissionRefusal(`${name} cannot be read`, error), systemError(error));
  }
  try {
    let stat: Stats;
    try {
      stat = await handle.stat();
    } catch (error) {
      throw fail(`${name} cannot be read`, systemError(error));
    }
    if (!stat.isFile()) throw fail(`${name} is not a regular file`);
    const buffer = Buffer.alloc(MAX_TOKEN_FILE_BYTES + 1);
    let length = 0;
    for (;;) {
      let bytesRead: number;
      try {
        ({ bytesRead } = await handle.read(buffer, length, buffer.length - length, null));
      } catch (error) {
        throw fail(`${name} cannot be read`, systemError(error));
      }
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > MAX_TOKEN_FILE_BYTES) throw fail(`${name} holds more than ${MAX_TOKEN_FILE_BYTES} bytes`);
    }
    return buffer.toString('utf8', 0, length);
  } finally {
    await handle.close().catch(() => undefined);
  }
}
