/**
 * listenToAbort: one listener on a caller's signal for every wait it governs, run as an EventTarget runs its own.
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { abortTurn, listenToAbort } from '../lib/abort-listeners';

describe('listenToAbort', function () {
  it('puts one listener on the signal however many are added, and takes it off with the last one removed', function () {
    const controller = new AbortController();
    const removers = Array.from({ length: 25 }, () => listenToAbort(controller.signal, () => undefined));
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(1);
    for (const remove of removers.slice(1)) remove();
    expect(getEventListeners(controller.signal, 'abort'), 'one left').to.have.length(1);
    removers[0]();
    expect(getEventListeners(controller.signal, 'abort'), 'none left').to.have.length(0);
    // A remover called again does nothing, and the signal takes listeners anew.
    removers[0]();
    const ran: number[] = [];
    listenToAbort(controller.signal, () => ran.push(1));
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(1);
    controller.abort();
    expect(ran).to.deep.equal([1]);
  });

  it('runs the listeners once, in the order they were added, skipping those removed before or while they run', function () {
    const controller = new AbortController();
    const ran: string[] = [];
    listenToAbort(controller.signal, () => ran.push('a'));
    const removeB = listenToAbort(controller.signal, () => ran.push('b'));
    listenToAbort(controller.signal, () => {
      ran.push('c');
      removeE(); // later in the order: not run
    });
    listenToAbort(controller.signal, () => ran.push('d'));
    const removeE = listenToAbort(controller.signal, () => ran.push('e'));
    removeB();
    controller.abort();
    controller.abort();
    expect(ran).to.deep.equal(['a', 'c', 'd']);
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(0);
  });

  it('runs listeners in the order of their turns, taken when their waits began, whatever the order they were added in', function () {
    const controller = new AbortController();
    const ran: string[] = [];
    const first = abortTurn();
    listenToAbort(controller.signal, () => ran.push('second')); // began and listened while the first was entering
    listenToAbort(controller.signal, () => ran.push('first'), first);
    listenToAbort(controller.signal, () => ran.push('third'));
    controller.abort();
    expect(ran).to.deep.equal(['first', 'second', 'third']);
  });

  it('runs them though a listener the caller added first stops the propagation of the abort event', function () {
    const controller = new AbortController();
    controller.signal.addEventListener('abort', (event) => event.stopImmediatePropagation());
    const ran: number[] = [];
    listenToAbort(controller.signal, () => ran.push(1));
    listenToAbort(controller.signal, () => ran.push(2));
    controller.abort();
    expect(ran).to.deep.equal([1, 2]);
  });

  it('a listener that throws does not stop the others; its error is thrown from a timer, as Node reports a listener\'s', async function () {
    const thrown: unknown[] = [];
    const hold = (e: unknown): number => thrown.push(e);
    const runners = process.rawListeners('uncaughtException') as ((e: unknown) => void)[];
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', hold);
    const ran: number[] = [];
    const failure = new Error('listener failed');
    try {
      const controller = new AbortController();
      listenToAbort(controller.signal, () => ran.push(1));
      listenToAbort(controller.signal, () => {
        throw failure;
      });
      listenToAbort(controller.signal, () => ran.push(3));
      controller.abort();
      expect(ran).to.deep.equal([1, 3]);
      await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      process.removeListener('uncaughtException', hold);
      for (const runner of runners) process.on('uncaughtException', runner);
    }
    expect(thrown).to.deep.equal([failure]);
  });

  it('keeps each signal to itself, and takes the listeners of a signal polyfilled by its shape', function () {
    const first = new AbortController();
    const second = new AbortController();
    const ran: string[] = [];
    listenToAbort(first.signal, () => ran.push('first'));
    listenToAbort(second.signal, () => ran.push('second'));
    second.abort();
    expect(ran).to.deep.equal(['second']);
    // A signal of a polyfill's shape: an event target with `aborted`.
    const target = new EventTarget() as EventTarget & { aborted: boolean; reason: unknown };
    target.aborted = false;
    const remove = listenToAbort(target as unknown as AbortSignal, () => ran.push('polyfill'));
    target.aborted = true;
    target.dispatchEvent(new Event('abort'));
    remove();
    expect(ran).to.deep.equal(['second', 'polyfill']);
  });
});
