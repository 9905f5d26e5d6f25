import { expect } from 'chai';
import { IoTimeout, MAX_IO_TIMEOUT_READ_TURNS } from '../../lib/connection/io-timeout';

describe('IoTimeout', function () {
  /** Runs `tick` once in every turn of the event loop (check phase) until the returned stop function is called. */
  function everyTurn(tick: () => void): () => void {
    let on = true;
    const turn = (): void => {
      if (!on) return;
      tick();
      setImmediate(turn);
    };
    setImmediate(turn);
    return () => (on = false);
  }

  it('times out within a bounded number of loop turns when bytes keep arriving in every turn after the delay', async function () {
    // A server that trickles a reply faster than the loop turns (a busy process turns every few ms) adds bytes in every
    // turn: those arrived after the deadline and must not postpone it for as long as the trickle lasts.
    let bytes = 0;
    let turnsAfterExpiry = 0;
    let expiredAt: number | undefined;
    const stop = everyTurn(() => {
      bytes += 1;
      if (expiredAt !== undefined) turnsAfterExpiry += 1;
    });
    let timeout: IoTimeout | undefined;
    try {
      const outcome = await Promise.race([
        new Promise<string>((resolve) => {
          timeout = new IoTimeout(() => resolve('timed out'), 10, () => {
            expiredAt ??= performance.now();
            return bytes;
          });
        }),
        new Promise<string>((resolve) => setTimeout(resolve, 1000, 'still waiting 1 s later')),
      ]);
      expect(outcome).to.equal('timed out');
      expect(turnsAfterExpiry).to.be.at.most(MAX_IO_TIMEOUT_READ_TURNS + 1);
    } finally {
      stop();
      timeout?.clear();
    }
  });

  it('still waits for a long reply read over several turns (each turn reading more)', async function () {
    let bytes = 0;
    let reads = 0;
    const stop = everyTurn(() => {
      if (reads < 5) bytes += 2 * 1024 * 1024;
      reads += 1;
    });
    try {
      await new Promise<void>((resolve) => new IoTimeout(resolve, 10, () => bytes));
      expect(reads).to.be.at.least(5);
    } finally {
      stop();
    }
  });
});
