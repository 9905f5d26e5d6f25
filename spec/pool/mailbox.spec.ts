import { expect } from 'chai';
import { Subject } from 'rxjs';
import { mailbox } from '../../lib/pool/mailbox';

describe('mailbox (serialized, two lanes)', function () {
  it('queues values pushed from inside a handler until the current one is done', function () {
    const input = new Subject<string>();
    const log: string[] = [];
    input.pipe(mailbox(() => true)).subscribe((v) => {
      log.push(`start ${v}`);
      if (v === 'a') input.next('b');
      log.push(`end ${v}`);
    });
    input.next('a');
    expect(log).to.deep.equal(['start a', 'end a', 'start b', 'end b']);
  });

  it('drains the control lane before the checkout lane', function () {
    const input = new Subject<string>();
    const seen: string[] = [];
    input.pipe(mailbox((v) => v.startsWith('ctl'))).subscribe((v) => {
      seen.push(v);
      if (v === 'first') {
        input.next('co-1');
        input.next('ctl-1');
        input.next('co-2');
        input.next('ctl-2');
      }
    });
    input.next('first');
    expect(seen).to.deep.equal(['first', 'ctl-1', 'ctl-2', 'co-1', 'co-2']);
  });

  it('keeps FIFO order when re-entrant pushes grow a lane past its initial size', function () {
    const input = new Subject<number>();
    const seen: number[] = [];
    input.pipe(mailbox(() => false)).subscribe((v) => {
      seen.push(v);
      if (v === 0) for (let i = 1; i <= 100; i++) input.next(i);
    });
    input.next(0);
    expect(seen).to.deep.equal(Array.from({ length: 101 }, (_, i) => i));
  });
});
