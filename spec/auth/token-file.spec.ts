/**
 * readTokenFile: a token file read bounded, and refused unread when it is not a regular file.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MAX_TOKEN_FILE_BYTES, readTokenFile } from '../../lib/auth/token-file';

/** The error readTokenFile builds through `fail`, carrying its arguments. */
class Refused extends Error {
  constructor(why: string, readonly why_: string, readonly cause_?: Error) {
    super(why);
  }
}
const fail = (why: string, cause?: Error): Error => new Refused(why, why, cause);

async function refusal(promise: Promise<unknown>): Promise<Refused> {
  try {
    await promise;
  } catch (error) {
    return error as Refused;
  }
  throw new Error('expected a refusal');
}

describe('readTokenFile', function () {
  let dir: string;
  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'token-file-'));
  });
  afterEach(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('gives a regular file\'s text as written, white space included, up to exactly 64 KiB', async function () {
    const file = path.join(dir, 'token');
    fs.writeFileSync(file, ' eyJ.é.sig\n');
    expect(await readTokenFile(file, 'the file', fail)).to.equal(' eyJ.é.sig\n');
    fs.writeFileSync(file, 'y'.repeat(MAX_TOKEN_FILE_BYTES));
    expect(await readTokenFile(file, 'the file', fail)).to.have.length(65_536);
    fs.writeFileSync(file, '');
    expect(await readTokenFile(file, 'the file', fail)).to.equal('');
  });

  it('refuses one byte more than 64 KiB, a directory and a device through `fail`, naming the file as told', async function () {
    const file = path.join(dir, 'token');
    fs.writeFileSync(file, 'y'.repeat(MAX_TOKEN_FILE_BYTES + 1));
    expect((await refusal(readTokenFile(file, 'the file X names', fail))).message).to.equal('the file X names holds more than 65536 bytes');
    expect((await refusal(readTokenFile(dir, 'the file X names', fail))).message).to.equal('the file X names is not a regular file');
    if (process.platform !== 'win32') {
      expect((await refusal(readTokenFile('/dev/zero', 'the file X names', fail))).message).to.equal('the file X names is not a regular file');
    }
  });

  it('closes the file it opened, whether it read it or refused it: no descriptor is left behind (Linux)', async function () {
    if (process.platform !== 'linux') this.skip();
    const file = path.join(dir, 'token');
    const open = (): number => fs.readdirSync('/proc/self/fd').length;
    const before = open();
    for (let i = 0; i < 20; i++) {
      fs.writeFileSync(file, 'tok');
      await readTokenFile(file, 'the file', fail);
      fs.writeFileSync(file, 'y'.repeat(MAX_TOKEN_FILE_BYTES + 1));
      await refusal(readTokenFile(file, 'the file', fail));
      await refusal(readTokenFile(dir, 'the file', fail));
    }
    expect(open()).to.be.at.most(before + 2);
  });

  it('gives a missing file\'s system error by name and code only: the path, which the message would quote, is not shown', async function () {
    const file = path.join(dir, 'secret-name');
    const error = await refusal(readTokenFile(file, 'the file X names', fail));
    expect(error).to.be.instanceOf(Refused);
    expect(error.message).to.equal('the file X names cannot be read');
    expect(error.cause_?.message).to.equal('Error ENOENT (message not shown)');
    expect(JSON.stringify(error.cause_?.message)).not.to.include('secret-name');
  });
});
