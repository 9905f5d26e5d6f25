/** A full garbage collection in a test, with or without `--expose-gc` (V8's flag set at run time). */
import * as v8 from 'node:v8';
import * as vm from 'node:vm';

/** Runs a full garbage collection. */
export const fullGc: () => void = (() => {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
})();
