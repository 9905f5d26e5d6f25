/**
 * Read preferences: which servers of a deployment may run a read (its `mode`, tag sets and `maxStalenessSeconds`), as
 * a client takes them (checked once, frozen) and as a command carries them to a server (`$readPreference`).
 *
 * Source: server selection spec, "Read Preference" ("Components of a read preference": mode, tag_sets,
 * maxStalenessSeconds), "Passing read preference to mongos and load balancers" ("Document structure"); max staleness
 * spec, "API".
 */
import type { Document } from 'bson';
import { InvalidOptionError } from './errors';
import { closestOptionName, optionValue, rejectUnknownOptions } from './options';
import { setOwnField } from './own-field';

/**
 * A read preference mode: `primary` (only the primary), `primaryPreferred` (the primary, else eligible secondaries),
 * `secondary` (only eligible secondaries), `secondaryPreferred` (eligible secondaries, else the primary), `nearest`
 * (the primary and eligible secondaries alike). Source: server selection spec, "mode".
 */
export type ReadPreferenceMode = 'primary' | 'primaryPreferred' | 'secondary' | 'secondaryPreferred' | 'nearest';

/** Every {@link ReadPreferenceMode}, in the spec's order. */
export const READ_PREFERENCE_MODES: readonly ReadPreferenceMode[] = Object.freeze(['primary', 'primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest']);

/**
 * A tag set: tag names to values, e.g. `{ dc: 'ny', rack: '2' }`. It matches a server whose tags hold each of its
 * pairs (`{}` matches every server). Source: server selection spec, "tag_sets".
 */
export type TagSet = Readonly<Record<string, string>>;

/**
 * A read preference, checked and frozen (see {@link readPreferenceFrom}).
 *
 * Source: server selection spec, "Components of a read preference" (`tag_sets` is named `tags`, as in
 * `$readPreference`; `hedge`, deprecated since MongoDB 8.0, is refused as an unknown key); max staleness spec, "API".
 */
export interface ReadPreference {
  /** The mode (see {@link ReadPreferenceMode}). */
  readonly mode: ReadPreferenceMode;
  /**
   * The tag sets, tried in order until one matches a candidate server: those it matches are eligible, the others are
   * not; none matching, no server is eligible. Undefined: every candidate is eligible (the spec's default `[{}]`, or
   * any list whose first tag set is `{}`). Never given with mode `primary`.
   */
  readonly tags?: readonly TagSet[] | undefined;
  /**
   * The longest a secondary may lag behind the primary (its estimated staleness) and be eligible, in seconds: an
   * integer from 1 to 2147483647. Undefined: no limit (`-1` as given). In a replica set it must be at least 90 and at least
   * (heartbeatFrequencyMS + 10,000 ms) / 1000, else server selection fails with InvalidOptionError. Never given with mode `primary`.
   */
  readonly maxStalenessSeconds?: number | undefined;
}

/**
 * The mark of a read preference {@link readPreferenceFrom} made (frozen, its tags too), taken again as it is: a key
 * of its own, not enumerable (it neither prints nor compares). A mark, not a WeakSet of them: adding each new one to
 * a WeakSet cost about 0.5 µs of a command given a new read preference object.
 */
const MADE: unique symbol = Symbol('readPreference');

/** `readPreference` marked as made by {@link readPreferenceFrom}, frozen. */
function made(readPreference: { mode: ReadPreferenceMode; tags?: readonly TagSet[]; maxStalenessSeconds?: number }): ReadPreference {
  Object.defineProperty(readPreference, MADE, { value: true });
  return Object.freeze(readPreference);
}

/** Read preference `primary`, the default of every operation of a client. */
export const PRIMARY: ReadPreference = made({ mode: 'primary' });

/** The keys of a read preference object. */
const READ_PREFERENCE_KEYS = ['mode', 'tags', 'maxStalenessSeconds'] as const;

/** What a read preference option takes, in words. */
const READ_PREFERENCE_ALLOWED = `a mode (${READ_PREFERENCE_MODES.map((m) => `'${m}'`).join(', ')}) or an object { mode, tags?, maxStalenessSeconds? }`;

/**
 * The read preference `value` gives, checked and frozen: a mode alone (`'secondary'`), or an object `{ mode, tags?,
 * maxStalenessSeconds? }` (`tags`: an array of tag sets, each an object of string values; `maxStalenessSeconds`: an
 * integer from 1 to 2147483647, or -1 for none; either null for none). `{ mode: 'primary' }` and `'primary'` give one
 * frozen object (read preference `primary`). Tags whose first tag set is `{}` count as none (that set matches every
 * candidate).
 *
 * @throws {InvalidOptionError} naming `option` for a value of another type; `<option>.mode` for a mode that is not one
 *   of the five (with the closest one, e.g. `secondary` for `Secondary`); `<option>.<key>` for an unknown key (with the
 *   closest one; `hedge` included); `<option>.tags` for tags that are not an array of objects of string values, or
 *   non-empty tags with mode `primary`; `<option>.maxStalenessSeconds` for one that is not -1 or an integer from 1 to
 *   2147483647 (a BSON int32), or one with mode `primary`; `option` (the error's `cause`: what was thrown) when a getter
 *   or Proxy trap of the object throws. Each field is read once, and only when the object has it (or a class it is an
 *   instance of does): one inherited from Object.prototype is not the caller's.
 *
 * Source: server selection spec, "mode", "tag_sets" ("Clients MUST raise an error if a non-empty tag set is given in
 * tag_sets and the mode field is 'primary'"), "maxStalenessSeconds" ("Drivers MUST raise an error if
 * maxStalenessSeconds is a positive number and the mode field is 'primary'"; -1 means no maximum); max staleness spec,
 * "API" (a positive integer).
 */
export function readPreferenceFrom(option: string, value: unknown): ReadPreference {
  if (typeof value === 'string') return withMode(option, value, option);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InvalidOptionError(option, value, READ_PREFERENCE_ALLOWED);
  try {
    // One this function made (a client's readPreference, passed on to each read): checked and frozen already.
    if (Object.prototype.hasOwnProperty.call(value, MADE)) return value as ReadPreference;
    return fromObject(option, value);
  } catch (error) {
    if (error instanceof InvalidOptionError) throw error;
    // A getter or a Proxy trap of the caller's object threw: say which option it was.
    throw InvalidOptionError.unreadableOption(option, error, READ_PREFERENCE_ALLOWED);
  }
}

/** {@link readPreferenceFrom} of an object: each field read once, only the caller's own (or a class's) counted. */
function fromObject(option: string, value: object): ReadPreference {
  rejectUnknownOptions(value, READ_PREFERENCE_KEYS, option, `${option}.`);
  const given = value as { mode?: unknown; tags?: unknown; maxStalenessSeconds?: unknown };
  const givenTags = optionValue(given, 'tags');
  const givenMaxStalenessSeconds = optionValue(given, 'maxStalenessSeconds');
  const base = withMode(`${option}.mode`, optionValue(given, 'mode'), option);
  const sets = tagSetsFrom(`${option}.tags`, givenTags);
  const maxStalenessSeconds = maxStalenessSecondsFrom(`${option}.maxStalenessSeconds`, givenMaxStalenessSeconds);
  if (base.mode === 'primary') {
    // Any non-empty tag set, even after a `{}` that makes the others moot.
    if (sets?.some((set) => Object.keys(set).length > 0)) throw new InvalidOptionError(`${option}.tags`, givenTags, "absent, or only empty tag sets, with mode 'primary' (only the primary is suitable)");
    if (maxStalenessSeconds !== undefined) throw new InvalidOptionError(`${option}.maxStalenessSeconds`, givenMaxStalenessSeconds, "absent or -1 with mode 'primary' (a primary is never stale)");
    return PRIMARY;
  }
  // None, or a first tag set `{}` that matches every candidate: no tags.
  const tags = sets === undefined || sets.length === 0 || Object.keys(sets[0]!).length === 0 ? undefined : sets;
  if (tags === undefined && maxStalenessSeconds === undefined) return base;
  // Only the fields given: a read preference compares and prints as it was written.
  const readPreference: { mode: ReadPreferenceMode; tags?: readonly TagSet[]; maxStalenessSeconds?: number } = { mode: base.mode };
  if (tags !== undefined) readPreference.tags = tags;
  if (maxStalenessSeconds !== undefined) readPreference.maxStalenessSeconds = maxStalenessSeconds;
  return made(readPreference);
}

/** The read preference of mode `mode` alone (checked: `name` names it in the error). */
function withMode(name: string, mode: unknown, option: string): ReadPreference {
  if (typeof mode === 'string') {
    const known = MODE_ONLY.get(mode);
    if (known !== undefined) return known;
  }
  const closest = typeof mode === 'string' ? closestOptionName(mode, READ_PREFERENCE_MODES) : undefined;
  const allowed = name === option ? READ_PREFERENCE_ALLOWED : `one of ${READ_PREFERENCE_MODES.map((m) => `'${m}'`).join(', ')}`;
  throw new InvalidOptionError(name, mode, allowed, closest === undefined ? undefined : { suggestion: closest });
}

/** The read preference of each mode alone, frozen once. */
const MODE_ONLY: ReadonlyMap<string, ReadPreference> = new Map(READ_PREFERENCE_MODES.map((mode) => [mode, mode === 'primary' ? PRIMARY : made({ mode })]));

/**
 * The tag sets `value` gives (a frozen copy of each, in order), undefined when absent. Each must be a plain object (of
 * prototype Object.prototype or none) of string values: a Map, a Date or a class instance would read as `{}`, the tag
 * set that matches every server; a hole in the array is no tag set either.
 */
function tagSetsFrom(name: string, value: unknown): readonly TagSet[] | undefined {
  // null: no value, as the spec lets a language say it.
  if (value === undefined || value === null) return undefined;
  const allowed = 'an array of tag sets, each an object of string values (e.g. [{ dc: "ny" }, {}])';
  if (!Array.isArray(value)) throw new InvalidOptionError(name, value, allowed);
  const sets: TagSet[] = [];
  for (let i = 0; i < value.length; i++) {
    // A hole reads as undefined: refused below.
    const set: unknown = value[i];
    if (set === null || typeof set !== 'object' || Array.isArray(set)) throw new InvalidOptionError(name, value, allowed);
    const prototype: unknown = Object.getPrototypeOf(set);
    if (prototype !== Object.prototype && prototype !== null) throw new InvalidOptionError(name, value, allowed);
    const copy: Record<string, string> = {};
    for (const [key, tag] of Object.entries(set)) {
      if (typeof tag !== 'string') throw new InvalidOptionError(name, value, allowed);
      // A tag named __proto__ stays a tag (see setOwnField).
      setOwnField(copy, key, tag); // frozen below
    }
    sets.push(Object.freeze(copy));
  }
  return Object.freeze(sets);
}

/** The largest BSON int32. */
const MAX_INT32 = 2 ** 31 - 1;

/** What a maxStalenessSeconds may be, in words (see {@link isMaxStalenessSeconds}). */
export const MAX_STALENESS_SECONDS_ALLOWED = 'an integer from 1 to 2147483647 (seconds), or -1 for no maximum';

/**
 * Whether `value` is a maxStalenessSeconds a read preference takes, from a connection string or an object alike: -1
 * (no maximum) or an integer from 1 to 2147483647 (`$readPreference` carries it as a BSON int32). Source: max
 * staleness spec, "API" (a positive integer; -1 means no maximum).
 */
export function isMaxStalenessSeconds(value: unknown): value is number {
  return value === -1 || (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_INT32);
}

/** `maxStalenessSeconds` as `value` gives it: undefined for none (-1, null or absent). */
function maxStalenessSecondsFrom(name: string, value: unknown): number | undefined {
  // null: no maximum, as the spec lets a language say it ("None, null, -1").
  if (value === undefined || value === null) return undefined;
  if (!isMaxStalenessSeconds(value)) throw new InvalidOptionError(name, value, MAX_STALENESS_SECONDS_ALLOWED);
  return value === -1 ? undefined : value;
}

/**
 * The smallest maxStalenessSeconds a replica set takes, in seconds: 90. Source: max staleness spec,
 * "smallestMaxStalenessSeconds".
 */
export const SMALLEST_MAX_STALENESS_SECONDS = 90;

/**
 * How often an idle primary writes a no-op, refreshing its secondaries' lastWriteDate, in ms: 10,000. Source: max
 * staleness spec, "idleWritePeriodMS".
 */
export const IDLE_WRITE_PERIOD_MS = 10_000;

/**
 * Checks that `readPreference`'s maxStalenessSeconds (if any) can be met in a replica set whose servers are checked
 * every `heartbeatFrequencyMS` (ms): at least {@link SMALLEST_MAX_STALENESS_SECONDS} and at least (heartbeatFrequencyMS
 * + {@link IDLE_WRITE_PERIOD_MS}) / 1000. A staleness estimate is only as good as the last check and the last no-op
 * write, so a smaller one would take no secondary, or take them at random.
 *
 * @throws {InvalidOptionError} naming `<option>.maxStalenessSeconds`, saying the least value allowed, when it is
 *   smaller.
 *
 * Source: server selection spec, "maxStalenessSeconds" ("A driver MUST raise an error if the TopologyType is
 * ReplicaSetWithPrimary or ReplicaSetNoPrimary and either of these conditions is false"); max staleness spec,
 * "Smallest allowed value for maxStalenessSeconds".
 */
export function checkMaxStalenessSeconds(option: string, readPreference: ReadPreference, heartbeatFrequencyMS: number): void {
  const seconds = readPreference.maxStalenessSeconds;
  if (seconds === undefined) return;
  const least = Math.max(SMALLEST_MAX_STALENESS_SECONDS, Math.ceil((heartbeatFrequencyMS + IDLE_WRITE_PERIOD_MS) / 1000));
  if (seconds < least) {
    throw new InvalidOptionError(
      `${option}.maxStalenessSeconds`,
      seconds,
      `at least ${least} in a replica set (90, and heartbeatFrequencyMS ${heartbeatFrequencyMS} ms + the primary's 10,000 ms no-op write period)`,
    );
  }
}

/**
 * `readPreference` as a command's `$readPreference` field carries it: `{ mode, tags?, maxStalenessSeconds? }` (a new
 * object; tags copied). Source: server selection spec, "Document structure".
 */
export function readPreferenceDocument(readPreference: ReadPreference): Document {
  const document: Document = { mode: readPreference.mode };
  if (readPreference.tags !== undefined) document.tags = readPreference.tags.map((set) => ({ ...set }));
  if (readPreference.maxStalenessSeconds !== undefined) document.maxStalenessSeconds = readPreference.maxStalenessSeconds;
  return document;
}

/**
 * `readPreference` in words, as server selection's log messages and errors name it: the mode alone when it has no
 * tags or maxStalenessSeconds (`secondary`), else its `$readPreference` document as JSON
 * (`{"mode":"secondary","tags":[{"dc":"ny"}],"maxStalenessSeconds":120}`). Source: server selection spec, "Logging"
 * (`selector`: "String representation of the selector being used").
 */
export function describeReadPreference(readPreference: ReadPreference): string {
  if (readPreference.tags === undefined && readPreference.maxStalenessSeconds === undefined) return readPreference.mode;
  return JSON.stringify(readPreferenceDocument(readPreference));
}
