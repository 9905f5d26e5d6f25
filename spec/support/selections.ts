/**
 * What the tests of a client's server selection look at inside it.
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { CommandCancelledError, type Client } from '../../lib';
import { eventually } from './endpoint';

/** How many server selections of `c` wait for a ready server (its private Set of them). */
export const selectionsWaiting = (c: Client): number => (c as unknown as { selections: Set<unknown> }).selections.size;

/**
 * Starts `call(signal)` on `c`, a client with no ready server whose selection waits long (10 s or more), waits until
 * its selection waits, aborts the signal, and checks what a call cancelled there gives: CommandCancelledError at once
 * (below 2000 ms), with no address, `sent` false and the signal's reason as `cause`; the selection left; one listener
 * on the signal while it waited, none once it settled. Resolves to the error.
 */
export async function cancelledWhileSelecting(c: Client, call: (signal: AbortSignal) => Promise<unknown>): Promise<unknown> {
  const controller = new AbortController();
  const settled = call(controller.signal).catch((e: unknown) => e);
  expect(await eventually(() => selectionsWaiting(c) === 1)).to.equal(true);
  expect(getEventListeners(controller.signal, 'abort').length, 'listeners while it waits').to.equal(1);
  const abortedAt = performance.now();
  controller.abort();
  const error = await settled;
  expect(performance.now() - abortedAt, 'ms from the abort to the rejection (the selection waits 10 s or more)').to.be.below(2000);
  expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ address: undefined, sent: false, cause: controller.signal.reason });
  expect(selectionsWaiting(c), 'selections still waiting').to.equal(0);
  expect(getEventListeners(controller.signal, 'abort').length, 'listeners once it settled').to.equal(0);
  return error;
}
