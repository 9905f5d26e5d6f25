/**
 * Read preferences as rxcmap takes them (lib/read-preference.ts): checked and frozen, the smallest maxStalenessSeconds
 * of a replica set, the $readPreference document and the name the logs give.
 */
import { expect } from 'chai';
import { InvalidOptionError } from '../lib';
import {
  checkMaxStalenessSeconds,
  describeReadPreference,
  PRIMARY,
  readPreferenceDocument,
  readPreferenceFrom,
} from '../lib/read-preference';


describe('read preferences (server selection spec, "Read Preference")', function () {
  describe('readPreferenceFrom', function () {
    it('takes a mode alone or an object, frozen; primary is PRIMARY; -1 and a first tag set {} mean none', function () {
      expect(readPreferenceFrom('readPreference', 'primary')).to.equal(PRIMARY);
      expect(readPreferenceFrom('readPreference', { mode: 'primary', tags: [{}], maxStalenessSeconds: -1 })).to.equal(PRIMARY);
      for (const mode of ['primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest'] as const) {
        const rp = readPreferenceFrom('readPreference', mode);
        expect(rp).to.deep.equal({ mode });
        expect(Object.isFrozen(rp)).to.equal(true);
        expect(readPreferenceFrom('readPreference', { mode })).to.equal(rp);
      }
      const given = { mode: 'secondary', tags: [{ dc: 'ny', rack: '1' }, {}], maxStalenessSeconds: 120 };
      const rp = readPreferenceFrom('readPreference', given);
      expect(rp).to.deep.equal(given);
      expect(Object.isFrozen(rp) && Object.isFrozen(rp.tags) && Object.isFrozen(rp.tags![0])).to.equal(true);
      given.tags[0]!.dc = 'sf';
      expect(rp.tags![0]).to.deep.equal({ dc: 'ny', rack: '1' }, 'a copy');
      expect(readPreferenceFrom('readPreference', { mode: 'nearest', tags: [{}, { dc: 'ny' }], maxStalenessSeconds: -1 })).to.deep.equal({ mode: 'nearest' });
      expect(readPreferenceFrom('readPreference', { mode: 'nearest', tags: [] })).to.deep.equal({ mode: 'nearest' });
      expect(readPreferenceFrom('readPreference', { mode: 'nearest', tags: null, maxStalenessSeconds: null })).to.deep.equal({ mode: 'nearest' });
      expect(readPreferenceFrom('readPreference', { mode: 'primary', tags: null, maxStalenessSeconds: null })).to.equal(PRIMARY);
      // Only the fields given (no undefined ones).
      expect(Object.keys(readPreferenceFrom('readPreference', { mode: 'nearest', maxStalenessSeconds: 120 }))).to.deep.equal(['mode', 'maxStalenessSeconds']);
      expect(Object.keys(readPreferenceFrom('readPreference', { mode: 'nearest', tags: [{ dc: 'ny' }] }))).to.deep.equal(['mode', 'tags']);
      // One it made (a client's readPreference passed to each read) is taken as it is, not checked and copied again.
      expect(readPreferenceFrom('readPreference', rp)).to.equal(rp);
      const copy = readPreferenceFrom('readPreference', { ...rp });
      expect(copy).to.not.equal(rp);
      expect(copy).to.deep.equal(rp);
    });

    it('refuses, naming the option and what it takes: another type, an unknown mode (with the closest), an unknown key, bad tags or maxStalenessSeconds', function () {
      const refused = (value: unknown): InvalidOptionError => {
        try {
          readPreferenceFrom('readPreference', value);
        } catch (error) {
          expect(error).to.be.instanceOf(InvalidOptionError);
          return error as InvalidOptionError;
        }
        throw new Error(`${JSON.stringify(value)} was taken`);
      };
      expect(refused(1)).to.include({ option: 'readPreference' });
      expect(refused(null).message).to.include("a mode ('primary', 'primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest') or an object");
      expect(refused(['secondary'])).to.include({ option: 'readPreference' });
      expect(refused('Secondary')).to.include({ option: 'readPreference', suggestion: 'secondary', allowed: "a mode ('primary', 'primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest') or an object { mode, tags?, maxStalenessSeconds? }" });
      expect(refused({ mode: 'nearst' })).to.include({ option: 'readPreference.mode', suggestion: 'nearest', allowed: "one of 'primary', 'primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest'" });
      expect(refused({})).to.include({ option: 'readPreference.mode' });
      expect(refused({ mode: 'secondary', hedge: { enabled: true } })).to.include({ option: 'readPreference.hedge' });
      expect(refused({ mode: 'secondary', tag: [] })).to.include({ option: 'readPreference.tag', suggestion: 'tags' });
      expect(refused({ mode: 'secondary', tags: { dc: 'ny' } })).to.include({ option: 'readPreference.tags', allowed: 'an array of tag sets, each an object of string values (e.g. [{ dc: "ny" }, {}])' });
      expect(refused({ mode: 'secondary', tags: [{ dc: 1 }] })).to.include({ option: 'readPreference.tags' });
      expect(refused({ mode: 'secondary', tags: [null] })).to.include({ option: 'readPreference.tags' });
      expect(refused({ mode: 'primary', tags: [{ dc: 'ny' }] }).message).to.include("with mode 'primary'");
      expect(refused({ mode: 'primary', tags: [{}, { dc: 'ny' }] })).to.include({ option: 'readPreference.tags' });
      expect(refused({ mode: 'primary', maxStalenessSeconds: 120 })).to.include({ option: 'readPreference.maxStalenessSeconds' });
      for (const bad of [0, -2, 1.5, '120', Number.NaN, Infinity, 2 ** 31]) {
        expect(refused({ mode: 'secondary', maxStalenessSeconds: bad }), String(bad)).to.include({ option: 'readPreference.maxStalenessSeconds', allowed: 'an integer from 1 to 2147483647 (seconds), or -1 for no maximum' });
      }
      expect(readPreferenceFrom('readPreference', { mode: 'secondary', maxStalenessSeconds: 2 ** 31 - 1 }).maxStalenessSeconds).to.equal(2 ** 31 - 1);
    });

    it('refuses odd shapes with InvalidOptionError naming the option: holes in tags, a tag set not a plain object, a getter or Proxy that throws (as cause), inherited fields', function () {
      const refused = (value: unknown): InvalidOptionError => {
        try {
          readPreferenceFrom('readPreference', value);
        } catch (error) {
          expect(error, String(error)).to.be.instanceOf(InvalidOptionError);
          return error as InvalidOptionError;
        }
        expect.fail(`${String(value)} taken`);
      };
      // eslint-disable-next-line no-sparse-arrays
      expect(refused({ mode: 'secondary', tags: [, { dc: 'ny' }] }).option).to.equal('readPreference.tags');
      // eslint-disable-next-line no-sparse-arrays
      expect(refused({ mode: 'primary', tags: [{}, , { dc: 'ny' }] }).option).to.equal('readPreference.tags');
      // A Map (or a Date, a class instance) would otherwise be read as {}: a tag set matching every server.
      expect(refused({ mode: 'secondary', tags: [new Map([['dc', 'ny']])] }).option).to.equal('readPreference.tags');
      expect(refused({ mode: 'secondary', tags: [new Date(0)] }).option).to.equal('readPreference.tags');
      const boom = new Error('boom');
      const getter = refused({
        mode: 'secondary',
        get tags(): unknown {
          throw boom;
        },
      });
      expect(getter.option).to.equal('readPreference');
      expect(getter.cause).to.equal(boom);
      expect(refused({ mode: 'secondary', tags: [{ get dc(): string { throw boom; } }] }).cause).to.equal(boom);
      const trap = refused(new Proxy({ mode: 'secondary' }, { ownKeys: () => { throw boom; } }));
      expect(trap.cause).to.equal(boom);
      // Read once: a getter that gives [] and then non-empty tag sets cannot slip them past mode primary.
      let reads = 0;
      const twoFaced = { mode: 'primary', get tags(): unknown { return reads++ === 0 ? [] : [null]; } };
      expect(readPreferenceFrom('readPreference', twoFaced)).to.equal(PRIMARY);
      expect(reads).to.equal(1);
      // Fields inherited from a polluted Object.prototype are not the caller's.
      const proto = Object.prototype as Record<string, unknown>;
      proto.tags = [{ dc: 'polluted' }];
      proto.maxStalenessSeconds = 5;
      try {
        // Read as own keys: the polluted prototype would make a deep comparison see the same inherited fields on both sides.
        expect(Object.keys(readPreferenceFrom('readPreference', { mode: 'secondary' }))).to.deep.equal(['mode']);
      } finally {
        delete proto.tags;
        delete proto.maxStalenessSeconds;
      }
      // A tag set without a prototype is a plain one.
      const bare = Object.assign(Object.create(null) as Record<string, string>, { dc: 'ny' });
      expect(readPreferenceFrom('readPreference', { mode: 'secondary', tags: [bare] })).to.deep.equal({ mode: 'secondary', tags: [{ dc: 'ny' }] });
    });


    it('a replica set takes a maxStalenessSeconds of at least 90 and at least (heartbeatFrequencyMS + 10 s) / 1000', function () {
      const rp = (maxStalenessSeconds: number) => readPreferenceFrom('readPreference', { mode: 'secondary', maxStalenessSeconds });
      expect(() => checkMaxStalenessSeconds('readPreference', rp(89), 500)).to.throw(InvalidOptionError, /at least 90 in a replica set/);
      checkMaxStalenessSeconds('readPreference', rp(90), 500);
      checkMaxStalenessSeconds('readPreference', rp(90), 80_000);
      expect(() => checkMaxStalenessSeconds('readPreference', rp(90), 80_001)).to.throw(InvalidOptionError, /at least 91/);
      expect(() => checkMaxStalenessSeconds('readPreference', rp(129), 120_000)).to.throw(InvalidOptionError, /at least 130/);
      checkMaxStalenessSeconds('readPreference', readPreferenceFrom('readPreference', 'secondary'), 120_000);
    });

    it('goes with a command as { mode, tags?, maxStalenessSeconds? }, and names itself by its mode alone when it has nothing else', function () {
      const rp = readPreferenceFrom('readPreference', { mode: 'secondaryPreferred', tags: [{ dc: 'ny' }], maxStalenessSeconds: 120 });
      const document = readPreferenceDocument(rp);
      expect(document).to.deep.equal({ mode: 'secondaryPreferred', tags: [{ dc: 'ny' }], maxStalenessSeconds: 120 });
      expect(Object.keys(document)).to.deep.equal(['mode', 'tags', 'maxStalenessSeconds']);
      expect(Object.isFrozen(document.tags[0])).to.equal(false);
      expect(readPreferenceDocument(PRIMARY)).to.deep.equal({ mode: 'primary' });
      expect(describeReadPreference(PRIMARY)).to.equal('primary');
      expect(describeReadPreference(readPreferenceFrom('readPreference', 'nearest'))).to.equal('nearest');
      expect(describeReadPreference(rp)).to.equal('{"mode":"secondaryPreferred","tags":[{"dc":"ny"}],"maxStalenessSeconds":120}');
      expect(describeReadPreference(readPreferenceFrom('readPreference', { mode: 'nearest', maxStalenessSeconds: 90 }))).to.equal('{"mode":"nearest","maxStalenessSeconds":90}');
      expect(describeReadPreference(readPreferenceFrom('readPreference', { mode: 'nearest', tags: [{ dc: 'ny' }] }))).to.equal('{"mode":"nearest","tags":[{"dc":"ny"}]}');
    });
  });
});
