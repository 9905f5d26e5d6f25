/**
 * The dependencies only some uses need, loaded on their first use rather than with the package: the connection
 * string parser (`mongodb-connection-string-url`, with the Unicode tables of its URL parser) for a `mongodb://` URI,
 * and SASLprep (`@mongodb-js/saslprep`, with its code point tables) with the first credentials. Together they were a
 * fifth of what loading rxcmap cost (about 50 of 235 ms in a fresh Node.js 20 process): a pool given an `address`,
 * with no credentials, never loads them, which shortens a serverless function's or a CLI's cold start.
 *
 * Source: extension (what loading a package costs a cold start; the libraries stay the ones the project names).
 */
import type * as ConnectionStringUrl from 'mongodb-connection-string-url';
import type * as Saslprep from '@mongodb-js/saslprep';

let connectionStringUrl: typeof ConnectionStringUrl | undefined;
let saslprepModule: typeof Saslprep | undefined;

/**
 * `mongodb-connection-string-url`'s `ConnectionString` class, loaded on the first call. Call it outside any `try`
 * that blames the URI: a module that cannot be loaded is no fault of the user's input.
 */
export function connectionStringClass(): typeof ConnectionStringUrl.ConnectionString {
  connectionStringUrl ??= require('mongodb-connection-string-url') as typeof ConnectionStringUrl;
  return connectionStringUrl.ConnectionString;
}

/**
 * `@mongodb-js/saslprep`'s SASLprep (RFC 4013) function, loaded on the first call: by `MongoCredentials`, outside
 * any `try` that blames the password (a module that cannot be loaded is no fault of the user's input), so that
 * authentication, which needs credentials, finds it loaded.
 */
export function saslprepFunction(): typeof Saslprep.saslprep {
  saslprepModule ??= require('@mongodb-js/saslprep') as typeof Saslprep;
  return saslprepModule.saslprep;
}
