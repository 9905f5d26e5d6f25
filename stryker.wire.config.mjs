// Mutation testing of the wire layer (message framing, OP_MSG, OP_COMPRESSED) against the specs that exercise it:
// `npx stryker run stryker.wire.config.mjs`. Everything else is as in stryker.config.mjs.
import base from './stryker.config.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...base,
  mutate: ['lib/connection/wire-protocol.ts', 'lib/connection/op-msg.ts', 'lib/connection/op-compressed.ts'],
  mochaOptions: {
    ...base.mochaOptions,
    spec: [
      'spec/connection/wire-protocol.spec.ts',
      'spec/connection/wire-protocol.fuzz.spec.ts',
      'spec/connection/malformed-replies.spec.ts',
      'spec/connection/hostile-server.spec.ts',
      'spec/connection/connection.spec.ts',
      // OP_COMPRESSED negotiation and the exhaust (moreToCome) replies.
      'spec/connection/connect.spec.ts',
      'spec/connection/exhaust.spec.ts',
    ],
  },
  htmlReporter: { fileName: 'reports/mutation-wire/index.html' },
  jsonReporter: { fileName: 'reports/mutation-wire/mutation.json' },
};
