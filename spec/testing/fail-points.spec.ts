import { expect } from 'chai';
import { InvalidOptionError } from '../../lib';
import { FailCommandPoint } from '../../lib/testing';

// The official driver's table of the codes it acts on, by the server's names (not exported from its entry point).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { MONGODB_ERROR_CODES } = require('mongodb/lib/error.js') as { MONGODB_ERROR_CODES: Record<string, number> };

describe('FailCommandPoint (failCommand)', function () {
  it('alwaysOn fails every matching command, case-insensitively, until turned off', function () {
    const fp = new FailCommandPoint();
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['isMaster'], errorCode: 91 } })).to.deep.equal({ ok: 1 });
    expect(fp.match('ismaster', undefined)?.error).to.include({ ok: 0, code: 91, codeName: 'ShutdownInProgress' });
    expect(fp.match('ISMASTER', 'app')).to.not.equal(undefined);
    expect(fp.match('ping', undefined)).to.equal(undefined);
    fp.configure({ configureFailPoint: 'failCommand', mode: 'off' });
    expect(fp.match('ismaster', undefined)).to.equal(undefined);
  });

  it('{ times: n } fails n times then turns itself off; { skip: n } lets n through first', function () {
    const fp = new FailCommandPoint();
    fp.configure({ configureFailPoint: 'failCommand', mode: { times: 2 }, data: { failCommands: ['ping'], closeConnection: true } });
    expect(fp.match('ping', undefined)?.closeConnection).to.equal(true);
    expect(fp.match('ping', undefined)).to.not.equal(undefined);
    expect(fp.match('ping', undefined)).to.equal(undefined);
    expect(fp.active).to.equal(false);
    fp.configure({ configureFailPoint: 'failCommand', mode: { skip: 1 }, data: { failCommands: ['ping'], errorCode: 2 } });
    expect(fp.match('ping', undefined)).to.equal(undefined);
    expect(fp.match('ping', undefined)).to.not.equal(undefined);
  });

  it('a new mode replaces the former one whole: alwaysOn (or off, then alwaysOn) after { skip: n } fails the next command at once', function () {
    const fp = new FailCommandPoint();
    const data = { failCommands: ['ping'], errorCode: 2 };
    fp.configure({ configureFailPoint: 'failCommand', mode: { skip: 2 }, data });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data });
    expect(fp.match('ping', undefined)?.error).to.include({ code: 2 });
    fp.configure({ configureFailPoint: 'failCommand', mode: { skip: 3 }, data });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'off' });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data });
    expect(fp.wouldMatch('ping', undefined)).to.equal(true);
    expect(fp.match('ping', undefined)?.error).to.include({ code: 2 });
  });

  it('counts a command as a use only when the data acts on it: data with nothing to do leaves { times: 1 } for a later configuration', function () {
    const fp = new FailCommandPoint();
    fp.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'] } });
    expect(fp.wouldMatch('insert', undefined)).to.equal(false);
    expect(fp.match('insert', undefined)).to.equal(undefined);
  });

  it('writeConcernError: one use of { times: 1 } gives the document (and errorLabels) to add to the reply', function () {
    const fp = new FailCommandPoint();
    const writeConcernError = { code: 91, errmsg: 'Replication is being shut down' };
    fp.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], writeConcernError, errorLabels: ['RetryableWriteError'] } });
    expect(fp.match('insert', undefined)?.writeConcernError).to.deep.equal({ writeConcernError, errorLabels: ['RetryableWriteError'] });
    expect(fp.active).to.equal(false);
  });

  it('refuses, naming it, a mode or data field it does not implement, and a negative count, instead of ignoring it', function () {
    const fp = new FailCommandPoint();
    const namespace = fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], errorCode: 2, namespace: 'db.other' } });
    expect(namespace).to.include({ ok: 0, code: 2 });
    expect(namespace.errmsg).to.include('data.namespace');
    expect(fp.active).to.equal(false);
    const probability = fp.configure({ configureFailPoint: 'failCommand', mode: { activationProbability: 0.5 }, data: { failCommands: ['find'], errorCode: 2 } });
    expect(probability).to.include({ ok: 0, code: 2, codeName: 'BadValue' });
    expect(probability.errmsg).to.include('activationProbability');
    // With a count beside it too: the probability must not be dropped, leaving a fail point that fails every time.
    const counted = fp.configure({ configureFailPoint: 'failCommand', mode: { times: 3, activationProbability: 0.5 }, data: { failCommands: ['find'], errorCode: 2 } });
    expect(counted).to.include({ ok: 0, code: 2 });
    expect(counted.errmsg).to.include('activationProbability');
    // Each count given must be one, whichever comes beside it: a bad times with a skip is no skip-only mode.
    for (const mode of [{ times: -1, skip: 2 }, { times: 1.5, skip: 0 }, { times: 'x', skip: 0 }, { times: 1, skip: -1 }, { times: null }]) {
      const reply = fp.configure({ configureFailPoint: 'failCommand', mode, data: { failCommands: ['find'], errorCode: 2 } });
      expect(reply, JSON.stringify(mode)).to.include({ ok: 0, code: 2 });
      expect(fp.active, JSON.stringify(mode)).to.equal(false);
    }
    expect(fp.active).to.equal(false);
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: { times: -1 }, data: { failCommands: ['find'], errorCode: 2 } })).to.include({ ok: 0 });
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], errorCode: 2, failInternalCommands: true } })).to.deep.equal({ ok: 1 });
  });

  it("names an error code as mongod does: its name, or Location<code> for one it has no name for (never another code's name)", function () {
    const fp = new FailCommandPoint();
    const codeName = (errorCode: number): unknown => {
      fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], errorCode } });
      return fp.match('find', undefined)?.error?.codeName;
    };
    expect(codeName(13436)).to.equal('NotPrimaryOrSecondary');
    expect(codeName(50)).to.equal('MaxTimeMSExpired');
    expect(codeName(262)).to.equal('ExceededTimeLimit');
    expect(codeName(4242)).to.equal('Location4242');
  });

  it('blockConnection without a valid blockTimeMS fails the command with InvalidOptions instead of running it unblocked, as mongod', function () {
    const fp = new FailCommandPoint();
    fp.configure({ configureFailPoint: 'failCommand', mode: { times: 2 }, data: { failCommands: ['find'], blockConnection: true } });
    expect(fp.match('find', undefined)?.error).to.include({ ok: 0, code: 72, codeName: 'InvalidOptions' });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], blockConnection: true, blockTimeMS: -5 } });
    expect(fp.match('find', undefined)).to.deep.include({ blockTimeMS: 0 }).and.have.nested.property('error.code', 72);
  });

  it('affects only connections whose handshake carried data.appName, and reports blockTimeMS', function () {
    const fp = new FailCommandPoint();
    fp.configure({
      configureFailPoint: 'failCommand',
      mode: 'alwaysOn',
      data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 750, appName: 'A' },
    });
    expect(fp.match('hello', 'B')).to.equal(undefined);
    expect(fp.match('hello', undefined)).to.equal(undefined);
    expect(fp.match('hello', 'A')).to.deep.equal({ blockTimeMS: 750, closeConnection: false, error: undefined, writeConcernError: undefined });
  });

  it('refuses, naming it, a data value it would otherwise not act on (mongod leaves such a fail point silently doing nothing)', function () {
    const fp = new FailCommandPoint();
    const invalid: [string, unknown][] = [
      ['errorCode', 'x'],
      ['errorCode', 2.5],
      ['errorCode', Number.NaN],
      ['errorCode', null],
      ['errorCode', 2 ** 31],
      ['errorLabels', 'RetryableWriteError'],
      ['errorLabels', [5]],
      ['closeConnection', 'true'],
      ['closeConnection', 1],
      ['blockConnection', 'yes'],
      ['appName', 5],
    ];
    for (const [field, value] of invalid) {
      const reply = fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], closeConnection: true, [field]: value } });
      expect(reply, `${field}: ${String(value)}`).to.include({ ok: 0, code: 2, codeName: 'BadValue' });
      expect(reply.errmsg, `${field}: ${String(value)}`).to.include(`data.${field}`);
      expect(fp.active, `${field}: ${String(value)}`).to.equal(false);
    }
    // Valid values are still taken, and a blockTimeMS mongod would take and then fail the command with keeps doing so.
    const valid = { failCommands: ['find'], errorCode: 91, errorLabels: ['RetryableWriteError'], closeConnection: false, blockConnection: true, blockTimeMS: -5, appName: 'A' };
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: valid })).to.deep.equal({ ok: 1 });
    expect(fp.match('find', 'A')?.error).to.include({ code: 72 });
  });

  it('refuses an onConfigure that is not a function at construction, naming it, rather than failing each configuration', function () {
    for (const value of [5, 'x', null, {}]) {
      expect(() => new FailCommandPoint(value as never), String(value)).to.throw(InvalidOptionError, /^Invalid onConfigure: .* \(onConfigure must be a function/);
    }
    expect(new FailCommandPoint(undefined).configure({ configureFailPoint: 'failCommand', mode: 'off' })).to.deep.equal({ ok: 1 });
  });

  it('answers a command that is not a document (null, a number, an array) with BadValue instead of throwing', function () {
    const fp = new FailCommandPoint();
    for (const command of [null, undefined, 5, 'failCommand', ['failCommand']]) {
      expect(fp.configure(command as never), JSON.stringify(command)).to.include({ ok: 0, code: 2, codeName: 'BadValue' });
    }
    expect(fp.active).to.equal(false);
  });

  it('refuses an unknown fail point, a missing failCommands, and an unknown mode', function () {
    const fp = new FailCommandPoint();
    expect(fp.configure({ configureFailPoint: 'other', mode: 'alwaysOn' })).to.include({ ok: 0 });
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: {} })).to.include({ ok: 0 });
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'sometimes', data: { failCommands: [] } })).to.include({ ok: 0 });
  });
  it('names every error code of its table as mongod and the official driver do', function () {
    // The driver's MONGODB_ERROR_CODES where it has the code, else mongod's error_codes.yml.
    const names: [number, string][] = [
      [1, 'InternalError'], [2, 'BadValue'], [6, 'HostUnreachable'], [7, 'HostNotFound'], [8, 'UnknownError'],
      [11, 'UserNotFound'], [13, 'Unauthorized'], [18, 'AuthenticationFailed'], [20, 'IllegalOperation'],
      [24, 'LockTimeout'], [26, 'NamespaceNotFound'], [43, 'CursorNotFound'], [50, 'MaxTimeMSExpired'],
      [59, 'CommandNotFound'], [64, 'WriteConcernTimeout'], [72, 'InvalidOptions'], [79, 'UnknownReplWriteConcern'],
      [89, 'NetworkTimeout'], [91, 'ShutdownInProgress'], [100, 'UnsatisfiableWriteConcern'], [112, 'WriteConflict'],
      [134, 'ReadConcernMajorityNotAvailableYet'], [175, 'QueryPlanKilled'], [189, 'PrimarySteppedDown'],
      [237, 'CursorKilled'], [251, 'NoSuchTransaction'], [262, 'ExceededTimeLimit'], [9001, 'SocketException'],
      [10107, 'NotWritablePrimary'], [11000, 'DuplicateKey'], [11600, 'InterruptedAtShutdown'], [11601, 'Interrupted'],
      [11602, 'InterruptedDueToReplStateChange'], [13435, 'NotPrimaryNoSecondaryOk'], [13436, 'NotPrimaryOrSecondary'],
    ];
    const fp = new FailCommandPoint();
    const named = names.map(([errorCode]) => {
      fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], errorCode } });
      return [errorCode, fp.match('find', undefined)?.error?.codeName];
    });
    expect(named).to.deep.equal(names);
    for (const [name, code] of Object.entries(MONGODB_ERROR_CODES)) {
      if (names.some(([c]) => c === code)) expect(names.find(([c]) => c === code)?.[1], String(code)).to.equal(name);
    }
  });

  it('the error reply is the one mongod sends: its errmsg, code, codeName and errorLabels', function () {
    const fp = new FailCommandPoint();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], errorCode: 91, errorLabels: ['RetryableWriteError'] } });
    expect(fp.match('insert', undefined)?.error).to.deep.equal({
      ok: 0,
      errmsg: "Failing command via 'failCommand' failpoint",
      code: 91,
      codeName: 'ShutdownInProgress',
      errorLabels: ['RetryableWriteError'],
    });
  });

  it('writeConcernError: no errorLabels field for empty errorLabels, and a null writeConcernError acts on nothing', function () {
    const fp = new FailCommandPoint();
    const writeConcernError = { code: 64, errmsg: 'waiting for replication timed out' };
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], writeConcernError, errorLabels: [] } });
    expect(fp.match('insert', undefined)?.writeConcernError).to.deep.equal({ writeConcernError });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], writeConcernError: null } });
    expect(fp.wouldMatch('insert', undefined)).to.equal(false);
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], writeConcernError: null, closeConnection: true } });
    expect(fp.match('insert', undefined)).to.deep.equal({ blockTimeMS: 0, closeConnection: true, error: undefined, writeConcernError: undefined });
  });

  it('blockTimeMS: 0 is a valid block, ignored without blockConnection; any other non-negative integer is required, with mongod\'s message, and the command is neither blocked nor its connection closed', function () {
    const fp = new FailCommandPoint();
    const action = (data: object): unknown => {
      fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], ...data } });
      return fp.match('find', undefined);
    };
    expect(action({ blockConnection: true, blockTimeMS: 0 })).to.deep.equal({ blockTimeMS: 0, closeConnection: false, error: undefined, writeConcernError: undefined });
    expect(action({ blockConnection: false, blockTimeMS: 500, closeConnection: true })).to.deep.include({ blockTimeMS: 0, closeConnection: true });
    const invalidOptions = (errmsg: string): object => ({ blockTimeMS: 0, closeConnection: false, error: { ok: 0, errmsg, code: 72, codeName: 'InvalidOptions' }, writeConcernError: undefined });
    expect(action({ blockConnection: true, closeConnection: true })).to.deep.equal(invalidOptions("must specify 'blockTimeMS' when 'blockConnection' is true"));
    for (const blockTimeMS of [-5, 2.5, '10', null]) {
      expect(action({ blockConnection: true, blockTimeMS }), String(blockTimeMS)).to.deep.equal(invalidOptions("'blockTimeMS' must be a non-negative integer"));
    }
  });

  it('{ times: 0 } fails no command; { skip: 0 } fails every one; an empty or a non-document mode is refused, naming it, without throwing', function () {
    const fp = new FailCommandPoint();
    const data = { failCommands: ['find'], errorCode: 2 };
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: { times: 0 }, data })).to.deep.equal({ ok: 1 });
    expect(fp.wouldMatch('find', undefined)).to.equal(false);
    expect(fp.match('find', undefined)).to.equal(undefined);
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: { skip: 0 }, data })).to.deep.equal({ ok: 1 });
    expect(fp.match('find', undefined)?.error).to.include({ code: 2 });
    expect(fp.match('find', undefined)?.error).to.include({ code: 2 });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'off' });
    for (const mode of [null, 5, 'sometimes', {}, [], undefined]) {
      const reply = fp.configure({ configureFailPoint: 'failCommand', mode, data });
      expect(reply, String(mode)).to.deep.equal({ ok: 0, code: 2, codeName: 'BadValue', errmsg: `unsupported fail point mode: ${JSON.stringify(mode)}` });
      expect(fp.active, String(mode)).to.equal(false);
    }
  });

  it('its BadValue replies name what is wrong: a command that is not a document, an unknown fail point, a missing failCommands, a data field it does not implement', function () {
    const fp = new FailCommandPoint();
    const data = { failCommands: ['find'], errorCode: 2 };
    const refused = (command: unknown, errmsg: string | RegExp): void => {
      const reply = fp.configure(command as never);
      expect(reply, JSON.stringify(command)).to.include({ ok: 0, code: 2, codeName: 'BadValue' });
      if (typeof errmsg === 'string') expect(reply.errmsg, JSON.stringify(command)).to.equal(errmsg);
      else expect(reply.errmsg, JSON.stringify(command)).to.match(errmsg);
      expect(fp.active, JSON.stringify(command)).to.equal(false);
    };
    refused('failCommand', 'configureFailPoint takes a command document, not "failCommand"');
    refused(['failCommand'], 'configureFailPoint takes a command document, not an array');
    refused(5, 'configureFailPoint takes a command document, not 5');
    refused(null, 'configureFailPoint takes a command document, not null');
    refused({ configureFailPoint: 'failOther', mode: 'alwaysOn', data }, 'unknown fail point: failOther');
    refused({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { errorCode: 2 } }, 'failCommand requires data.failCommands (an array)');
    refused(
      { configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { ...data, threadName: 'conn1' } },
      "the embedded endpoint's failCommand does not implement data.threadName (it implements failCommands, closeConnection, blockConnection, blockTimeMS, errorCode, errorLabels, writeConcernError, appName, failInternalCommands)",
    );
  });

  it('data values: its refusal shows the value given; an errorCode is any 32-bit integer; errorLabels must all be strings', function () {
    const fp = new FailCommandPoint();
    const reply = (data: object): { ok: number; errmsg?: string } =>
      fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], closeConnection: true, ...data } }) as never;
    expect(reply({ errorCode: 'x' }).errmsg).to.equal('the embedded endpoint\'s failCommand takes data.errorCode as a 32-bit integer, not "x"');
    expect(reply({ errorCode: Number.NaN }).errmsg).to.equal("the embedded endpoint's failCommand takes data.errorCode as a 32-bit integer, not NaN");
    expect(reply({ errorCode: -(2 ** 31) - 1 })).to.include({ ok: 0 });
    expect(reply({ errorLabels: ['RetryableWriteError', 5] })).to.include({ ok: 0 });
    for (const errorCode of [-(2 ** 31), 2 ** 31 - 1]) {
      expect(reply({ errorCode }), String(errorCode)).to.deep.equal({ ok: 1 });
      expect(fp.match('find', undefined)?.error, String(errorCode)).to.include({ code: errorCode, codeName: `Location${errorCode}` });
    }
  });
});
