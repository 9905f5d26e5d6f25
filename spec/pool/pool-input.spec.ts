import { expect } from 'chai';
import { Subject } from 'rxjs';
import { config } from 'rxjs';
import { PoolInput } from '../../lib/pool/pool-input';

describe('PoolInput (serialized, two lanes, an Observer)', function () {
  it('queues values pushed from inside a handler until the current one is done', function () {
    const box = new PoolInput<string>(() => true);
    const log: string[] = [];
    box.subscribe((v) => {
      log.push(`start ${v}`);
      if (v === 'a') box.next('b');
      log.push(`end ${v}`);
    });
    box.next('a');
    expect(log).to.deep.equal(['start a', 'end a', 'start b', 'end b']);
  });

  it('drains the control lane before the checkout lane', function () {
    const box = new PoolInput<string>((v) => v.startsWith('ctl'));
    const seen: string[] = [];
    box.subscribe((v) => {
      seen.push(v);
      if (v === 'first') {
        box.next('co-1');
        box.next('ctl-1');
        box.next('co-2');
        box.next('ctl-2');
      }
    });
    box.next('first');
    expect(seen).to.deep.equal(['first', 'ctl-1', 'ctl-2', 'co-1', 'co-2']);
  });

  it('keeps FIFO order when re-entrant pushes grow a lane past its initial size', function () {
    const box = new PoolInput<number>(() => false);
    const seen: number[] = [];
    box.subscribe((v) => {
      seen.push(v);
      if (v === 0) for (let i = 1; i <= 100; i++) box.next(i);
    });
    box.next(0);
    expect(seen).to.deep.equal(Array.from({ length: 101 }, (_, i) => i));
  });

  it('takes streams subscribed into it, in the same serialized order, until unsubscribed', function () {
    const box = new PoolInput<string>(() => true);
    const source = new Subject<string>();
    const seen: string[] = [];
    box.subscribe((v) => {
      seen.push(`start ${v}`);
      if (v === 'x') source.next('from-source'); // re-entrant push through a subscribed stream
      seen.push(`end ${v}`);
    });
    const subscription = source.subscribe(box);
    box.next('x');
    subscription.unsubscribe();
    source.next('ignored');
    expect(seen).to.deep.equal(['start x', 'end x', 'start from-source', 'end from-source']);
  });

  it('stays open when a source completes, and reports a source error as unhandled', function () {
    const box = new PoolInput<string>(() => true);
    const seen: string[] = [];
    box.subscribe((v) => seen.push(v));
    const reported: unknown[] = [];
    const saved = config.onUnhandledError;
    config.onUnhandledError = (e) => reported.push(e);
    try {
      const a = new Subject<string>();
      a.subscribe(box);
      a.complete();
      const b = new Subject<string>();
      b.subscribe(box);
      b.error(new Error('source failed'));
    } finally {
      config.onUnhandledError = saved;
    }
    box.next('after');
    expect(seen).to.deep.equal(['after']);
    expect(reported.map((e) => (e as Error).message)).to.deep.equal(['source failed']);
  });

  it('calls afterBatch once per batch, after every queued action, and drains what it pushes', function () {
    const log: string[] = [];
    let pushed = false;
    const box: PoolInput<string> = new PoolInput<string>(
      () => true,
      () => {
        log.push('batch');
        if (!pushed) {
          pushed = true;
          box.next('from-hook');
        }
      },
    );
    box.subscribe((v) => {
      log.push(v);
      if (v === 'a') box.next('b');
    });
    box.next('a');
    expect(log).to.deep.equal(['a', 'b', 'batch', 'from-hook', 'batch']);
  });

  it('takes one subscriber: a second one gets an error', function () {
    const box = new PoolInput<number>(() => true);
    box.subscribe(() => undefined);
    let error: unknown;
    box.subscribe({ error: (e) => (error = e) });
    expect(error).to.be.instanceOf(Error);
    expect((error as Error).message).to.match(/one subscriber/);
  });

  it('drains checkout-lane actions that afterBatch pushes, before next returns', function () {
    const log: string[] = [];
    let pushed = false;
    const box: PoolInput<string> = new PoolInput<string>(
      (v) => v.startsWith('ctl'),
      () => {
        log.push('batch');
        if (!pushed) {
          pushed = true;
          box.next('co-from-hook');
        }
      },
    );
    box.subscribe((v) => log.push(v));
    box.next('ctl-a');
    expect(log).to.deep.equal(['ctl-a', 'batch', 'co-from-hook', 'batch']);
  });

  it('drops values while it has no subscriber, and takes a new one once the first has unsubscribed', function () {
    const box = new PoolInput<string>(() => true);
    const first: string[] = [];
    const subscription = box.subscribe((v) => first.push(v));
    box.next('a');
    subscription.unsubscribe();
    box.next('dropped');
    const second: string[] = [];
    let error: unknown;
    box.subscribe({ next: (v) => second.push(v), error: (e) => (error = e) });
    box.next('b');
    expect(error).to.equal(undefined);
    expect(first).to.deep.equal(['a']);
    expect(second).to.deep.equal(['b']);
  });

  it('without config.onUnhandledError, throws a source error on a timer (as RxJS does)', function () {
    const box = new PoolInput<string>(() => true);
    box.subscribe(() => undefined);
    const saved = config.onUnhandledError;
    const realSetTimeout = globalThis.setTimeout;
    const scheduled: (() => void)[] = [];
    config.onUnhandledError = null;
    globalThis.setTimeout = ((fn: () => void) => {
      scheduled.push(fn);
      return 0;
    }) as unknown as typeof setTimeout;
    const failure = new Error('source failed');
    try {
      box.error(failure); // must not throw here, in the source's call stack
    } finally {
      globalThis.setTimeout = realSetTimeout;
      config.onUnhandledError = saved;
    }
    expect(scheduled).to.have.length(1);
    expect(() => scheduled[0]()).to.throw(failure);
  });
});
