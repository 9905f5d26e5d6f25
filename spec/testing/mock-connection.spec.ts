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
});
