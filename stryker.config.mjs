// Mutation testing, of one layer at a time against the specs that exercise it:
// - `npm run test:mutation`: the pool core (lib/pool), against its unit, property and CMAP format tests;
// - `npm run test:mutation:wire` (STRYKER_SCOPE=wire): the wire layer (message framing, OP_MSG, OP_COMPRESSED);
// - `npm run test:mutation:monitor` (STRYKER_SCOPE=monitor): the server monitor (heartbeats, streaming, RTT);
// - `npm run test:mutation:handshake` (STRYKER_SCOPE=handshake): establishment, the handshake and authentication;
// - `npm run test:mutation:proxy` (STRYKER_SCOPE=proxy): the SOCKS5 proxy options and exchange;
// - `npm run test:mutation:observability` (STRYKER_SCOPE=observability): the log messages and the OpenTelemetry
//   metrics;
// - `npm run test:mutation:configuration` (STRYKER_SCOPE=configuration): the connection string, the options and their
//   checks, read preferences, the addresses, and the connection and TLS options;
// - `npm run test:mutation:client` (STRYKER_SCOPE=client): the client (connect, server selection, command, timeoutMS)
//   and the default wiring of a ConnectionPool (connections, the log feed);
// - `npm run test:mutation:testing` (STRYKER_SCOPE=testing): `rxcmap/testing`, the doubles applications test against
//   (the embedded endpoint, fail points, SCRAM users, mock connections, the virtual clock).
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(fileURLToPath(import.meta.url));

// The CMAP format tests read the official JSON files beside the repository (../shared/spec-tests/cmap-format). The
// tests run in a copy of the repository under .stryker-tmp/, where that relative path leads nowhere, so the
// directory is handed to them absolutely (the test runner processes inherit this environment).
process.env.CMAP_SPEC_DIR ??= path.resolve(root, '../shared/spec-tests/cmap-format');

/** What each scope mutates, the specs that exercise it, and where its reports go. */
const scopes = {
  pool: {
    mutate: ['lib/pool/**/*.ts'],
    // With the specs that watch the pool from outside: the diagnostics channels' traces and the metrics read from
    // events$ are pool behaviour too (trace outcomes, ConnectionCheckedIn.duration).
    spec: ['spec/pool/**/*.spec.ts', 'spec/cmap/**/*.spec.ts', 'spec/diagnostics-channels.spec.ts', 'spec/opentelemetry/metrics.spec.ts'],
    reports: 'reports/mutation',
  },
  wire: {
    mutate: ['lib/connection/wire-protocol.ts', 'lib/connection/op-msg.ts', 'lib/connection/op-compressed.ts'],
    // With OP_COMPRESSED negotiation (connect) and the exhaust (moreToCome) replies.
    spec: [
      'spec/connection/wire-protocol.spec.ts',
      'spec/connection/wire-protocol.fuzz.spec.ts',
      'spec/connection/malformed-replies.spec.ts',
      'spec/connection/hostile-server.spec.ts',
      'spec/connection/connection.spec.ts',
      'spec/connection/connect.spec.ts',
      'spec/connection/exhaust.spec.ts',
    ],
    reports: 'reports/mutation-wire',
  },
  monitor: {
    mutate: ['lib/monitor/**/*.ts'],
    // With the client, which runs a monitor per pool and clears the pool on its heartbeat failures.
    spec: ['spec/monitor/**/*.spec.ts', 'spec/client/client.spec.ts', 'spec/client/server-monitoring-mode.spec.ts'],
    reports: 'reports/mutation-monitor',
  },
  handshake: {
    mutate: ['lib/connection/connect.ts', 'lib/connection/handshake.ts', 'lib/auth/**/*.ts'],
    // With every spec that establishes connections under a condition of its own: the options checked when a factory
    // is made, TCP keepalive, TLS options, TCP faults and I/O timeouts, hostile and malformed hello replies, and
    // load-balanced mode (the serviceId a hello must carry).
    spec: [
      'spec/connection/**/*.spec.ts',
      'spec/options.spec.ts',
      'spec/pool/load-balanced.spec.ts',
      'spec/auth/**/*.spec.ts',
      'spec/client/append-metadata.spec.ts',
      'spec/client/re-authentication.spec.ts',
    ],
    reports: 'reports/mutation-handshake',
  },
  proxy: {
    mutate: ['lib/connection/socks5.ts', 'lib/connection/proxy.ts'],
    // With the URI's proxy keys, which the connection string parser checks with the same rules.
    spec: ['spec/connection/socks5.spec.ts', 'spec/connection/proxy.spec.ts', 'spec/connection-string.spec.ts'],
    reports: 'reports/mutation-proxy',
  },
  observability: {
    mutate: ['lib/logging/**/*.ts', 'lib/opentelemetry/**/*.ts'],
    // With the specs that read log$ or the metrics from outside: the client's log messages, the logging options, the
    // leak messages, the command messages, and the examples that export the metrics (Prometheus) and draw the pool
    // from its events and messages.
    spec: [
      'spec/logging/**/*.spec.ts',
      'spec/opentelemetry/**/*.spec.ts',
      'spec/connection/command-events.spec.ts',
      'spec/client/client.spec.ts',
      'spec/options.spec.ts',
      'spec/pool/leak-detection.spec.ts',
      'spec/examples/live-view.spec.ts',
      'spec/examples/prometheus.spec.ts',
    ],
    reports: 'reports/mutation-observability',
  },
  configuration: {
    mutate: [
      'lib/connection-string.ts',
      'lib/options.ts',
      'lib/read-preference.ts',
      'lib/own-field.ts',
      'lib/address.ts',
      'lib/connection/connection-options.ts',
      'lib/connection/tls-options.ts',
    ],
    // With the specs that hand options in through the public calls: the client (URIs, timeoutMS), the monitoring
    // mode, TCP keepalive and the TLS files.
    spec: [
      'spec/connection-string.spec.ts',
      'spec/connection-string.fuzz.spec.ts',
      'spec/options.spec.ts',
      'spec/options.fuzz.spec.ts',
      'spec/read-preference.spec.ts',
      'spec/client/read-preference-selection.spec.ts',
      'spec/address.spec.ts',
      'spec/connection/tls-options.spec.ts',
      'spec/connection/keep-alive.spec.ts',
      'spec/client/client.spec.ts',
      'spec/client/server-monitoring-mode.spec.ts',
    ],
    reports: 'reports/mutation-configuration',
  },
  client: {
    mutate: ['lib/client/**/*.ts'],
    // With the specs that run pools through ConnectionPool or connect(): the log messages of the pool and the client,
    // the log destinations a pool opens and closes, the options, the monitor, the CMAP tests and prose, load-balanced
    // mode, leak detection and the traces.
    spec: [
      'spec/client/**/*.spec.ts',
      'spec/logging/log-message.spec.ts',
      'spec/logging/log-sink.spec.ts',
      'spec/options.spec.ts',
      'spec/connection-string.spec.ts',
      'spec/monitor/monitor.spec.ts',
      'spec/cmap/cmap-format.spec.ts',
      'spec/cmap/prose.spec.ts',
      'spec/pool/load-balanced.spec.ts',
      'spec/pool/leak-detection.spec.ts',
      'spec/diagnostics-channels.spec.ts',
    ],
    reports: 'reports/mutation-client',
  },
  testing: {
    mutate: ['lib/testing/**/*.ts'],
    // With the specs that drive the doubles through the pool, the client and the official driver: fail points in
    // the CMAP tests and the monitor, the awaitable hello of a streaming monitor, SCRAM conversations, load-balanced
    // services, connection faults.
    spec: [
      'spec/testing/**/*.spec.ts',
      'spec/cmap/**/*.spec.ts',
      'spec/auth/**/*.spec.ts',
      'spec/client/re-authentication.spec.ts',
      'spec/connection/connect.spec.ts',
      'spec/connection/tcp-faults.spec.ts',
      'spec/monitor/monitor.spec.ts',
      'spec/monitor/streaming.spec.ts',
      'spec/pool/load-balanced.spec.ts',
    ],
    reports: 'reports/mutation-testing',
  },
};
const scope = scopes[process.env.STRYKER_SCOPE ?? 'pool'];
if (scope === undefined) throw new Error(`STRYKER_SCOPE must be one of ${Object.keys(scopes).join(', ')}, got ${process.env.STRYKER_SCOPE}`);

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  mutate: scope.mutate,
  testRunner: 'mocha',
  // .mocharc.json is read for `require` (ts-node/register/transpile-only) and `extension`; the runner replaces its
  // reporter with its own and runs without mocha's timeout (Stryker's own timeouts below apply per mutant).
  mochaOptions: {
    config: '.mocharc.json',
    spec: scope.spec,
  },
  // Mutants that do not type-check are reported as compile errors and left out of the score.
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  coverageAnalysis: 'perTest',
  // Two cores: one for the test runner, one left for the type checker and the machine.
  concurrency: 1,
  // A mutant may run its tests for 1.5 times their dry-run time plus 5 s (the property test, about 3 s, gets ~9 s).
  timeoutMS: 5000,
  timeoutFactor: 1.5,
  dryRunTimeoutMinutes: 10,
  ignorePatterns: ['/dist', '/docs', '/reports', '/bench/results*'],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: `${scope.reports}/index.html` },
  jsonReporter: { fileName: `${scope.reports}/mutation.json` },
  clearTextReporter: { allowColor: false, logTests: false },
  tempDirName: '.stryker-tmp',
};
