import { expect } from 'chai';
import { DEFAULT_POOL_OPTIONS, InvalidOptionError } from '../lib';
import { resolvePoolOptions } from '../lib/options';

describe('resolvePoolOptions', function () {
  it('applies the CMAP defaults and records only what the user set', function () {
    const o = resolvePoolOptions({ maxPoolSize: 5, maxIdleTimeMS: undefined });
    expect(o).to.include({ ...DEFAULT_POOL_OPTIONS, maxPoolSize: 5 });
    expect(o.userSet).to.deep.equal({ maxPoolSize: 5 });
    expect(Object.isFrozen(o)).to.equal(true);
    expect(DEFAULT_POOL_OPTIONS).to.include({ maxPoolSize: 100, minPoolSize: 0, maxIdleTimeMS: 0, maxConnecting: 2, waitQueueTimeoutMS: 0 });
  });

  it('names the option, the value and what is allowed', function () {
    let error: InvalidOptionError | undefined;
    try {
      resolvePoolOptions({ maxConnecting: -3 });
    } catch (e) {
      error = e as InvalidOptionError;
    }
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect(error).to.include({ option: 'maxConnecting', value: -3, allowed: 'an integer > 0' });
    expect(error!.message).to.equal('Invalid maxConnecting: -3 (maxConnecting must be an integer > 0)');
  });

  it('allows a negative backgroundThreadIntervalMS (never run) but not 0', function () {
    expect(resolvePoolOptions({ backgroundThreadIntervalMS: -1 }).backgroundThreadIntervalMS).to.equal(-1);
    expect(() => resolvePoolOptions({ backgroundThreadIntervalMS: 0 })).to.throw(InvalidOptionError);
  });
});
