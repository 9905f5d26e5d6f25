/**
 * Fuzzer of connection strings (fixed seed in `npm test`; `npm run fuzz` runs more): passwords with every character
 * that confuses URI parsing, raw or percent-encoded, in URIs with and without options.
 */
import * as fc from 'fast-check';
import { inspect } from 'node:util';
import { parseConnectionString } from '../lib/connection-string';
import { fuzzParameters } from './support/fuzz';

describe('parseConnectionString (fuzz)', function () {
  it('no error, warning or redacted URI ever carries the password', function () {
    // Passwords with every character that confuses URI parsing, raw or percent-encoded, in URIs with and without
    // options; whatever happens (parsed, warned about, refused), the password appears nowhere.
    const special = fc.constantFrom('/', '@', ':', '?', '#', '%', ' ', '[', ']', '&', '=', ',');
    const password = fc
      .array(fc.oneof(fc.constantFrom(...'abcdefghXYZ0123456789'.split('')), special), { minLength: 6, maxLength: 16 })
      .map((chars) => `Pw${chars.join('')}`);
    const query = fc.constantFrom('', '?maxPoolSize=5', '?authSource=admin&appName=x', '?maxPoolSize=-1&bogus=1', '?tlsCertificateKeyFilePassword=k',
      '?readPreference=nearest&readPreferenceTags=dc:ny&readPreferenceTags=bad&maxStalenessSeconds=0', '?maxStalenessSeconds=120', '?readPreferenceTags=dc:ny');
    fc.assert(
      fc.property(password, fc.boolean(), fc.constantFrom('h1', 'h1:27018,h2', '[::1]:27017', '/tmp/m.sock'), query, (pw, encode, hosts, q) => {
        const written = encode ? encodeURIComponent(pw) : pw;
        const uri = `mongodb://user:${written}@${hosts.replace('/tmp/m.sock', encodeURIComponent('/tmp/m.sock'))}/db${q}`;
        let shown: string;
        try {
          const parsed = parseConnectionString(uri);
          shown = [parsed.redacted, ...parsed.warnings, inspect(parsed, { depth: 5 }), JSON.stringify(parsed)].join('\n');
        } catch (e) {
          shown = [String((e as Error).message), inspect(e, { depth: 5 })].join('\n');
        }
        for (const secret of new Set([pw, written])) {
          if (shown.includes(secret)) throw new Error(`password ${JSON.stringify(secret)} shown for ${JSON.stringify(uri)}`);
        }
      }),
      fuzzParameters(400),
    );
  });
});
