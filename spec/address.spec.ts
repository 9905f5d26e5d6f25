import { expect } from 'chai';
import { InvalidOptionError } from '../lib';
import { checkEndpoint, parseAddress, writtenAddress } from '../lib/address';

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
    // Surrounding whitespace is no part of the address; the highest port is one.
    [' db.example.com:27017 ', { address: 'db.example.com:27017', host: 'db.example.com', port: 27017 }],
    [' /tmp/mongodb-27017.sock ', { address: '/tmp/mongodb-27017.sock', host: '/tmp/mongodb-27017.sock' }],
    ['db:65535', { address: 'db:65535', host: 'db', port: 65535 }],
  ];
  for (const [text, expected] of valid) {
    it(`parses ${text}`, function () {
      expect({ ...parseAddress(text) }).to.deep.equal(expected);
    });
  }

  it('refuses a host made of numbers that is no dotted-decimal IPv4 address: the resolver reads 010.0.0.1 as 8.0.0.1', function () {
    // RFC 3986, sections 3.2.2 and 7.4: only four decimal octets are an IPv4 address; the BSD forms (octal with a
    // leading 0, hexadecimal, fewer than four parts) reach another server than the one every event and log shows.
    for (const text of ['010.0.0.1:27017', '127.000.000.001', '127.1', '0x7f.0.0.1', '10.0x10.0.1', '10.0.0.0xff', '2130706433:27018', '256.1.1.1', '10.0.0.1.']) {
      expect(() => parseAddress(text), text).to.throw(InvalidOptionError, /address must be an IPv4 address in dotted-decimal form: four numbers from 0 to 255, without leading zeros/);
    }
    for (const text of ['10.0.0.1', '0.0.0.0:1', '123.example.com', '1e3.example', 'db-1']) expect(() => parseAddress(text), text).to.not.throw();
  });

  // A port is decimal digits only: not "+1", " 1", "1e3", "1.0" or "0x10", which Number() would read as a port; no host
  // is empty; one ":" at most outside brackets, and only ":" after them; "@" before a path's "/" is user information.
  for (const bad of ['', '  ', 'host:0', 'host:65536', 'host:12ab', 'a:b:c', 'host:1:2', ':27017', '[::1', '[::1]x', '[::1]x27017', 'ho st', 'host:+1', 'host: 1', 'host:1e3', 'host:1.0', 'host:0x10', '[1.2.3.4]', '[v1.fe]', '[:]:1', '[db.example.com]:27017', '@/tmp/mongodb-27017.sock', 'evil.com\u0000.mongodb.net', 'host\u0001', 'ho\u007fst:27017', 42, undefined]) {
    it(`rejects ${JSON.stringify(bad)} with an InvalidOptionError for address`, function () {
      expect(() => parseAddress(bad)).to.throw(InvalidOptionError, /Invalid address/);
    });
  }

  it('names the address as given and every form allowed in its error', function () {
    expect(() => parseAddress('host:0')).to.throw(
      InvalidOptionError,
      /^Invalid address: "host:0" \(address must be a "host:port" string \(host alone means port 27017; IPv6 as "\[::1\]:27017"; or a path with a "\/", ending in \.sock\)\)$/,
    );
  });

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

describe('writtenAddress', function () {
  it('writes host:port, an IPv6 host in brackets, and a socket path (no port) alone', function () {
    expect(writtenAddress('db.example.com', 27018)).to.equal('db.example.com:27018');
    expect(writtenAddress('::1', 27017)).to.equal('[::1]:27017');
    expect(writtenAddress('/tmp/mongodb-27017.sock', undefined)).to.equal('/tmp/mongodb-27017.sock');
  });
});

describe('checkEndpoint', function () {
  it('accepts a host name, an IPv4 or IPv6 address (without brackets, zone id included) with a port, and a socket path without one', function () {
    for (const [host, port] of [['db.example.com', 1], ['10.0.0.1', 65535], ['::1', 27017], ['fe80::1%eth0', 27017], ['/tmp/mongodb-27017.sock', undefined], ['./mongodb-27017.sock', undefined]] as const) {
      expect(() => checkEndpoint(host, port), `${host} ${port}`).to.not.throw();
    }
  });

  it('refuses a bad port, a missing one, or one with a socket path, naming the host and what is allowed', function () {
    const cases: [string, number | undefined, string][] = [
      ['db.example.com', 0, 'Invalid port: 0 (port must be an integer from 1 to 65535, or absent for a Unix domain socket)'],
      ['db.example.com', 65536, 'Invalid port: 65536 (port must be an integer from 1 to 65535, or absent for a Unix domain socket)'],
      ['db.example.com', 1.5, 'Invalid port: 1.5 (port must be an integer from 1 to 65535, or absent for a Unix domain socket)'],
      // Without a port, only a socket path (a "/", ending in .sock) is an Endpoint: db.sock would be a file of the working directory.
      ['localhost', undefined, 'Invalid port: undefined (port must be an integer from 1 to 65535 for host "localhost" (only a Unix domain socket path, with a "/" and ending in .sock, has no port))'],
      ['db.sock', undefined, 'Invalid port: undefined (port must be an integer from 1 to 65535 for host "db.sock" (only a Unix domain socket path, with a "/" and ending in .sock, has no port))'],
      ['/tmp/mongodb-27017.sock', 27017, 'Invalid port: 27017 (port must be absent: host "/tmp/mongodb-27017.sock" is a Unix domain socket path)'],
    ];
    for (const [host, port, message] of cases) {
      expect(() => checkEndpoint(host, port), `${host} ${port}`).to.throw(InvalidOptionError).with.property('message', message);
    }
  });

  it('refuses a host in brackets, with a port, with user information, holding a character no host holds, or made of numbers but no IPv4 address', function () {
    const form = '(host must be a host name, an IPv4 address or an IPv6 address without brackets (e.g. ::1), with the port given as port)';
    const cases: [string, string][] = [
      ['[::1]', `Invalid host: "[::1]" ${form}`],
      ['db:27017', `Invalid host: "db:27017" ${form}`],
      ['db example', `Invalid host: "db example" ${form}`],
      ['db?x', `Invalid host: "db?x" ${form}`],
      ['@db', 'Invalid host: "<credentials not shown>@db" (host must be a host name, an IP address or a Unix domain socket path, without user information)'],
      ['010.0.0.1', 'Invalid host: "010.0.0.1" (host must be an IPv4 address in dotted-decimal form: four numbers from 0 to 255, without leading zeros (e.g. 10.0.0.1))'],
    ];
    for (const [host, message] of cases) {
      expect(() => checkEndpoint(host, 27017), host).to.throw(InvalidOptionError).with.property('message', message);
    }
  });
});
