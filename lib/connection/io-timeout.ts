/**
 * IoTimeout: the timeout of a request on a socket (connectTimeoutMS, socketTimeoutMS, a command's timeoutMS) that
 * reads what the socket already received before it reports a timeout.
 */

/**
 * How many more turns of the event loop an expired {@link IoTimeout} waits at most for what the socket already
 * received: 24, enough to read 48,000,000 bytes (the largest message, more than a socket's receive buffer holds) at
 * the 2 MiB Node reads of a socket in one turn. Bytes still arriving after that came after the deadline: a server that
 * sends a byte in every turn (a trickle, with a busy process turning every few ms) must not hold a command past its
 * timeout for as long as it keeps sending.
 *
 * Source: extension (the timeouts are deadlines: socketTimeoutMS, connectTimeoutMS).
 */
export const MAX_IO_TIMEOUT_READ_TURNS = 24;

/**
 * A timeout on I/O: `onTimeout` runs once `delayMS` ms (a number from 0 to 2147483647, what one Node timer holds) have passed
 * and the I/O pending by then has been read, never before. After the event loop was blocked (a long synchronous
 * computation, a GC pause) Node runs the timers that expired meanwhile before it reads the sockets: a timer alone
 * would report as timed out a reply that arrived during the block and sits unread in the socket. So when the timer
 * expires, `onTimeout` waits for the check phase of that same loop turn (`setImmediate`), which comes after the poll
 * phase that reads what arrived: a reply read there settles its request and clears this timeout first. Without a
 * block this adds no more than one turn of the loop. A long reply is read over several turns (Node reads at most about
 * 2 MiB of a socket in one): with `progress` (a count that grows as bytes of what is awaited are read, e.g. the bytes
 * a socket received; first read as the delay runs out, so it can also note that moment), `onTimeout` waits one more
 * turn each time the last one read more, and runs after the first turn that read nothing, or after
 * {@link MAX_IO_TIMEOUT_READ_TURNS} turns, so a reply that had arrived is read whole, while a server that sends nothing
 * more still times out at once and one that keeps sending bytes times out within those turns. {@link clear} cancels it
 * (idempotent); the Node timer keeps the process alive, as `setTimeout` does.
 *
 * Source: extension (Node's event loop phase order: timers, then poll, then check).
 */
export class IoTimeout {
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  /** The `progress` count when the last turn began. */
  private seen = 0;
  /** The turns waited since the delay ran out. */
  private turns = 0;

  constructor(
    private readonly onTimeout: () => void,
    delayMS: number,
    private readonly progress?: () => number,
  ) {
    this.timer = setTimeout(this.expired, delayMS);
  }

  /** Cancels the timeout: `onTimeout` will not run. */
  clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
  }

  private readonly expired = (): void => {
    this.timer = undefined;
    if (this.progress !== undefined) this.seen = this.progress();
    this.immediate = setImmediate(this.fire);
  };

  private readonly fire = (): void => {
    this.immediate = undefined;
    if (this.progress !== undefined) {
      const count = this.progress();
      if (count !== this.seen && ++this.turns < MAX_IO_TIMEOUT_READ_TURNS) {
        this.seen = count;
        this.immediate = setImmediate(this.fire);
        return;
      }
    }
    this.onTimeout();
  };
}
