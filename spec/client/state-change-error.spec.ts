/**
 * stateChangeError, isStaleTopologyVersion and isStaleServerDescription: the server discovery and monitoring spec's "not writable primary" and
 * "node is recovering" classification of a reply, and its topologyVersion comparison.
 */
import { Long, ObjectId } from 'bson';
import { expect } from 'chai';
import { isStaleServerDescription, isStaleTopologyVersion, stateChangeError } from '../../lib/client/state-change-error';

describe('stateChangeError', function () {
  it('knows every "not writable primary" and "node is recovering" code, and which say "node is shutting down"', function () {
    for (const code of [10107, 13435, 10058, 11602, 13436, 189]) {
      expect(stateChangeError({ ok: 0, code, errmsg: 'x' }), String(code)).to.include({ shuttingDown: false });
    }
    for (const code of [91, 11600]) expect(stateChangeError({ ok: 0, code, errmsg: 'x' }), String(code)).to.include({ shuttingDown: true });
    for (const code of [2, 6, 89, 262, 50]) expect(stateChangeError({ ok: 0, code, errmsg: 'not master' }), String(code)).to.equal(undefined);
  });

  it('reads the message only when the reply has no code', function () {
    for (const errmsg of ['not master', 'node is recovering', 'not master or secondary; cannot read']) {
      expect(stateChangeError({ ok: 0, errmsg }), errmsg).to.include({ shuttingDown: false });
    }
    expect(stateChangeError({ ok: 0, code: 0, errmsg: 'not master' }), 'code 0 counts as none').to.not.equal(undefined);
    expect(stateChangeError({ ok: 0, errmsg: 'Not Master' }), 'matched as written').to.equal(undefined);
    expect(stateChangeError({ ok: 0, errmsg: 'interrupted' })).to.equal(undefined);
  });

  it('checks a successful reply\'s writeConcernError the same way, never its writeErrors', function () {
    const wce = { code: 91, errmsg: 'Replication is being shut down' };
    expect(stateChangeError({ ok: 1, writeConcernError: wce })).to.deep.include({ error: wce, shuttingDown: true });
    expect(stateChangeError({ ok: 1, writeConcernError: { errmsg: 'not master' } })).to.include({ shuttingDown: false });
    expect(stateChangeError({ ok: 1, writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' } })).to.equal(undefined);
    expect(stateChangeError({ ok: 1, writeErrors: [{ index: 0, code: 10107, errmsg: 'not master' }] })).to.equal(undefined);
    expect(stateChangeError({ ok: 1 })).to.equal(undefined);
  });

  it('counts ok: true as success, as ok: 1: its code and errmsg are not read, its writeConcernError is', function () {
    expect(stateChangeError({ ok: true, code: 10107, errmsg: 'not master' })).to.equal(undefined);
    expect(stateChangeError({ ok: true, writeConcernError: { code: 91, errmsg: 'shutting down' } })).to.include({ shuttingDown: true });
    for (const ok of [0, false, 0.5, '1', undefined]) {
      expect(stateChangeError({ ok, code: 10107, errmsg: 'x' }), `ok: ${String(ok)} is a failure`).to.include({ shuttingDown: false });
    }
  });

  it('never throws for a reply of odd shape: a writeConcernError that is null or not an object, an errmsg or code of another type', function () {
    for (const writeConcernError of [null, 'not master', 91]) {
      expect(stateChangeError({ ok: 1, writeConcernError }), String(writeConcernError)).to.equal(undefined);
    }
    expect(stateChangeError({ ok: 0 }), 'neither code nor errmsg').to.equal(undefined);
    expect(stateChangeError({ ok: 0, errmsg: 42 }), 'an errmsg that is not a string').to.equal(undefined);
    expect(stateChangeError({ ok: 1, writeConcernError: {} }), 'an empty writeConcernError').to.equal(undefined);
    expect(stateChangeError({ ok: 0, code: '10107', errmsg: 'not master' }), 'a code that is not a number counts as none: the message is read').to.include({ shuttingDown: false });
    expect(stateChangeError({ ok: 0, code: '10107', errmsg: 'interrupted' })).to.equal(undefined);
  });

  it('reads a legacy reply\'s $err as its message when it has no errmsg', function () {
    expect(stateChangeError({ ok: 0, $err: 'not master' })).to.include({ shuttingDown: false });
    expect(stateChangeError({ $err: 'node is recovering' })).to.include({ shuttingDown: false });
    expect(stateChangeError({ ok: 0, errmsg: 'interrupted', $err: 'not master' }), 'errmsg first').to.equal(undefined);
    expect(stateChangeError({ ok: 0, $err: 'interrupted' })).to.equal(undefined);
  });

  it('carries the reply\'s topologyVersion', function () {
    const topologyVersion = { processId: new ObjectId(), counter: Long.fromNumber(3) };
    expect(stateChangeError({ ok: 0, code: 10107, topologyVersion })?.topologyVersion).to.deep.equal(topologyVersion);
    expect(stateChangeError({ ok: 1, writeConcernError: { code: 91, topologyVersion } })?.topologyVersion, "else the error document's").to.deep.equal(topologyVersion);
    expect(stateChangeError({ ok: 0, code: 10107 })?.topologyVersion).to.equal(undefined);
    expect(stateChangeError({ ok: 0, code: 10107, topologyVersion: { counter: 3 } })?.topologyVersion, 'no processId: none').to.equal(undefined);
  });
});

describe('isStaleTopologyVersion', function () {
  const processId = new ObjectId();
  const version = (counter: number | Long | bigint, id = processId) => ({ processId: id, counter });

  it('is stale when the error\'s counter is not greater, for the same process (a Long, a number or a bigint)', function () {
    expect(isStaleTopologyVersion(version(Long.fromNumber(2)), version(2))).to.equal(true);
    expect(isStaleTopologyVersion(version(2), version(Long.fromNumber(1)))).to.equal(true);
    expect(isStaleTopologyVersion(version(2n), version(3))).to.equal(false);
    expect(isStaleTopologyVersion(version(2), version(2, ObjectId.createFromHexString(processId.toHexString()))), "an equal ObjectId").to.equal(true);
  });

  it('counts as newer when either is missing, or the processes differ', function () {
    expect(isStaleTopologyVersion(undefined, version(0))).to.equal(false);
    expect(isStaleTopologyVersion(version(0), undefined)).to.equal(false);
    expect(isStaleTopologyVersion(version(5), version(0, new ObjectId()))).to.equal(false);
  });
});

describe('isStaleServerDescription', function () {
  const processId = new ObjectId();
  const version = (counter: number | Long, id = processId) => ({ processId: id, counter });

  it('is stale only when the reply\'s counter is smaller, for the same process; an equal one is accepted', function () {
    expect(isStaleServerDescription(version(Long.fromNumber(2)), version(1))).to.equal(true);
    expect(isStaleServerDescription(version(2), version(Long.fromNumber(2)))).to.equal(false);
    expect(isStaleServerDescription(version(2), version(3))).to.equal(false);
  });

  it('accepts the reply when either is missing, the processes differ, or a counter is not an integer', function () {
    expect(isStaleServerDescription(undefined, version(0))).to.equal(false);
    expect(isStaleServerDescription(version(3), undefined)).to.equal(false);
    expect(isStaleServerDescription(version(3), version(0, new ObjectId()))).to.equal(false);
    expect(isStaleServerDescription(version(3), version(0.5))).to.equal(false);
  });
});
