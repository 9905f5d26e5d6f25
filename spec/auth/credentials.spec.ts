import { expect } from 'chai';
import { inspect } from 'node:util';
import { InvalidOptionError, MongoCredentials } from '../../lib';

describe('MongoCredentials', function () {
  it('keeps the password out of JSON, inspection and enumerable properties', function () {
    const creds = new MongoCredentials({ username: 'u', password: 'hunter2', mechanism: 'SCRAM-SHA-256' });
    expect(creds.password).to.equal('hunter2');
    expect(JSON.stringify(creds)).to.not.include('hunter2');
    expect(inspect(creds, { depth: 5, showHidden: true })).to.not.include('hunter2');
    expect(Object.values(creds).map(String).join()).to.not.include('hunter2');
    expect(creds.toJSON()).to.deep.equal({ username: 'u', source: 'admin', mechanism: 'SCRAM-SHA-256' });
  });

  it('rejects an empty username, an unknown mechanism and an empty source', function () {
    expect(() => new MongoCredentials({ username: '', password: 'p' })).to.throw(InvalidOptionError, /username/);
    expect(() => new MongoCredentials({ username: 'u', password: 'p', mechanism: 'PLAIN' as never })).to.throw(InvalidOptionError, /authMechanism/);
    expect(() => new MongoCredentials({ username: 'u', password: 'p', source: '' })).to.throw(InvalidOptionError, /authSource/);
  });

  it('caches salted passwords per mechanism, salt and iteration count', function () {
    const creds = new MongoCredentials({ username: 'u', password: 'p' });
    let derived = 0;
    const derive = () => {
      derived++;
      return Buffer.from('x');
    };
    creds.saltedPassword('SCRAM-SHA-256:salt:4096', derive);
    creds.saltedPassword('SCRAM-SHA-256:salt:4096', derive);
    creds.saltedPassword('SCRAM-SHA-1:salt:4096', derive);
    expect(derived).to.equal(2);
  });
});
