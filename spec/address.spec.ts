import { expect } from 'chai';
import { InvalidOptionError } from '../lib';
import { checkEndpoint, parseAddress } from '../lib/address';

describe('parseAddress', function () {
  const valid: [string, { address: string; host: string; port?: number }][] = [
    ['localhost', { address: 'localhost:27017', host: 'localhost', port: 27017 }],
    ['DB.Example.com:27018', { address: 'db.example.com:27018', host: 'db.example.com', port: 27018 }],
    ['[::1]:27019', { address: '[::1]:27019', host: '::1', port: 27019 }],
    ['[fe80::1]', { address: '[fe80::1]:27017', host: 'fe80::1', port: 27017 }],
    // IPv6 in its canonical text (RFC 5952), so that every spelling of one server names one pool; the zone id as given.
    ['[FE80::A]:1', { address: '[fe80::a]:1', host: 'fe80::a', port: 1 }],
    ['[0:0:0:0:0:0:0:1]', { address: '[::1]:27017', host: '::1', port: 27017 }],
    ['[2001:DB8:0:0:1:0:0:1]:27018', { address: '[2001:db8::1:0:0:1]:27018', host: '2001:db8::1:0:0:1', port: 27018 }],
    ['[::FFFF:7F00:1]', { address: '[::ffff:127.0.0.1]:27017', host: '::ffff:127.0.0.1', port: 27017 }],
    ['[FE80::1%Eth0]', { address: '[fe80::1%Eth0]:27017', host: 'fe80::1%Eth0', port: 27017 }],
    ['/tmp/mongodb-27017.sock', { address: '/tmp/mongodb-27017.sock', host: '/tmp/mongodb-27017.sock' }],
    ['./mongodb-27017.sock', { address: './mongodb-27017.sock', host: './mongodb-27017.sock' }],
    // Without a "/", a name ending in .sock is a host name (the connection string spec's tests read it so).
    ['mongodb-27017.sock', { address: 'mongodb-27017.sock:27017', host: 'mongodb-27017.sock', port: 27017 }],
  ];
  for (const [text, expected] of valid) {
    it(`parses ${text}`, function () {
      expect({ ...parseAddress(text) }).to.deep.equal(expected);
    });
  }

  it('refuses a host made of numbers that is no dotted-decimal IPv4 address: the resolver reads 010.0.0.1 as 8.0.0.1', function () {
    // RFC 3986, sections 3.2.2 and 7.4: only four decimal octets are an IPv4 address; the BSD forms (octal with a
    // leading 0, hexadecimal, fewer than four parts) reach another server than the one every event and log shows.
    for (const text of ['010.0.0.1:27017', '127.000.000.001', '127.1', '0x7f.0.0.1', '2130706433:27018', '256.1.1.1', '10.0.0.1.']) {
      expect(() => parseAddress(text), text).to.throw(InvalidOptionError, /address must be an IPv4 address in dotted-decimal form: four numbers from 0 to 255, without leading zeros/);
    }
    for (const text of ['10.0.0.1', '0.0.0.0:1', '123.example.com', '1e3.example', 'db-1']) expect(() => parseAddress(text), text).to.not.throw();
  });

  for (const bad of ['', '  ', 'host:0', 'host:65536', 'host:12ab', 'a:b:c', '[::1', '[::1]x', 'ho st', '[1.2.3.4]', '[v1.fe]', '[:]:1', '[db.example.com]:27017', 42, undefined]) {
    it(`rejects ${JSON.stringify(bad)} with an InvalidOptionError for address`, function () {
      expect(() => parseAddress(bad)).to.throw(InvalidOptionError, /Invalid address/);
    });
  }

  it('never shows the password of user information given with the host (user:password@host), in the address or an Endpoint', function () {
    for (const bad of ['alice:s3cretPW@db.example.com:27017', 'alice:s3cretPW@[::1]', ' alice:s3cretPW@db ', 'alice:s3cretPW@/tmp/mongodb-27017.sock']) {
      const error = (() => {
        try {
          parseAddress(bad);
        } catch (e) {
          return e;
        }
      })();
      expect(error).to.be.instanceOf(InvalidOptionError);
      expect(String((error as Error).message), bad).to.include('<credentials not shown>@').and.not.include('s3cretPW');
      expect(JSON.stringify(error)).to.not.include('s3cretPW');
    }
    expect(() => checkEndpoint('alice:s3cretPW@db', 27017))
      .to.throw(InvalidOptionError, /Invalid host/)
      .with.property('message')
      .that.includes('<credentials not shown>@db')
      .and.not.include('s3cretPW');
    expect(() => checkEndpoint('alice:s3cretPW@db', undefined))
      .to.throw(InvalidOptionError)
      .with.property('message')
      .that.not.include('s3cretPW');
    expect(() => checkEndpoint('alice:s3cretPW@/tmp/mongodb-27017.sock', undefined))
      .to.throw(InvalidOptionError, /Invalid host/)
      .with.property('message')
      .that.includes('<credentials not shown>@/tmp')
      .and.not.include('s3cretPW');
    expect(parseAddress('/tmp/a@b.sock').address, 'an @ inside a path is no user information').to.equal('/tmp/a@b.sock');
    expect(() => checkEndpoint('/tmp/a@b.sock', undefined)).to.not.throw();
  });
});
