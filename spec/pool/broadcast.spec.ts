import { expect } from 'chai';
import { config, Observable } from 'rxjs';
import { Broadcast } from '../../lib/pool/broadcast';

function observableOf<T>(b: Broadcast<T>): Observable<T> {
  return new Observable<T>((subscriber) => b.add(subscriber));
}

describe('Broadcast', function () {
  it('sends each value to every subscriber, in subscription order, until each unsubscribes', function () {
    const b = new Broadcast<number>();
    const $ = observableOf(b);
    const seen: string[] = [];
    const one = $.subscribe((v) => seen.push(`one ${v}`));
    $.subscribe((v) => seen.push(`two ${v}`));
    expect(b.observed).to.equal(true);
    b.next(1);
    one.unsubscribe();
    b.next(2);
    expect(seen).to.deep.equal(['one 1', 'two 1', 'two 2']);
  });

  it('a subscriber that unsubscribes another from inside next stops it at once; one added inside next waits for the next value', function () {
    const b = new Broadcast<number>();
    const $ = observableOf(b);
    const seen: string[] = [];
    let second: { unsubscribe(): void } | undefined;
    $.subscribe((v) => {
      seen.push(`first ${v}`);
      second?.unsubscribe();
      if (v === 1) $.subscribe((x) => seen.push(`late ${x}`));
    });
    second = $.subscribe((v) => seen.push(`second ${v}`));
    b.next(1);
    b.next(2);
    expect(seen).to.deep.equal(['first 1', 'first 2', 'late 2']);
  });

  it('isolates a subscriber that throws: the others still receive the value, and RxJS reports the error', async function () {
    const b = new Broadcast<number>();
    const $ = observableOf(b);
    const reported: unknown[] = [];
    const saved = config.onUnhandledError;
    config.onUnhandledError = (e) => reported.push(e);
    try {
      const seen: number[] = [];
      $.subscribe(() => {
        throw new Error('observer bug');
      });
      $.subscribe((v) => seen.push(v));
      b.next(7);
      expect(seen).to.deep.equal([7]);
      await new Promise((resolve) => setTimeout(resolve, 5)); // RxJS reports unhandled errors on a timer
    } finally {
      config.onUnhandledError = saved;
    }
    expect(reported.map((e) => (e as Error).message)).to.deep.equal(['observer bug']);
  });

  it('complete() completes every subscriber and each later one', function () {
    const b = new Broadcast<number>();
    const $ = observableOf(b);
    let completed = 0;
    $.subscribe({ complete: () => completed++ });
    b.complete();
    $.subscribe({ complete: () => completed++ });
    expect(completed).to.equal(2);
    expect(b.observed).to.equal(false);
  });
});
