/**
 * examples/tracing.ts turns the pool's diagnostics channels into OpenTelemetry spans: in the tree it prints, every
 * `operation` holds its `checkOut` span (a child, checked out, ended before the `ping` span starts), then `ping`,
 * then the `checkIn` event, all on the same connection; there is one `establish` span per ConnectionCreated, each a
 * child of the checkout whose processing started it; a checkout on a closed pool gives a `checkOut` span with status
 * ERROR (PoolClosedError). Bad arguments exit 2 with the usage line; an unreachable server exits 1 with the reason.
 *
 * The server is MONGODB_URI when set (the example honours it), else the example's embedded endpoint.
 */
import { expect } from 'chai';
import * as net from 'node:net';
import { lastJsonLine, runExample, type ExampleResult } from './run-example';

/** One line of the printed tree: a span (with its children and events) or an event. */
interface Node {
  readonly kind: 'span' | 'event';
  readonly name: string;
  /** ms from the first span's start. */
  readonly start: number;
  /** ms; an event's end is its start. */
  readonly end: number;
  /** What follows the name. */
  readonly details: string;
  readonly children: Node[];
  readonly parent: Node | undefined;
}

/** `+<start> ms <duration> ms  <indent><name><details>`, or `+<start> ms        event  <indent>  <name><details>`. */
const LINE = /^\+\s*(\d+\.\d{3}) ms\s+(?:(\d+\.\d{3}) ms|event)  ( *)(\S+)(.*)$/;

/** The roots of the printed tree (every stdout line but the last, the summary), parents found by indentation. */
function parseTree(stdout: string): Node[] {
  const lines = stdout.trimEnd().split('\n').slice(0, -1);
  const roots: Node[] = [];
  const stack: Node[] = []; // stack[d]: the last span at depth d
  for (const line of lines) {
    const match = LINE.exec(line);
    expect(match, `a tree line: ${JSON.stringify(line)}`).to.not.equal(null);
    const [, start, duration, indent, name, details] = match!;
    const kind = duration === undefined ? 'event' : 'span';
    expect(indent.length % 2, `indentation of ${JSON.stringify(line)}`).to.equal(0);
    // An event line is indented one step deeper than the span it belongs to.
    const depth = indent.length / 2 - (kind === 'event' ? 1 : 0);
    expect(depth, `depth of ${JSON.stringify(line)}`).to.be.within(0, stack.length);
    const parent = kind === 'event' ? stack[depth] : stack[depth - 1];
    const node: Node = {
      kind,
      name,
      start: Number(start),
      end: Number(start) + Number(duration ?? 0),
      details,
      children: [],
      parent,
    };
    if (kind === 'event') {
      expect(parent, `the span of event ${JSON.stringify(line)}`).to.not.equal(undefined);
      parent!.children.push(node);
    } else {
      (parent?.children ?? roots).push(node);
      stack.length = depth;
      stack.push(node);
    }
  }
  return roots;
}

/** Every span of the tree, depth first. */
function allSpans(roots: readonly Node[]): Node[] {
  return roots.flatMap((n) => (n.kind === 'span' ? [n, ...allSpans(n.children)] : []));
}

/** The connection id a line names (`connection <id>`), or undefined. */
function connectionOf(node: Node): number | undefined {
  const match = /\bconnection (\d+)\b/.exec(node.details);
  return match === null ? undefined : Number(match[1]);
}

/** Runs the example with MONGODB_URI set to `uri` for its process alone. */
function runWithUri(uri: string, args: string[]): Promise<ExampleResult> {
  const saved = process.env.MONGODB_URI;
  process.env.MONGODB_URI = uri;
  try {
    return runExample('tracing.ts', args); // the child's environment is copied at spawn
  } finally {
    if (saved === undefined) delete process.env.MONGODB_URI;
    else process.env.MONGODB_URI = saved;
  }
}

/** A TCP port on 127.0.0.1 that nothing listens on: it was bound a moment ago and closed. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const STACK_FRAME = /^\s+at /m;

/** ms: an end is printed as start + duration, each rounded to the microsecond, so it may be off by one. */
const ROUNDING = 0.001;

describe('examples/tracing.ts', function () {
  this.timeout(30_000);

  // Every run is a process of its own (a second or two of ts-node each): started together, awaited by each test.
  // 4 operations 2 at a time, then one on the closed pool (--closed-pool): operations #1-#4 are served, #5 fails.
  let runs: { traced: Promise<ExampleResult>; badArg: Promise<ExampleResult>; unreachable: Promise<ExampleResult> };
  before(function () {
    runs = {
      traced: runExample('tracing.ts', ['--operations', '4', '--concurrency', '2', '--closed-pool'], 25_000),
      badArg: runExample('tracing.ts', ['--operations', '0']),
      unreachable: closedPort().then((port) =>
        runWithUri(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=300`, []),
      ),
    };
    // Each test awaits its own run; a rejection before that must not be reported as unhandled.
    for (const run of Object.values(runs)) run.catch(() => undefined);
  });

  /** The tree of the traced run: the four served operations, and the one on the closed pool. */
  async function tracedRun(): Promise<{
    served: Node[];
    failed: Node;
    stdout: string;
    summary: Record<string, unknown>;
  }> {
    const { code, signal, stdout, stderr } = await runs.traced;
    expect(signal, stderr).to.equal(null);
    expect(code, stderr).to.equal(0);
    expect(stderr).to.not.match(STACK_FRAME);
    const roots = parseTree(stdout);
    expect(
      roots.map((r) => r.name),
      stdout,
    ).to.deep.equal(['operation', 'operation', 'operation', 'operation', 'operation']);
    const starts = roots.map((r) => r.start);
    expect(starts, 'roots in start order').to.deep.equal([...starts].sort((a, b) => a - b));
    return { served: roots.slice(0, 4), failed: roots[4], stdout, summary: lastJsonLine(stdout) };
  }

  it('each operation holds its checkOut span (a child, ended before ping starts), then ping, then the checkIn event, on one connection', async function () {
    const { served, stdout, summary } = await tracedRun();
    expect(served.map((r) => r.details.trim()).sort()).to.deep.equal(['#1', '#2', '#3', '#4']);
    for (const operation of served) {
      const why = `operation ${operation.details}\n${stdout}`;
      // The children, in start order: the checkout, the command, the check-in.
      expect(
        operation.children.map((c) => `${c.kind} ${c.name}`),
        why,
      ).to.deep.equal(['span checkOut', 'span ping', 'event checkIn']);
      const [checkOut, ping, checkIn] = operation.children;
      expect(checkOut.details, why).to.match(/ checkedOut$/);
      expect(checkOut.start, why).to.be.at.least(operation.start);
      expect(checkOut.start, why).to.be.below(ping.start);
      expect(checkOut.end, `the checkout ends before ping starts: ${why}`).to.be.at.most(ping.start + ROUNDING);
      expect(ping.end, why).to.be.at.most(checkIn.start + ROUNDING);
      expect(checkIn.start, why).to.be.at.most(operation.end + ROUNDING);
      const connection = connectionOf(checkOut);
      expect(connection, why).to.be.a('number');
      expect([connectionOf(ping), connectionOf(checkIn)], why).to.deep.equal([connection, connection]);
    }

    expect(summary.operations).to.equal(5);
    expect(summary.spans).to.include({ operation: 5, checkOut: 5, ping: 4 });
  });

  it('an establish span for each new connection (as many as ConnectionCreated), a child of the checkout that started it', async function () {
    const { served, failed, stdout, summary } = await tracedRun();
    const spans = allSpans([...served, failed]);
    const establishments = spans.filter((s) => s.name === 'establish');

    expect(establishments, stdout).to.have.lengthOf(summary.connectionsCreated as number);
    // minPoolSize 0: every connection is established for a checkout; 2 at a time, at most one each.
    expect(establishments.length, stdout).to.be.within(1, 2);
    const established = establishments.map(connectionOf);
    expect(new Set(established).size, 'distinct connections').to.equal(established.length);
    for (const establishment of establishments) {
      const why = `${establishment.details}\n${stdout}`;
      expect(establishment.details, why).to.match(/ ready$/);
      // Started inside its checkout's processing: the checkout's span was bound to that synchronous part.
      const checkOut = establishment.parent!;
      expect(checkOut.name, why).to.equal('checkOut');
      expect(checkOut.parent?.name, why).to.equal('operation');
      expect(establishment.start, why).to.be.within(checkOut.start, checkOut.end + ROUNDING);
    }
    expect(summary.establishParents).to.deep.equal({ checkOut: establishments.length });
    // Every connection a checkout handed out was established in this run, and has its span.
    const checkedOut = new Set(
      allSpans(served)
        .filter((s) => s.name === 'checkOut')
        .map(connectionOf),
    );
    for (const id of checkedOut) expect(established, `connection ${id}`).to.include(id);
  });

  it('a checkout on a closed pool gives a checkOut span with status ERROR (PoolClosedError), and the run exits 0', async function () {
    const { failed, stdout, summary } = await tracedRun();
    expect(failed.details, stdout).to.match(/^ #5 ERROR PoolClosedError: /);
    expect(
      failed.children.map((c) => c.name),
      stdout,
    ).to.deep.equal(['checkOut']);
    const [checkOut] = failed.children;
    expect(checkOut.details, stdout).to.match(/ poolClosed ERROR PoolClosedError: .*closed connection pool$/);
    expect(connectionOf(checkOut), 'no connection').to.equal(undefined);
    expect(checkOut.start, stdout).to.be.at.least(failed.start);
    expect(checkOut.end, stdout).to.be.at.most(failed.end + ROUNDING);
    expect(summary).to.include({ operations: 5, failedOperations: 1 });
    expect(summary.errorSpans).to.deep.equal({ checkOut: 1, operation: 1 });
  });

  it('a bad value gives the reason and the usage line on stderr, exit 2, and no stack trace', async function () {
    const { code, stdout, stderr } = await runs.badArg;
    expect(code, stderr).to.equal(2);
    expect(stdout, stderr).to.equal('');
    const lines = stderr.trimEnd().split('\n');
    expect(lines, stderr).to.have.lengthOf(2);
    expect(lines[0], stderr).to.match(/^tracing: --operations must be an integer >= 1, got "0"$/);
    expect(lines[1], stderr).to.match(/^usage: tracing /);
    expect(stderr).to.not.match(STACK_FRAME);
  });

  it('an unreachable server exits 1 with one line naming it, and prints no spans', async function () {
    const { code, stdout, stderr } = await runs.unreachable;
    expect(code, stderr).to.equal(1);
    expect(stdout).to.equal('');
    expect(stderr.trimEnd().split('\n'), stderr).to.have.lengthOf(1);
    expect(stderr).to.match(/^cannot reach 127\.0\.0\.1:\d+ within 300 ms: /);
  });
});
