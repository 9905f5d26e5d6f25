/**
 * HeldDeadline: a deadline stopped while held and armed again with what it had left, on a clock of the test's own.
 */
import { expect } from 'chai';
import { HeldDeadline } from '../../lib/connection/held-deadline';

/** A deadline on a manual clock whose timers are recorded: `armed` lists each arm's delay, `cleared` counts clears. */
function harness(delayMS: number): { deadline: HeldDeadline; armed: number[]; cleared: () => number; advance: (ms: number) => void } {
  let clock = 1000;
  let clears = 0;
  const armed: number[] = [];
  const deadline = new HeldDeadline(
    (ms) => {
      armed.push(ms);
      return { clear: () => void clears++ };
    },
    delayMS,
    () => clock,
  );
  return { deadline, armed, cleared: () => clears, advance: (ms) => void (clock += ms) };
}

describe('HeldDeadline', function () {
  it('arms its timer at once, and again with what it had left once the hold is released', function () {
    const { deadline, armed, cleared, advance } = harness(1000);
    expect(armed).to.deep.equal([1000]);
    advance(300);
    const release = deadline.hold();
    expect(cleared()).to.equal(1);
    advance(60_000); // a person signing in: not counted
    release();
    expect(armed).to.deep.equal([1000, 700]);
    release(); // a second release of the same hold does nothing
    expect(armed).to.deep.equal([1000, 700]);
    advance(200);
    deadline.hold()();
    expect(armed).to.deep.equal([1000, 700, 500]);
  });

  it('nests holds: armed again when the last one is released', function () {
    const { deadline, armed, advance } = harness(1000);
    const first = deadline.hold();
    const second = deadline.hold();
    advance(5000);
    first();
    expect(armed).to.deep.equal([1000]);
    second();
    expect(armed).to.deep.equal([1000, 1000]);
  });

  it('a hold taken while another is held changes nothing: armed again once both are released, with what was left when the first was taken', function () {
    const { deadline, armed, advance } = harness(1000);
    advance(400);
    const first = deadline.hold();
    advance(5000); // past the deadline, had it run: but it is held
    const second = deadline.hold();
    first();
    expect(armed).to.deep.equal([1000]);
    second();
    expect(armed).to.deep.equal([1000, 600]);
  });

  it('holds nothing without a deadline, once it has passed, or once ended; end clears its timer and it is never armed again', function () {
    const none = harness(0);
    expect(none.armed).to.deep.equal([]);
    none.deadline.hold()();
    expect(none.armed).to.deep.equal([]);
    const passed = harness(100);
    passed.advance(100);
    passed.deadline.hold()();
    expect([passed.armed, passed.cleared()]).to.deep.equal([[100], 0]);
    const ended = harness(100);
    const release = ended.deadline.hold();
    ended.deadline.end();
    release();
    expect(ended.armed).to.deep.equal([100]);
    ended.deadline.hold()();
    expect(ended.armed).to.deep.equal([100]);
    const running = harness(100);
    running.deadline.end();
    expect(running.cleared()).to.equal(1);
  });
});
