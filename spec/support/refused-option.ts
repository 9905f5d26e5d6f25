/**
 * The option an InvalidOptionError names, for tests of options refused: what `f` throws must be an InvalidOptionError.
 */
import { expect } from 'chai';
import { InvalidOptionError } from '../../lib';

/** The `option` of the InvalidOptionError `f` throws, or `'accepted'` when it throws nothing. */
export function refusedOption(f: () => unknown): string {
  try {
    f();
  } catch (error) {
    expect(error).to.be.instanceOf(InvalidOptionError);
    return (error as InvalidOptionError).option;
  }
  return 'accepted';
}
