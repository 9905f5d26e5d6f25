/**
 * Round-trip time of a monitored server: the samples a monitor keeps, and the task that measures them on a dedicated
 * connection while the monitor streams.
 *
 * Source: server monitoring spec, "Measuring RTT", "RTT thread", "Monitors MUST use a dedicated connection for RTT
 * commands", "Monitors MUST use the hello or legacy hello command to measure RTT", "Why don't clients mark a server
 * unknown when an RTT command fails?", "Why don't streaming hello or legacy hello clients publish events for RTT
 * commands?".
 */
import type { SchedulerLike, Subscription } from 'rxjs';
import type { Connection } from '../connection/connection';
import { helloCommandName } from '../connection/handshake';
import { destroyQuietly } from '../pool/connection-checks';
import type { ConnectionFactory } from '../pool/contract';
import { establish } from './establish';

/**
 * How many of the latest RTT samples the minimum is taken over: 10.
 *
 * Source: server monitoring spec, "Measuring RTT" ("the minimum RTT out of the (at most) last 10 samples").
 */
export const RTT_SAMPLE_WINDOW = 10;

/**
 * The RTT sample of a check or RTT round, in ms: a new connection's `handshakeDurationMS` (its handshake hello's
 * duration) when that is a number from 0 to `establishedMS`, the round's whole duration on the monitor's clock, which
 * contains that hello; `establishedMS` otherwise: none recorded (a command on an established connection), or a value
 * no hello inside that establishment can take (negative, NaN, longer, not a number: set by a connectionFactory of the
 * user's, or measured on another clock).
 *
 * Source: server monitoring spec, "Measuring RTT" (the hello duration of the initial connection handshake).
 */
export function handshakeSample(handshakeDurationMS: unknown, establishedMS: number): number {
  return typeof handshakeDurationMS === 'number' && handshakeDurationMS >= 0 && handshakeDurationMS <= establishedMS ? handshakeDurationMS : establishedMS;
}

/**
 * The weighting factor of the newest sample in a server's average RTT: 0.2. Source: server selection spec,
 * "Calculation of Average Round Trip Times".
 */
export const RTT_ALPHA = 0.2;

/**
 * A server's average RTT after a sample of `sampleMS` (ms), from `averageMS` (ms; undefined: none yet, the server
 * having just become available): the sample itself first, then the exponentially weighted moving average
 * `0.2 × sample + 0.8 × average`.
 *
 * Source: server selection spec, "Calculation of Average Round Trip Times" (its tests/rtt cases).
 */
export function nextAverageRoundTripTime(averageMS: number | undefined, sampleMS: number): number {
  return averageMS === undefined ? sampleMS : RTT_ALPHA * sampleMS + (1 - RTT_ALPHA) * averageMS;
}

/**
 * The latest RTT samples (at most {@link RTT_SAMPLE_WINDOW}) and their average, in ms.
 *
 * Source: server monitoring spec, "Measuring RTT", "RTT thread"; server selection spec, "Calculation of Average
 * Round Trip Times".
 */
export class RoundTripTimes {
  private readonly samples: number[] = [];
  private averageMS: number | undefined;

  /** Records one sample, in ms (a negative or non-finite one, from a clock that went back, counts as 0). */
  add(ms: number): void {
    const sample = Number.isFinite(ms) && ms > 0 ? ms : 0;
    this.samples.push(sample);
    if (this.samples.length > RTT_SAMPLE_WINDOW) this.samples.shift();
    this.averageMS = nextAverageRoundTripTime(this.averageMS, sample);
  }

  /** Forgets every sample and the average (after a failed check: the server is Unknown, and has no average RTT). */
  reset(): void {
    this.samples.length = 0;
    this.averageMS = undefined;
  }

  /**
   * The average of the samples since the last reset (see {@link nextAverageRoundTripTime}), in ms; undefined with
   * none.
   */
  get average(): number | undefined {
    return this.averageMS;
  }

  /** The smallest of the latest 10 samples, in ms; 0 until there are 2. */
  get min(): number {
    return this.samples.length < 2 ? 0 : Math.min(...this.samples);
  }
}

/**
 * The RTT task of a streaming monitor: every heartbeatFrequencyMS, a `hello` (legacy hello when the server did not
 * answer helloOk and the connection declares no Stable API version) on its own dedicated, unauthenticated connection, whose duration is a sample; a new connection's
 * handshake's hello is the sample instead (the connection's `handshakeDurationMS`; the whole establishment's duration
 * for a connection that does not record it). Publishes no event; an error only closes its connection (the
 * next round opens a new one) and never touches the server's state or the samples already taken. Each command's
 * timeout is connectTimeoutMS. The first round comes heartbeatFrequencyMS after start (the monitoring connection's
 * handshake is the first sample).
 *
 * Source: server monitoring spec, "Measuring RTT", "RTT thread"; the delayed first round is an extension.
 *
 * @internal
 */
export class RttMonitor {
  private connection: Connection | undefined;
  private establishing: Subscription | undefined;
  private timer: Subscription | undefined;
  private closed = false;
  private started = false;

  constructor(
    private readonly o: {
      readonly address: string;
      readonly factory: ConnectionFactory<Connection>;
      readonly heartbeatFrequencyMS: number;
      readonly connectTimeoutMS: number;
      readonly scheduler: SchedulerLike;
      readonly samples: RoundTripTimes;
    },
  ) {}

  /** Its connections open or being established: 0 or 1. */
  get connectionCount(): number {
    return this.connection !== undefined || this.establishing !== undefined ? 1 : 0;
  }

  /** Starts the rounds (the first heartbeatFrequencyMS from now). Idempotent. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    this.schedule();
  }

  /** Stops the rounds and closes the RTT connection (one being established too). Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.timer?.unsubscribe();
    this.establishing?.unsubscribe();
    destroyQuietly(this.connection);
    this.connection = undefined;
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = this.o.scheduler.schedule(() => void this.round().finally(() => this.schedule()), this.o.heartbeatFrequencyMS);
  }

  /** One measurement. Never rejects. */
  private async round(): Promise<void> {
    const { scheduler, samples } = this.o;
    const started = scheduler.now();
    try {
      let handshakeDurationMS: unknown;
      if (this.connection === undefined) {
        const { connection, subscription } = establish(this.o.factory, this.o.address, 1, () => this.closed);
        this.establishing = subscription;
        const established = await connection.finally(() => (this.establishing = undefined));
        if (this.closed) return destroyQuietly(established);
        this.connection = established;
        handshakeDurationMS = established.handshakeDurationMS;
      } else {
        const command = { [helloCommandName(this.connection.server.helloOk, this.connection.serverApi !== undefined)]: 1 };
        await this.connection.command('admin', command, { timeoutMS: this.o.connectTimeoutMS });
      }
      // A new connection's sample is its handshake's hello, without the socket connect and TLS handshake before it.
      if (!this.closed) samples.add(handshakeSample(handshakeDurationMS, scheduler.now() - started));
    } catch {
      destroyQuietly(this.connection);
      this.connection = undefined;
    }
  }
}
