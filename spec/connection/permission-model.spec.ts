/**
 * Pools, connections and their options in a process run under Node's permission model (`--permission`, stable since
 * Node.js 22.13 and 23.5; `--experimental-permission` on Node.js 20), as hardened deployments run services: file reads
 * allowed only under the application's directory, no file writes, no native addons. Each path must work, or fail with
 * an error that names the option and the permission it lacks; none may throw from Node's file system where the pool
 * only wanted to know something (the handshake's look for `/.dockerenv`).
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

/** The flag that turns the permission model on in this Node.js, if it has one. */
function permissionFlag(): string | undefined {
  const flags = process.allowedNodeEnvironmentFlags;
  return flags.has('--permission') ? '--permission' : flags.has('--experimental-permission') ? '--experimental-permission' : undefined;
}

describe('under Node\'s permission model (reads allowed only under the application\'s directory)', function () {
  this.timeout(60_000);
  let result: Record<string, unknown>;
  let dir: string;

  before(async function () {
    const flag = permissionFlag();
    if (flag === undefined || process.versions.bun !== undefined || process.versions.deno !== undefined) return this.skip();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-permission-'));
    const denied = path.join(dir, 'ca.pem');
    fs.copyFileSync(path.join(ROOT, 'spec/fixtures/tls/ca.pem'), denied);
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        // Node.js 25 and later deny the network too unless allowed (the endpoint listens, the pool connects).
        [flag, `--allow-fs-read=${ROOT}/*`, ...(process.allowedNodeEnvironmentFlags.has('--allow-net') ? ['--allow-net'] : []), '-r', 'ts-node/register/transpile-only', path.join(ROOT, 'spec/support/permission-model-child.ts')],
        { cwd: ROOT, env: { ...process.env, TS_NODE_PROJECT: path.join(ROOT, 'tsconfig.json'), PERMISSION_DENIED_FILE: denied, NODE_OPTIONS: '' }, timeout: 50_000 },
        (error, out, err) => (error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out)),
      );
    });
    result = JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;
    expect(result.crashed, 'the child process').to.equal(undefined);
  });

  after(function () {
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('makes a pool and checks out a working connection; the handshake leaves the container runtime out, since /.dockerenv may not be looked at', function () {
    // Node's existsSync throws ERR_ACCESS_DENIED there rather than answer: the pool's constructor threw it.
    expect(result.metadata).to.equal(undefined);
    expect((result.env as { container?: { runtime?: string } } | null)?.container?.runtime).to.equal(undefined);
    expect(result.ping).to.equal(1);
  });

  it('refuses a TLS file it may not read with an InvalidOptionError naming the option and the permission', function () {
    expect(result.tlsCAFile).to.match(/^InvalidOptionError: Invalid tlsCAFile: ".*ca\.pem" \(tlsCAFile must be a readable PEM file \(ERR_ACCESS_DENIED: Node's permission model does not allow this process to read the file \(run it with --allow-fs-read for the file\)\)\)$/);
  });

  it('fails the read of a token file it may not read naming the flag, the system error without its message', function () {
    expect(result.tokenFile).to.equal("OIDC_TOKEN_FILE cannot be read: Node's permission model does not allow this process to read the file (run it with --allow-fs-read for the file) [Error ERR_ACCESS_DENIED (message not shown)]");
  });

  it('fails MONGODB-AWS credentials the AWS SDK may not read naming the flag and the code, the SDK\'s message not shown', function () {
    // The SDK's error was shown by its name only ("Error (message not shown)"): nothing said a permission was missing.
    expect(result.awsSdk).to.deep.equal({
      message: "Authentication failed on \"$external\" with MONGODB-AWS: the AWS SDK's default credential provider chain (@aws-sdk/credential-providers) failed: Node's permission model does not allow this process to read the file (run it with --allow-fs-read for the file)",
      cause: 'Error ERR_ACCESS_DENIED (message not shown)',
    });
  });

  it('says snappy is unavailable because native addons are not allowed, not that a reinstall is needed', function () {
    expect(result.snappy).to.equal("it is a native addon, and Node's permission model does not allow this process native addons (run it with --allow-addons)");
  });

  it('logs to stderr, with one warning naming the flag, when the log file may not be written', function () {
    expect(result.logWarnings).to.have.length(1);
    // Node.js 20's own message names no flag ("Access to this API has been restricted"); later ones name it.
    expect((result.logWarnings as string[])[0]).to.match(/^rxcmap: the log file could not be opened \(Access to this API has been restricted.*--allow-fs-write.*\); logging to stderr instead$/);
  });
});
