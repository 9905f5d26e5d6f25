/**
 * untilAborted: a wait that gives up on its signal, the work it stands for left to settle on its own, and no abort
 * listener left behind.
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { untilAborted } from '../../lib/auth/until-aborted';

const never = new Promise<never>(() => undefined);
const outcome = (work: Promise<unknown>): Promise<unknown> => work.then((v) => ({ value: v }), (e: unknown) => ({ error: e }));

describe('untilAborted', function () {
  it('without a signal is the work itself', function () {
    const work = Promise.resolve(1);
    expect(untilAborted(work, undefined)).to.equal(work);
  });

  it('rejects at once with the reason of a signal aborted already, though the work never settles', async function () {
    const reason = new Error('given up');
    expect(await outcome(untilAborted(never, AbortSignal.abort(reason)))).to.deep.equal({ error: reason });
  });

  it('rejects with the reason once the signal aborts, and keeps no listener on it', async function () {
    const controller = new AbortController();
    const waiting = outcome(untilAborted(never, controller.signal));
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(1);
    const reason = new Error('deadline');
    controller.abort(reason);
    expect(await waiting).to.deep.equal({ error: reason });
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(0);
  });

  it('settles as the work does, then leaves no listener on the signal', async function () {
    const controller = new AbortController();
    expect(await outcome(untilAborted(Promise.resolve('token'), controller.signal))).to.deep.equal({ value: 'token' });
    const failure = new Error('provider failed');
    expect(await outcome(untilAborted(Promise.reject(failure), controller.signal))).to.deep.equal({ error: failure });
    await new Promise((resolve) => setImmediate(resolve));
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(0);
  });
});
