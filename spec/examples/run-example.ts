/**
 * Runs an example program of examples/ as a child process, the way a user does (`ts-node --transpile-only`), for
 * the specs that check its output and exit code; or on a pseudo-terminal, for those that check what it draws there.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as path from 'node:path';

const root = path.resolve(__dirname, '../..');

/** What a finished example left: its exit code (null when a signal ended it), signal, and output. */
export interface ExampleResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A running example: its process, its output so far, and its end. */
export interface RunningExample {
  readonly child: ChildProcessWithoutNullStreams;
  /** stdout so far. */
  stdout(): string;
  /** stderr so far. */
  stderr(): string;
  /** Resolves with the first stdout line matching `pattern`; rejects if the process ends first or after `ms`. */
  waitForLine(pattern: RegExp, ms: number): Promise<string>;
  /** Resolves when the process exits; rejects (after SIGKILL) if it is still running after `ms`. */
  exited(ms: number): Promise<ExampleResult>;
}

/** How an example is started beyond its arguments. */
export interface ExampleOptions {
  /** Variables set (or, `undefined`, removed) in the child's environment, a copy of this process's. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Modules the child loads first (`node -r`), paths from the repository's root. */
  readonly preload?: readonly string[];
}

/** Starts `examples/<file>` with `args`. */
export function startExample(file: string, args: readonly string[] = [], options: ExampleOptions = {}): RunningExample {
  const env = { ...process.env, ...options.env };
  for (const [name, value] of Object.entries(options.env ?? {})) if (value === undefined) delete env[name];
  const preload = (options.preload ?? []).flatMap((module) => ['-r', `./${module}`]);
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', ...preload, path.join('examples', file), ...args], {
    cwd: root,
    env,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exit = new Promise<ExampleResult>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });

  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    waitForLine(pattern, ms) {
      return new Promise<string>((resolve, reject) => {
        const check = (): boolean => {
          const line = stdout.split('\n').find((l) => pattern.test(l));
          if (line === undefined) return false;
          done();
          resolve(line);
          return true;
        };
        const onData = (): void => void check();
        const onClose = (): void => {
          if (check()) return;
          done();
          reject(new Error(`examples/${file} exited before printing a line matching ${pattern}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`examples/${file} printed no line matching ${pattern} within ${ms} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
        }, ms);
        const done = (): void => {
          clearTimeout(timer);
          child.stdout.off('data', onData);
          child.off('close', onClose);
        };
        child.stdout.on('data', onData);
        child.on('close', onClose);
        check();
      });
    },
    exited(ms) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`examples/${file} did not exit within ${ms} ms (open handles?)\nstdout:\n${stdout}\nstderr:\n${stderr}`));
        }, ms);
      });
      return Promise.race([exit, timedOut]).finally(() => clearTimeout(timer));
    },
  };
}

/** Runs `examples/<file>` with `args` to its end (killed, and rejected, after `ms`). */
export function runExample(file: string, args: readonly string[] = [], ms = 15_000, options: ExampleOptions = {}): Promise<ExampleResult> {
  return startExample(file, args, options).exited(ms);
}

/** The last non-empty stdout line, parsed as JSON. */
export function lastJsonLine(stdout: string): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]) as Record<string, unknown>;
}

/** Why examples cannot run on a pseudo-terminal here (no util-linux `script`), or undefined when they can. */
export function noPseudoTerminal(): string | undefined {
  const probe = spawnSync('script', ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) return 'util-linux `script` is not installed (needed for a pseudo-terminal)';
  return undefined;
}

/** A running example on a pseudo-terminal: its process (`script`), everything the terminal received, its end. */
export interface TerminalExample {
  readonly child: ChildProcessWithoutNullStreams;
  /** Everything written to the terminal so far (stdout and stderr, as a terminal receives them: `\n` as `\r\n`). */
  output(): string;
  /** Types `text` on the terminal's keyboard (e.g. `\x03`, Ctrl-C, which the terminal turns into SIGINT). */
  type(text: string): void;
  /** Resolves when the output matches `pattern`; rejects if the process ends first or after `ms`. */
  waitFor(pattern: RegExp, ms: number): Promise<void>;
  /** Resolves with the exit code (130 after SIGINT) and output; rejects (after SIGKILL) after `ms`. */
  exited(ms: number): Promise<{ code: number | null; output: string }>;
}

/**
 * Starts `examples/<file>` with `args` with stdin, stdout and stderr on a pseudo-terminal of `columns` x `rows`,
 * through util-linux `script` (`-e`: its exit code is the example's). Check {@link noPseudoTerminal} first.
 */
export function startExampleInTerminal(
  file: string,
  args: readonly string[],
  size: { columns: number; rows: number },
): TerminalExample {
  const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  const argv = [process.execPath, '-r', 'ts-node/register/transpile-only', path.join('examples', file), ...args];
  const command = argv.map(quote).join(' ');
  const env = { ...process.env };
  delete env.MONGODB_URI;
  const child = spawn('script', ['-q', '-e', '-c', `stty cols ${size.columns} rows ${size.rows} && exec ${command}`, '/dev/null'], {
    cwd: root,
    env,
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
  const exit = new Promise<{ code: number | null; output: string }>((resolve) => {
    child.on('close', (code) => resolve({ code, output }));
  });
  const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`examples/${file} ${what} within ${ms} ms\noutput:\n${JSON.stringify(output)}`)), ms);
    });
    return Promise.race([promise, timedOut]).finally(() => clearTimeout(timer));
  };
  return {
    child,
    output: () => output,
    type: (text) => void child.stdin.write(text),
    waitFor(pattern, ms) {
      const seen = new Promise<void>((resolve, reject) => {
        const check = (): void => {
          if (!pattern.test(output)) return;
          child.stdout.off('data', check);
          resolve();
        };
        child.stdout.on('data', check);
        void exit.then(() => {
          if (pattern.test(output)) resolve();
          else reject(new Error(`examples/${file} exited before printing ${pattern}\noutput:\n${JSON.stringify(output)}`));
        });
        check();
      });
      return within(seen, ms, `printed nothing matching ${pattern}`);
    },
    exited(ms) {
      return within(exit, ms, 'did not exit').catch((error: unknown) => {
        child.kill('SIGKILL');
        throw error;
      });
    },
  };
}
