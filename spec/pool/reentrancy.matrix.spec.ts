/**
 * Re-entrancy: user code that runs inside the pool's processing (43 sites, see spec/support/reentrancy-matrix.ts)
 * calls back into the pool, or throws, at one moment of a fixed scenario. The pool must stay whole: every checkout
 * settles once, no connection has two holders, every connection created is destroyed, the pool closes and state$
 * completes; events come in commit order (design, "Events in commit order": emitted in the order the reducer
 * committed them, after the state change they describe), so the counts rebuilt from events$ at each quiet point equal
 * snapshot() and state$ and each connection's events follow its lifecycle; and a subscriber's exception never reaches
 * or corrupts the pool: it surfaces to a caller, an event, a warning or the unhandled-error report, and the invariants
 * above still hold. On virtual time over MockConnectionFactory.
 *
 * Every site is crossed with the actions that change the pool's holdings most (both checkOut forms, checkIn, clear
 * with interruptInUseConnections, close, drain, throw, and unsubscribe, a requester leaving) and with one more of
 * the others, chosen in turn so that each of them meets several kinds of site.
 */
import { expect } from 'chai';
import { ACTIONS, runCell, SITES, type ActionName } from '../support/reentrancy-matrix';

// `unsubscribe` makes a requester leave while its connection is on the way, which the pool must take back.
const EVERY_SITE: readonly ActionName[] = ['checkOutPromise', 'checkOutObservable', 'checkIn', 'clearInterrupt', 'close', 'drain', 'throw', 'unsubscribe'];
const IN_TURN = (Object.keys(ACTIONS) as ActionName[]).filter((a) => !EVERY_SITE.includes(a));
const IN_TURN_PER_SITE = 1;

/**
 * Cells left out, each a case where user code breaks its own side of the contract and the pool cannot make up for it.
 * Keys: `site × action`.
 */
const USER_RESPONSIBILITY: ReadonlyMap<string, string> = new Map([
  ...(['clearInterrupt', 'close', 'throw'] as const).map((a): [string, string] => [
    `factory emit × ${a}`,
    "the user's factory pipeline drops the connection its inner factory already made (the pool unsubscribed, or the " +
      'map threw, while it was on its way); the pool never received it, so only the factory can destroy it',
  ]),
  ...(['errored', 'busy', 'destroy', 'serviceId'] as const).map((p): [string, string] => [
    `connection.${p} × throw`,
    'a connection whose own member throws: the pool reads it while it checks or closes the connection and takes the ' +
      'throw as the answer (errored, not idle, destroyed, no serviceId) without passing it on; the connection is the ' +
      "factory's object, and its error is not a subscriber's",
  ]),
  [
    'checkOut tap × throw',
    'the tap throws after the pool delivered the connection: the pool handed it over, the checkout settled, and the ' +
      "caller's own pipeline then lost it (never checked in), as any caller that drops a checked-out connection",
  ],
]);

/** The actions a site is crossed with: every-site actions, then `IN_TURN_PER_SITE` of the others in turn. */
function actionsFor(index: number): ActionName[] {
  const more = Array.from({ length: IN_TURN_PER_SITE }, (_, k) => IN_TURN[(index * IN_TURN_PER_SITE + k) % IN_TURN.length]);
  return [...EVERY_SITE, ...more];
}

describe('pool re-entrancy: user code at every site calls back into the pool, or throws', function () {
  SITES.forEach((site, index) => {
    const actions = actionsFor(index).filter((a) => !USER_RESPONSIBILITY.has(`${site.name} × ${a}`));
    it(`${site.name}: ${actions.join(', ')}`, async function () {
      const broken: string[] = [];
      for (const action of actions) {
        for (const violation of await runCell(site, action)) broken.push(`${site.name} × ${action}: ${violation}`);
      }
      expect(broken, broken.join('\n')).to.deep.equal([]);
    });
  });

  it('every cell left out names a site and an action of the matrix', function () {
    const names = new Set(SITES.map((s) => s.name));
    for (const key of USER_RESPONSIBILITY.keys()) {
      const [site, action] = key.split(' × ');
      expect(names.has(site), key).to.equal(true);
      expect(Object.keys(ACTIONS), key).to.include(action);
    }
    expect(SITES).to.have.length(43);
  });
});
