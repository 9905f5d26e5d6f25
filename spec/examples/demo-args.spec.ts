/**
 * The demo's command line (examples/demo-args.ts): defaults, both flag forms, help, and one clear message for each
 * kind of bad argument, never repeating a password.
 */
import { expect } from 'chai';
import { HELP, hidePassword, parseDemoArgs, USAGE } from '../../examples/demo-args';

describe('examples/demo-args', function () {
  describe('parseDemoArgs', function () {
    it('defaults to 5 s, 1000 workers and no URI', function () {
      expect(parseDemoArgs([])).to.deep.equal({ kind: 'run', durationMS: 5000, workers: 1000 });
    });

    it('takes each flag as `--flag value` or `--flag=value`', function () {
      expect(parseDemoArgs(['--duration', '0.5', '--workers=20', '--uri', 'mongodb://h:1/?a=b'])).to.deep.equal({
        kind: 'run',
        durationMS: 500,
        workers: 20,
        uri: 'mongodb://h:1/?a=b',
      });
    });

    it('--help and -h ask for help', function () {
      expect(parseDemoArgs(['--help'])).to.deep.equal({ kind: 'help' });
      expect(parseDemoArgs(['--workers', '2', '-h'])).to.deep.equal({ kind: 'help' });
    });

    const bad: [string[], RegExp][] = [
      [['--workers', '-1'], /^--workers must be an integer >= 1, got "-1"$/],
      [['--workers', '1.5'], /^--workers must be an integer >= 1, got "1.5"$/],
      [['--workers', '0'], /^--workers must be an integer >= 1/],
      [['--workers', '0x10'], /^--workers must be an integer >= 1/],
      [['--duration', '0'], /^--duration must be a number of seconds > 0.*got "0"$/],
      [['--duration', 'abc'], /^--duration must be a number of seconds > 0.*got "abc"$/],
      [['--duration', 'Infinity'], /^--duration must be a number of seconds > 0/],
      [['--duration', '0.0001'], /^--duration must be a number of seconds > 0/],
      [['--workers'], /^--workers needs a value$/],
      [['--uri='], /^--uri needs a value$/],
      [['--bogus'], /^unknown flag --bogus \(allowed: --duration, --workers, --uri, --help\)$/],
      [['-x'], /^unknown flag -x/],
      [['extra'], /^unexpected argument at position 1 /],
      [['--workers', '3', 'extra'], /^unexpected argument at position 3 /],
    ];
    for (const [argv, message] of bad) {
      it(`rejects ${argv.join(' ')}, saying why`, function () {
        const result = parseDemoArgs(argv);
        expect(result.kind).to.equal('error');
        expect((result as { message: string }).message).to.match(message);
      });
    }

    it('never repeats a URI given where it does not belong', function () {
      for (const argv of [['mongodb://u:pencil-secret@h'], ['--url=mongodb://u:pencil-secret@h']]) {
        const result = parseDemoArgs(argv) as { kind: string; message: string };
        expect(result.kind).to.equal('error');
        expect(result.message).to.not.include('pencil-secret');
      }
    });
  });

  it('the help text shows the usage line, every flag with its default, and an example', function () {
    expect(HELP).to.include(USAGE);
    for (const text of ['--duration', '--workers', '--uri', '--help', 'default 5', 'default 1000', 'MONGODB_URI', 'example:']) {
      expect(HELP).to.include(text);
    }
    expect(USAGE).to.not.include('\n');
  });

  describe('hidePassword', function () {
    it('masks the password of the URI, raw or percent-decoded', function () {
      const uri = 'mongodb://user:p%40ss@h:1/?x=y';
      expect(hidePassword('bad p%40ss and p@ss here', uri)).to.equal('bad **** and **** here');
    });

    it('leaves text alone when the URI has no password', function () {
      expect(hidePassword('user at h', 'mongodb://user@h:1/')).to.equal('user at h');
      expect(hidePassword('h:1', 'mongodb://h:1/')).to.equal('h:1');
      expect(hidePassword('x', 'notauri')).to.equal('x');
    });
  });
});
