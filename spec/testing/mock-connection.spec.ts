/**
 * MockConnectionFactory: its options are checked when it is made, as every other front end's.
 */
import { expect } from 'chai';
import { firstValueFrom, from } from 'rxjs';
import { InvalidOptionError } from '../../lib';
import { MockConnection, MockConnectionFactory, VirtualClock } from '../../lib/testing';
import { unhandledRejectionsOf } from '../support/unhandled';

describe('MockConnectionFactory', function () {
  it('refuses options it would misread with an InvalidOptionError naming the option', function () {
    const cases: [string, unknown][] = [
      ['options', null],
      ['options', 20],
      // A misspelt establishDelayMS made every establishment instant, silently.
      ['establishDelay', { establishDelay: 20 }],
      ['establishDelayMS', { establishDelayMS: -1 }],
      ['establishDelayMS', { establishDelayMS: '20' }],
      ['establishDelayMS', { establishDelayMS: Infinity }],
      ['scheduler', { scheduler: {} }],
      ['failWith', { failWith: new Error('refused') }],
      ['serviceIdOf', { serviceIdOf: 'aaaaaaaaaaaaaaaaaaaaaaaa' }],
    ];
    for (const [option, options] of cases) {
      expect(() => new MockConnectionFactory(options as never), JSON.stringify(options)).to.throw(InvalidOptionError).with.property('option', option);
    }
    const clock = new VirtualClock();
    for (const options of [undefined, {}, { scheduler: clock, establishDelayMS: 0 }, { establishDelayMS: 5, failWith: () => undefined, serviceIdOf: () => undefined }]) {
      expect(() => new MockConnectionFactory(options), String(options && Object.keys(options))).to.not.throw();
    }
  });

  it('an establishment whose descriptor, failWith or serviceIdOf throws fails with that error instead of throwing out of a timer', async function () {
    const escaped: unknown[] = [];
    const onUncaught = (error: unknown): void => void escaped.push(error);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const clock = new VirtualClock();
      const cases: [string, MockConnectionFactory, unknown][] = [
        ['a null descriptor', new MockConnectionFactory(), null],
        ['a descriptor without an address (virtual time)', new MockConnectionFactory({ scheduler: clock }), { id: 1, generation: 0 }],
        ['a failWith that throws', new MockConnectionFactory({ failWith: () => { throw new RangeError('from failWith'); } }), { id: 1, generation: 0, address: 'h:1' }],
        ['a serviceIdOf that throws', new MockConnectionFactory({ establishDelayMS: 1, serviceIdOf: () => { throw new RangeError('from serviceIdOf'); } }), { id: 1, generation: 0, address: 'h:1' }],
      ];
      for (const [what, factory, descriptor] of cases) {
        const established = firstValueFrom(from(factory.factory(descriptor as never)));
        clock.advance(0);
        const error = await established.then(() => undefined, (e: unknown) => e);
        expect(error, what).to.be.instanceOf(Error);
        expect(factory.created, what).to.have.length(0);
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
    expect(escaped).to.deep.equal([]);
  });

  it('an async failWith or serviceIdOf, or a failWith returning neither an Error nor undefined, fails the establishment with an InvalidOptionError naming it, and leaves no unhandled rejection', async function () {
    // Before, the Promise itself was taken as failWith's error (an async failWith that decided not to fail failed
    // every establishment) or as a serviceId, and each one that rejected was an unhandled rejection.
    const cases: [string, MockConnectionFactory][] = [
      ['failWith', new MockConnectionFactory({ failWith: (async () => undefined) as never })],
      ['failWith', new MockConnectionFactory({ failWith: (async () => Promise.reject(new RangeError('from failWith'))) as never })],
      ['serviceIdOf', new MockConnectionFactory({ serviceIdOf: (async () => Promise.reject(new RangeError('from serviceIdOf'))) as never })],
      // `condition && new Error()`: false is no error, and the establishment fails naming failWith, not the factory.
      ['failWith', new MockConnectionFactory({ failWith: ((d: { id: number }) => d.id > 1 && new Error('later ones')) as never })],
    ];
    const unhandled = await unhandledRejectionsOf(async () => {
      for (const [option, factory] of cases) {
        const error = await firstValueFrom(from(factory.factory({ id: 1, generation: 0, address: 'h:1' } as never))).then(() => undefined, (e: unknown) => e);
        expect(error, option).to.be.instanceOf(InvalidOptionError).with.property('option', option);
        expect(factory.created, option).to.have.length(0);
      }
    });
    expect(unhandled).to.deep.equal([]);
  });

  it('a MockConnection refuses a descriptor it cannot take its id, generation and address from', function () {
    for (const descriptor of [null, undefined, 1, {}, { id: '1', generation: 0, address: 'h:1' }, { id: 1, generation: 0 }]) {
      expect(() => new MockConnection(descriptor as never), JSON.stringify(descriptor)).to.throw(InvalidOptionError).with.property('option', 'descriptor');
    }
    expect(() => new MockConnection({ id: 1, generation: 0, address: 'h:1' }, 5 as never)).to.throw(InvalidOptionError).with.property('option', 'serviceId');
    expect(new MockConnection({ id: 1, generation: 0, address: 'h:1' })).to.include({ id: 1, generation: 0, address: 'h:1', serviceId: undefined });
    // A serviceId no handshake reports (not an ObjectId's hex) would join a service clear({ serviceId }) cannot name.
    expect(() => new MockConnection({ id: 1, generation: 0, address: 'h:1' }, 'svc-a')).to.throw(InvalidOptionError).with.property('option', 'serviceId');
    expect(new MockConnection({ id: 1, generation: 0, address: 'h:1' }, 'AAAAAAAAAAAAAAAAAAAAAAAA').serviceId).to.equal('AAAAAAAAAAAAAAAAAAAAAAAA');
  });
  it('says in each refusal what the option takes, and names MockConnectionFactory for an unknown option', async function () {
    const message = (make: () => unknown): string => {
      try {
        make();
      } catch (error) {
        return (error as Error).message;
      }
      return '';
    };
    expect(message(() => new MockConnection(null as never))).to.include('descriptor must be an object { id, generation, address }');
    expect(message(() => new MockConnection({ id: 1, generation: 0, address: 'h:1' }, 'svc'))).to.include("serviceId must be an ObjectId's 24-character hex string");
    expect(message(() => new MockConnectionFactory(5 as never))).to.include('options must be a MockConnectionFactoryOptions object');
    expect(message(() => new MockConnectionFactory({ establishDelay: 1 } as never))).to.include('MockConnectionFactory');
    expect(message(() => new MockConnectionFactory({ establishDelayMS: -1 }))).to.include('establishDelayMS must be a number of ms from 0 to 2147483647');
    expect(message(() => new MockConnectionFactory({ failWith: 5 as never }))).to.include('failWith must be a function (descriptor) => Error | undefined');
    expect(message(() => new MockConnectionFactory({ serviceIdOf: 5 as never }))).to.include('serviceIdOf must be a function (descriptor) => string | undefined');
    // The longest delay a Node timer takes is allowed.
    expect(() => new MockConnectionFactory({ establishDelayMS: 2147483647 })).to.not.throw();
    const failed = async (options: ConstructorParameters<typeof MockConnectionFactory>[0]): Promise<string> =>
      firstValueFrom(from(new MockConnectionFactory(options).factory({ id: 1, generation: 0, address: 'h:1' } as never))).then(
        () => '',
        (e: Error) => e.message,
      );
    expect(await failed({ failWith: (() => false) as never })).to.include('failWith must be a function that returns an Error or undefined');
    expect(await failed({ failWith: (async () => undefined) as never })).to.include('failWith must be a function that returns an Error or undefined at once (not a Promise)');
    expect(await failed({ serviceIdOf: (async () => undefined) as never })).to.include('serviceIdOf must be a function that returns a serviceId or undefined at once (not a Promise)');
  });

  it('destroy() records the teardown once: destroyed, destroyError and errored, and later calls change nothing', function () {
    const connection = new MockConnection({ id: 1, generation: 0, address: 'h:1' });
    expect(connection).to.include({ destroyed: false, errored: false, destroyError: undefined });
    const first = new Error('first');
    connection.destroy(first);
    expect(connection).to.include({ destroyed: true, errored: true, destroyError: first });
    connection.errored = false;
    connection.destroy(new Error('second'));
    expect(connection).to.include({ destroyed: true, errored: false, destroyError: first });
  });

  it('an establishment fails with the Error failWith returns, and succeeds when it returns undefined', async function () {
    const refused = new Error('refused');
    const factory = new MockConnectionFactory({ failWith: (d) => (d.id === 1 ? refused : undefined) });
    const establish = (id: number): Promise<unknown> => firstValueFrom(from(factory.factory({ id, generation: 0, address: 'h:1' } as never))).catch((e: unknown) => e);
    expect(await establish(1)).to.equal(refused);
    expect(await establish(2)).to.be.instanceOf(MockConnection).and.include({ id: 2 });
    expect(factory.created.map((c) => c.id)).to.deep.equal([2]);
    expect(factory.aborted).to.equal(0);
  });

  it('establishDelayMS 0 completes on a microtask, a positive one only once it has passed; an abandoned establishment is counted and makes no connection', async function () {
    const descriptor = { id: 1, generation: 0, address: 'h:1' } as never;
    const microtask = (): Promise<void> => new Promise((resolve) => queueMicrotask(resolve));
    const settle = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
    // 0: done on the microtask queued when it began, before any timer; a completed one is not counted as abandoned.
    const instant = new MockConnectionFactory();
    const got: unknown[] = [];
    from(instant.factory(descriptor)).subscribe((c) => got.push(c));
    await microtask();
    expect(instant.created).to.have.length(1);
    expect(got).to.deep.equal(instant.created);
    expect(instant.aborted).to.equal(0);
    // A positive delay, on Node timers: not done on a microtask, done once the delay passed.
    const delayed = new MockConnectionFactory({ establishDelayMS: 15 });
    from(delayed.factory(descriptor)).subscribe();
    await microtask();
    expect(delayed.created).to.have.length(0);
    await settle(40);
    expect(delayed.created).to.have.length(1);
    expect(delayed.aborted).to.equal(0);
    // Abandoned before it finished, on each of the three timings: counted once, no connection, nothing delivered.
    const clock = new VirtualClock();
    for (const factory of [new MockConnectionFactory(), new MockConnectionFactory({ establishDelayMS: 15 }), new MockConnectionFactory({ scheduler: clock, establishDelayMS: 15 })]) {
      const delivered: unknown[] = [];
      const timers = (): number => process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;
      const timersBefore = timers();
      const subscription = from(factory.factory(descriptor)).subscribe({ next: (c) => delivered.push(c), error: (e: unknown) => delivered.push(e) });
      subscription.unsubscribe();
      subscription.unsubscribe();
      // Its timer is cancelled too: none left pending on the clock, and no Node timer holding the process open.
      expect(clock.actions).to.have.length(0);
      expect(timers()).to.equal(timersBefore);
      clock.advance(20);
      await settle(40);
      expect(factory.started).to.have.length(1);
      expect(factory.aborted).to.equal(1);
      expect(factory.created).to.have.length(0);
      expect(delivered).to.deep.equal([]);
    }
  });
});
