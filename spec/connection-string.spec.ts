import { expect } from 'chai';
import { InvalidOptionError, parseConnectionString } from '../lib';

describe('parseConnectionString', function () {
  it('normalizes the hosts, reads appName, and redacts credentials', function () {
    const parsed = parseConnectionString('mongodb://user:s3cret@Host1:27018,host2/?appName=demo');
    expect(parsed.hosts).to.deep.equal(['host1:27018', 'host2:27017']);
    expect(parsed.appName).to.equal('demo');
    expect(parsed.redacted).to.not.include('s3cret');
  });

  it('rejects an invalid string without echoing it', function () {
    let error: unknown;
    try {
      parseConnectionString('postgres://user:s3cret@host');
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect((error as Error).message).to.not.include('s3cret');
  });
});
