/**
 * lib/permission-model.ts: the words for a refusal of Node's permission model, by the scope refused.
 */
import { expect } from 'chai';
import { permissionRefusal, withPermissionRefusal } from '../lib/permission-model';

const denied = (permission?: string): Error => Object.assign(new Error('Access to this API has been restricted'), { code: 'ERR_ACCESS_DENIED', ...(permission === undefined ? {} : { permission }) });

describe('permissionRefusal (what Node\'s permission model refused, and the flag that allows it)', function () {
  it('names the flag of each scope, the network for a refusal with no scope (a connect, a DNS query)', function () {
    expect(permissionRefusal(denied('FileSystemRead'))).to.equal("Node's permission model does not allow this process to read the file (run it with --allow-fs-read for the file)");
    expect(permissionRefusal(denied('FileSystemWrite'))).to.equal("Node's permission model does not allow this process to write the file (run it with --allow-fs-write for the file)");
    expect(permissionRefusal(denied('ChildProcess'))).to.equal("Node's permission model does not allow this process child processes (run it with --allow-child-process)");
    expect(permissionRefusal(denied())).to.equal("Node's permission model does not allow this process the network (run it with --allow-net)");
    expect(permissionRefusal(denied('Inspector'))).to.equal("Node's permission model does not allow this process what it asked (Inspector; run it with the --allow-* flag that allows it)");
  });

  it('finds the refusal in the cause of an error that wraps it (a library\'s), and nothing in other errors', function () {
    expect(permissionRefusal(new Error('credentials could not be loaded', { cause: denied('FileSystemRead') }))).to.include('--allow-fs-read');
    expect(permissionRefusal(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).to.equal(undefined);
    expect(permissionRefusal('ERR_ACCESS_DENIED')).to.equal(undefined);
    expect(permissionRefusal(undefined)).to.equal(undefined);
  });

  it('takes an error whose getters throw, or whose causes loop, for no refusal rather than throwing', function () {
    const hostile = Object.defineProperty(new Error('x'), 'code', { get: () => { throw new Error('getter'); } });
    expect(permissionRefusal(hostile)).to.equal(undefined);
    const looping = new Error('a') as Error & { cause?: unknown };
    looping.cause = looping;
    expect(permissionRefusal(looping)).to.equal(undefined);
  });

  it('adds the refusal to a text that names no flag, and leaves one that does (Node.js 22 and later name it) or another error\'s as it is', function () {
    expect(withPermissionRefusal('querySrv ERR_ACCESS_DENIED _mongodb._tcp.example.com', denied())).to.equal(
      "querySrv ERR_ACCESS_DENIED _mongodb._tcp.example.com: Node's permission model does not allow this process the network (run it with --allow-net)",
    );
    const named = 'connect ERR_ACCESS_DENIED Access to this API has been restricted. Use --allow-net to manage permissions.';
    expect(withPermissionRefusal(named, denied('Net'))).to.equal(named);
    expect(withPermissionRefusal('connect ECONNREFUSED 127.0.0.1:1', Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).to.equal('connect ECONNREFUSED 127.0.0.1:1');
  });
});
