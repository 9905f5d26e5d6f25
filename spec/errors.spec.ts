/** The errors rxcmap raises: one base class, so `instanceof CmapError` tells a pool's error from any other. */
import { expect } from 'chai';
import * as rxcmap from '../lib';
import { CmapError } from '../lib';

describe('errors', function () {
  it('every error class the package exports extends CmapError', function () {
    const errorClasses = Object.entries(rxcmap).filter(
      ([, value]) => typeof value === 'function' && value.prototype instanceof Error,
    ) as [string, abstract new (...args: never[]) => Error][];
    expect(errorClasses.length, 'error classes exported').to.be.above(15);
    const outside = errorClasses.filter(([, value]) => value !== CmapError && !(value.prototype instanceof CmapError)).map(([name]) => name);
    expect(outside).to.deep.equal([]);
  });
});
