import { expect } from 'chai';
import { InvalidOptionError } from '../../lib';
import { LOG_COMPONENTS, resolveLogSettings, willLog } from '../../lib/logging/log-settings';

/** The InvalidOptionError resolveLogSettings throws for `options` (failing the test when it accepts them). */
function thrown(options: unknown): InvalidOptionError {
  try {
    resolveLogSettings(options as never, {});
  } catch (error) {
    if (error instanceof InvalidOptionError) return error;
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(options)}`);
}

describe('resolveLogSettings', function () {
  it('is off by default, stderr, 1000', function () {
    expect(resolveLogSettings({}, {})).to.deep.equal({
      severities: { client: 'off', command: 'off', connection: 'off', serverSelection: 'off', topology: 'off' },
      path: 'stderr',
      maxDocumentLength: 1000,
    });
  });

  it('reads MONGODB_LOG_ALL, lets a component variable win over it, and is case-insensitive', function () {
    const s = resolveLogSettings({}, { MONGODB_LOG_ALL: 'INFO', MONGODB_LOG_CONNECTION: 'Debug' });
    expect(s.severities).to.deep.equal({ client: 'info', command: 'info', connection: 'debug', serverSelection: 'info', topology: 'info' });
  });

  it('lets programmatic options win over the environment', function () {
    const env = { MONGODB_LOG_CONNECTION: 'debug', MONGODB_LOG_PATH: 'stdout', MONGODB_LOG_MAX_DOCUMENT_LENGTH: '50' };
    const s = resolveLogSettings({ componentSeverities: { connection: 'off' }, path: 'stderr', maxDocumentLength: 10 }, env);
    expect(s).to.deep.equal({ severities: { client: 'off', command: 'off', connection: 'off', serverSelection: 'off', topology: 'off' }, path: 'stderr', maxDocumentLength: 10 });
    expect(resolveLogSettings({ componentSeverities: { default: 'trace' } }, {}).severities.connection).to.equal('trace');
  });

  it('ignores invalid environment values instead of throwing', function () {
    const s = resolveLogSettings({}, { MONGODB_LOG_CONNECTION: 'loud', MONGODB_LOG_ALL: 'debug', MONGODB_LOG_MAX_DOCUMENT_LENGTH: '-3', MONGODB_LOG_PATH: '' });
    expect(s).to.deep.equal({ severities: { client: 'debug', command: 'debug', connection: 'debug', serverSelection: 'debug', topology: 'debug' }, path: 'stderr', maxDocumentLength: 1000 });
  });

  it('throws a typed error for invalid programmatic values', function () {
    expect(() => resolveLogSettings({ componentSeverities: { connection: 'loud' as never } }, {})).to.throw(InvalidOptionError, /componentSeverities\.connection/);
    expect(() => resolveLogSettings({ maxDocumentLength: -1 }, {})).to.throw(InvalidOptionError, /maxDocumentLength/);
  });

  it('reads MONGODB_LOG_CLIENT for the client component (connection string warnings), like the other components', function () {
    expect(LOG_COMPONENTS).to.deep.equal(['client', 'command', 'connection', 'serverSelection', 'topology']);
    expect(resolveLogSettings({}, { MONGODB_LOG_CLIENT: 'WARN' }).severities).to.deep.equal({ client: 'warn', command: 'off', connection: 'off', serverSelection: 'off', topology: 'off' });
    expect(resolveLogSettings({ componentSeverities: { client: 'off' } }, { MONGODB_LOG_CLIENT: 'warn' }).severities.client).to.equal('off');
    expect(resolveLogSettings({}, { MONGODB_LOG_ALL: 'error', MONGODB_LOG_CLIENT: 'debug' }).severities).to.deep.include({ client: 'debug', connection: 'error' });
  });

  it('reads MONGODB_LOG_SERVER_SELECTION for the serverSelection component (logging spec, "Components"), and takes it programmatically', function () {
    expect(resolveLogSettings({}, { MONGODB_LOG_SERVER_SELECTION: 'Debug' }).severities).to.deep.equal({ client: 'off', command: 'off', connection: 'off', serverSelection: 'debug', topology: 'off' });
    expect(resolveLogSettings({}, { MONGODB_LOG_ALL: 'info', MONGODB_LOG_SERVER_SELECTION: 'off' }).severities).to.deep.include({ serverSelection: 'off', topology: 'info' });
    expect(resolveLogSettings({ componentSeverities: { serverSelection: 'info' } }, { MONGODB_LOG_SERVER_SELECTION: 'debug' }).severities.serverSelection).to.equal('info');
    expect(thrown({ componentSeverities: { serverselection: 'debug' } })).to.include({ suggestion: 'serverSelection' });
  });

  it('rejects a misspelt logging option or component, naming the closest one, and a componentSeverities of the wrong shape', function () {
    const path = thrown({ pathh: 'stderr' });
    expect(path).to.include({ option: 'logging.pathh', suggestion: 'path' });
    expect(path.message).to.equal('Unknown option logging.pathh of logging: did you mean path?');
    expect(thrown({ componentSeverities: { conection: 'debug' } })).to.include({ option: 'logging.componentSeverities.conection', suggestion: 'connection' });
    expect(thrown({ componentSeverities: { Client: 'warn' } })).to.include({ suggestion: 'client' });
    expect(thrown({ componentSeverities: 'debug' }).message).to.equal(
      'Invalid logging.componentSeverities: "debug" (logging.componentSeverities must be an object of levels by component (client, command, connection, serverSelection, topology, default))',
    );
    expect(thrown({ componentSeverities: ['debug'] }).option).to.equal('logging.componentSeverities');
    expect(thrown([]).option).to.equal('logging');
  });

  it('names every invalid or unknown logging option by its path from the client or pool options, as logging.<option>', function () {
    const optionOf = (options: unknown): string => {
      try {
        resolveLogSettings(options as never, {});
      } catch (error) {
        if (error instanceof InvalidOptionError) return error.option;
        throw error;
      }
      throw new Error(`accepted ${JSON.stringify(options)}`);
    };
    expect(optionOf({ pathh: 'stderr' })).to.equal('logging.pathh');
    expect(optionOf({ path: 5 })).to.equal('logging.path');
    expect(optionOf({ path: '' })).to.equal('logging.path');
    expect(optionOf({ maxDocumentLength: -1 })).to.equal('logging.maxDocumentLength');
    expect(optionOf({ componentSeverities: 'debug' })).to.equal('logging.componentSeverities');
    expect(optionOf({ componentSeverities: { connection: 'loud' } })).to.equal('logging.componentSeverities.connection');
    expect(optionOf({ componentSeverities: { conection: 'debug' } })).to.equal('logging.componentSeverities.conection');
    expect(optionOf(5)).to.equal('logging');
  });

  it('reads MONGODB_LOG_MAX_DOCUMENT_LENGTH as a whole number, spaces around it allowed, and ignores anything else', function () {
    const length = (value: string): number => resolveLogSettings({}, { MONGODB_LOG_MAX_DOCUMENT_LENGTH: value }).maxDocumentLength;
    expect(length('12')).to.equal(12);
    expect(length(' 12 ')).to.equal(12);
    expect(length('0')).to.equal(0);
    for (const invalid of ['12abc', '-1', '1.5', 'abc', '', ' ']) expect(length(invalid), JSON.stringify(invalid)).to.equal(1000);
  });

  it('reads MONGODB_LOG_PATH without the spaces around it, and ignores one of spaces only', function () {
    expect(resolveLogSettings({}, { MONGODB_LOG_PATH: ' stdout ' }).path).to.equal('stdout');
    expect(resolveLogSettings({}, { MONGODB_LOG_PATH: '   ' }).path).to.equal('stderr');
  });

  it('accepts maxDocumentLength 0, over the environment', function () {
    expect(resolveLogSettings({ maxDocumentLength: 0 }, { MONGODB_LOG_MAX_DOCUMENT_LENGTH: '50' }).maxDocumentLength).to.equal(0);
  });

  it('says what each invalid programmatic value should be: option, value and what it accepts', function () {
    expect(thrown({ componentSeverities: { connection: 'loud' } })).to.include({
      option: 'logging.componentSeverities.connection',
      value: 'loud',
      allowed: 'one of off, emergency, alert, critical, error, warn, notice, info, debug, trace',
    });
    expect(thrown({ maxDocumentLength: -1 })).to.include({ option: 'logging.maxDocumentLength', value: -1, allowed: 'an integer >= 0' });
    expect(thrown({ maxDocumentLength: 1.5 })).to.include({ option: 'logging.maxDocumentLength', value: 1.5 });
    const sinkShape = '"stderr", "stdout", a file path, or a sink object with a write(message) function';
    expect(thrown({ path: '   ' })).to.include({ option: 'logging.path', value: '   ', allowed: sinkShape });
    expect(thrown({ path: null })).to.include({ option: 'logging.path', value: null, allowed: sinkShape });
    expect(thrown({ componentSeverities: { conection: 'debug' } }).message).to.equal(
      'Unknown option logging.componentSeverities.conection of logging.componentSeverities: did you mean connection?',
    );
  });

  it('willLog: debug messages need debug or trace', function () {
    expect(willLog('debug', 'debug')).to.equal(true);
    expect(willLog('trace', 'debug')).to.equal(true);
    expect(willLog('info', 'debug')).to.equal(false);
    expect(willLog('off', 'emergency')).to.equal(false);
  });
});
