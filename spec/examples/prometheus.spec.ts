/**
 * examples/prometheus.ts serves the pool's OpenTelemetry metrics to Prometheus: scraped once while its load runs,
 * `/metrics` holds every connection pool metric under its Prometheus name (dots as underscores; the unit in a
 * `# UNIT` line, not a suffix; histograms as `_bucket`/`_sum`/`_count` in seconds) with the pool name label and
 * values that fit the pool (5 connections, 20 workers); then the example shuts everything down and exits 0 by itself,
 * its port closed. A bad argument exits 2 with the reason and the usage line.
 */
import { expect } from 'chai';
import * as http from 'node:http';
import * as net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { DB_CLIENT_CONNECTION_TIME_BUCKETS } from '../../lib/opentelemetry';
import { lastJsonLine, runExample, startExample } from './run-example';

/** One sample line of the Prometheus text format: `name{label="value",...} value`. */
interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** The samples of a Prometheus text exposition (the label values here hold no escaped quotes). */
function samples(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      expect(match, `a sample line: ${line}`).to.not.equal(null);
      const labels: Record<string, string> = {};
      for (const [, key, value] of (match![2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[key] = value;
      return { name: match![1], labels, value: Number(match![3]) };
    });
}

/** GETs `url` on a connection of its own (closed after), resolving with the status, content type and body. */
function scrape(url: string): Promise<{ status: number; contentType: string; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (response) => {
        let body = '';
        response.setEncoding('utf8').on('data', (d: string) => (body += d));
        response.on('end', () => resolve({ status: response.statusCode!, contentType: String(response.headers['content-type']), body }));
      })
      .on('error', reject);
  });
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

const STACK_FRAME = /^\s+at /m;

describe('examples/prometheus.ts', function () {
  this.timeout(20_000);

  // The embedded endpoint, whatever the environment says: the labels below name it.
  let savedUri: string | undefined;
  before(() => {
    savedUri = process.env.MONGODB_URI;
    delete process.env.MONGODB_URI;
  });
  after(() => {
    if (savedUri !== undefined) process.env.MONGODB_URI = savedUri;
  });

  it('serves every pool metric under its Prometheus name with the pool name label while the load runs, then exits 0 with its port closed', async function () {
    const example = startExample('prometheus.ts', ['--seconds', '2', '--pool-name', 'orders']);
    const url = await example.waitForLine(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/, 10_000);
    const port = Number(new URL(url).port);
    await sleep(500); // the load is running: 20 workers on 5 connections
    const scraped = await scrape(url);
    const scrapedAt = Date.now();

    expect(scraped.status).to.equal(200);
    expect(scraped.contentType).to.match(/^text\/plain/);
    const text = scraped.body;
    const types: Record<string, string> = {
      db_client_connection_count: 'gauge',
      db_client_connection_idle_max: 'gauge',
      db_client_connection_idle_min: 'gauge',
      db_client_connection_max: 'gauge',
      db_client_connection_pending_requests: 'gauge',
      db_client_connection_create_time: 'histogram',
      db_client_connection_wait_time: 'histogram',
      db_client_connection_use_time: 'histogram',
    };
    for (const [name, type] of Object.entries(types)) {
      expect(text, name).to.include(`\n# TYPE ${name} ${type}\n`);
      expect(text, name).to.include(`\n# UNIT ${name} ${type === 'histogram' ? 's' : name.endsWith('pending_requests') ? '{request}' : '{connection}'}\n`);
    }
    // The exporter keeps the unit out of the name: no _seconds suffix. No checkout timed out: no timeouts sample yet.
    expect(text).to.not.match(/^db_client_connection_\w*seconds/m);
    expect(text).to.not.match(/^db_client_connection_timeouts/m);

    const pool = samples(text).filter((s) => s.name.startsWith('db_client_connection_'));
    expect(new Set(pool.map((s) => s.name))).to.deep.equal(
      new Set([
        ...Object.keys(types).filter((n) => types[n] === 'gauge'),
        ...['create_time', 'wait_time', 'use_time'].flatMap((n) => ['_bucket', '_sum', '_count'].map((s) => `db_client_connection_${n}${s}`)),
      ]),
    );
    for (const s of pool) {
      expect(s.labels, s.name).to.include({ db_client_connection_pool_name: `orders/127.0.0.1:${s.labels.server_port}`, server_address: '127.0.0.1' });
      expect(s.labels.server_port, s.name).to.match(/^\d+$/);
      expect(s.value, s.name).to.be.a('number').and.not.be.NaN;
    }
    const one = (name: string, labels: Record<string, string> = {}): number => {
      const found = pool.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
      expect(found, `${name} ${JSON.stringify(labels)}`).to.have.lengthOf(1);
      return found[0].value;
    };

    // The configured limits: maxPoolSize 5, minPoolSize 1.
    expect(one('db_client_connection_max')).to.equal(5);
    expect(one('db_client_connection_idle_max')).to.equal(5);
    expect(one('db_client_connection_idle_min')).to.equal(1);
    // 20 workers each holding a connection 1-10 ms: the connections are in use, the other workers wait.
    expect(pool.filter((s) => s.name === 'db_client_connection_count').map((s) => s.labels.db_client_connection_state).sort()).to.deep.equal([
      'idle',
      'used',
    ]);
    const used = one('db_client_connection_count', { db_client_connection_state: 'used' });
    const idle = one('db_client_connection_count', { db_client_connection_state: 'idle' });
    expect(used, 'used').to.be.within(1, 5);
    expect(used + idle, 'used + idle').to.be.within(1, 5);
    expect(one('db_client_connection_pending_requests')).to.be.within(0, 20 - used);

    // The histograms: cumulative buckets at the advised boundaries (seconds), +Inf equal to the count.
    for (const name of ['create_time', 'wait_time', 'use_time'].map((n) => `db_client_connection_${n}`)) {
      const buckets = pool.filter((s) => s.name === `${name}_bucket`);
      expect(buckets.map((b) => b.labels.le), name).to.deep.equal([...DB_CLIENT_CONNECTION_TIME_BUCKETS.map(String), '+Inf']);
      const counts = buckets.map((b) => b.value);
      expect(counts, name).to.deep.equal([...counts].sort((a, b) => a - b));
      expect(counts.at(-1), name).to.equal(one(`${name}_count`));
    }
    expect(one('db_client_connection_create_time_count'), 'connections created').to.be.within(1, 5);
    expect(one('db_client_connection_wait_time_count'), 'checkouts').to.be.at.least(5);
    const uses = one('db_client_connection_use_time_count');
    expect(uses, 'check-ins').to.be.at.least(1);
    // Each use holds the connection at least 1 ms (and far less than a second): the values are seconds, not ms.
    expect(one('db_client_connection_use_time_sum') / uses, 'mean use time, s').to.be.within(0.001, 1);

    // The commands' durations: the workers' pings on admin, by command, in seconds.
    const operations = samples(text).filter((s) => s.name.startsWith('db_client_operation_duration'));
    expect(text).to.include('\n# TYPE db_client_operation_duration histogram\n');
    const pingCount = operations.find((s) => s.name === 'db_client_operation_duration_count' && s.labels.db_operation_name === 'ping');
    expect(pingCount?.labels).to.include({ db_system_name: 'mongodb', db_namespace: 'admin', server_address: '127.0.0.1' });
    expect(pingCount!.value, 'pings measured').to.be.at.least(uses);

    const { code, signal, stdout, stderr } = await example.exited(8_000);
    const exitedAfterMS = Date.now() - scrapedAt;
    expect(signal, stderr).to.equal(null);
    expect(code, stderr).to.equal(0);
    expect(stderr).to.equal('');
    const summary = lastJsonLine(stdout);
    expect(summary.scrapes).to.equal(1);
    expect(summary.checkouts).to.be.greaterThan(uses);
    expect(summary.failedCheckouts).to.deep.equal({});
    // The load ends 1.5 s after the scrape; the exit follows promptly: nothing is left holding the process open.
    expect(exitedAfterMS, 'ms from the scrape to the exit').to.be.below(4_000);
    expect(await listening(port), 'the metrics port after the exit').to.equal(false);
  });

  it('a bad value or an unknown flag gives the reason and the usage line on stderr, exit 2, and no stack trace', async function () {
    // One bad value (checked by the example) and one unknown flag (refused by parseArgs): each case is a process.
    const cases: [string[], RegExp][] = [
      [['--port', '70000'], /--port must be an integer from 0 to 65535 \(0: any free port\), got "70000"/],
      [['--bogus'], /Unknown option '--bogus'/],
    ];
    const runs = await Promise.all(cases.map(([args]) => runExample('prometheus.ts', args)));
    runs.forEach(({ code, stdout, stderr }, i) => {
      const [args, reason] = cases[i];
      const why = `${args.join(' ')}\n${stderr}`;
      expect(code, why).to.equal(2);
      expect(stdout, why).to.equal('');
      const lines = stderr.trimEnd().split('\n');
      expect(lines, why).to.have.lengthOf(2);
      expect(lines[0], why).to.match(/^prometheus: /).and.match(reason);
      expect(lines[1], why).to.match(/^usage: prometheus /);
      expect(stderr, why).to.not.match(STACK_FRAME);
    });
  });
});
