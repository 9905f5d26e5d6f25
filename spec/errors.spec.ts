/** The errors rxcmap raises: one base class, so `instanceof CmapError` tells a pool's error from any other. */
import { expect } from 'chai';
import * as rxcmap from '../lib';
import { CmapError, PoolClearedError } from '../lib';
import { inWords } from '../lib/errors';

describe('errors', function () {
  it('every error class the package exports extends CmapError', function () {
    const errorClasses = Object.entries(rxcmap).filter(
      ([, value]) => typeof value === 'function' && value.prototype instanceof Error,
    ) as [string, abstract new (...args: never[]) => Error][];
    expect(errorClasses.length, 'error classes exported').to.be.above(15);
    const outside = errorClasses.filter(([, value]) => value !== CmapError && !(value.prototype instanceof CmapError)).map(([name]) => name);
    expect(outside).to.deep.equal([]);
  });

  it('inWords never shows the password of a URI in what it writes, whatever was thrown', function () {
    // A clear's cause, or what a log sink or an option getter threw, quoted a connection string as it was.
    const uri = 'mongodb://bob:hunter2@db.example.net/';
    const shown = [
      inWords(new Error(`cannot reach ${uri}`)),
      inWords(uri),
      inWords(Object.assign(Object.create(null) as object, { uri })),
      PoolClearedError.interrupted('h:1', new Error(`lost ${uri}`)).message,
      PoolClearedError.cleared('h:1', uri).message,
    ];
    for (const words of shown) {
      expect(words).to.not.include('hunter2');
      expect(words).to.include('mongodb://<credentials not shown>@db.example.net/');
    }
  });
});
