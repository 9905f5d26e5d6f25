import { expect } from 'chai';
import { Subject } from 'rxjs';
import { Mailbox } from '../../lib/pool/mailbox';

describe('Mailbox (serialized, two lanes)', function () {
  it('queues values pushed from inside a handler until the current one is done', function () {
    const box = new Mailbox<string>(() => true);
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
    const box = new Mailbox<string>((v) => v.startsWith('ctl'));
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
    const box = new Mailbox<number>(() => false);
    const seen: number[] = [];
    box.subscribe((v) => {
      seen.push(v);
      if (v === 0) for (let i = 1; i <= 100; i++) box.next(i);
    });
    box.next(0);
    expect(seen).to.deep.equal(Array.from({ length: 101 }, (_, i) => i));
  });

  it('merges other streams into the same serialized order, until unsubscribed', function () {
    const box = new Mailbox<string>(() => true);
    const source = new Subject<string>();
    const seen: string[] = [];
    box.subscribe((v) => {
      seen.push(v);
      if (v === 'x') source.next('from-source'); // re-entrant push through a merged stream
    });
    const merged = box.merge(source);
    box.next('x');
    merged.unsubscribe();
    source.next('ignored');
    expect(seen).to.deep.equal(['x', 'from-source']);
  });

  it('takes one subscriber: a second one gets an error', function () {
    const box = new Mailbox<number>(() => true);
    box.subscribe(() => undefined);
    let error: unknown;
    box.subscribe({ error: (e) => (error = e) });
    expect(error).to.be.instanceOf(Error);
    expect((error as Error).message).to.match(/one subscriber/);
  });
});
