import { expect } from 'chai';
import { InvalidOptionError } from '../../lib';
import { resolveLogSettings, willLog } from '../../lib/logging/log-settings';

describe('resolveLogSettings', function () {
  it('is off by default, stderr, 1000', function () {
    expect(resolveLogSettings({}, {})).to.deep.equal({
      severities: { connection: 'off', topology: 'off' },
      path: 'stderr',
      maxDocumentLength: 1000,
    });
  });

  it('reads MONGODB_LOG_ALL, lets a component variable win over it, and is case-insensitive', function () {
    const s = resolveLogSettings({}, { MONGODB_LOG_ALL: 'INFO', MONGODB_LOG_CONNECTION: 'Debug' });
    expect(s.severities).to.deep.equal({ connection: 'debug', topology: 'info' });
  });

  it('lets programmatic options win over the environment', function () {
    const env = { MONGODB_LOG_CONNECTION: 'debug', MONGODB_LOG_PATH: 'stdout', MONGODB_LOG_MAX_DOCUMENT_LENGTH: '50' };
    const s = resolveLogSettings({ componentSeverities: { connection: 'off' }, path: 'stderr', maxDocumentLength: 10 }, env);
    expect(s).to.deep.equal({ severities: { connection: 'off', topology: 'off' }, path: 'stderr', maxDocumentLength: 10 });
    expect(resolveLogSettings({ componentSeverities: { default: 'trace' } }, {}).severities.connection).to.equal('trace');
  });

  it('ignores invalid environment values instead of throwing', function () {
    const s = resolveLogSettings({}, { MONGODB_LOG_CONNECTION: 'loud', MONGODB_LOG_ALL: 'debug', MONGODB_LOG_MAX_DOCUMENT_LENGTH: '-3', MONGODB_LOG_PATH: '' });
    expect(s).to.deep.equal({ severities: { connection: 'debug', topology: 'debug' }, path: 'stderr', maxDocumentLength: 1000 });
  });

  it('throws a typed error for invalid programmatic values', function () {
    expect(() => resolveLogSettings({ componentSeverities: { connection: 'loud' as never } }, {})).to.throw(InvalidOptionError, /componentSeverities\.connection/);
    expect(() => resolveLogSettings({ maxDocumentLength: -1 }, {})).to.throw(InvalidOptionError, /maxDocumentLength/);
  });

  it('willLog: debug messages need debug or trace', function () {
    expect(willLog('debug', 'debug')).to.equal(true);
    expect(willLog('trace', 'debug')).to.equal(true);
    expect(willLog('info', 'debug')).to.equal(false);
    expect(willLog('off', 'emergency')).to.equal(false);
  });
});
