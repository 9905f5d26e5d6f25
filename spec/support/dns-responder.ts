/**
 * A tiny DNS server on 127.0.0.1 (UDP) answering SRV and TXT questions from a fixed zone, for the tests of seedlist
 * discovery through Node's real resolver: `dns.setServers([responder.server])` (a client's Resolver takes the servers
 * `dns.getServers()` gives as it starts). A name with records of another type gets NOERROR and no answer (ENODATA), a
 * name absent from the zone NXDOMAIN (ENOTFOUND); names are matched case-insensitively. `delayMS` holds every answer
 * back; `silent` drops the questions (the resolver then times out). Every question is counted in `questions`.
 */
import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';

/** One SRV record: its target and port (priority and weight are written as given, default 0 and 5). */
export interface SrvAnswer {
  readonly target: string;
  readonly port: number;
  readonly priority?: number;
  readonly weight?: number;
}

/** The zone: SRV records by name, TXT records (each its character strings) by name. */
export interface Zone {
  readonly srv?: Readonly<Record<string, readonly SrvAnswer[]>>;
  readonly txt?: Readonly<Record<string, readonly (readonly string[])[]>>;
}

const TYPE_TXT = 16;
const TYPE_SRV = 33;

export class DnsResponder {
  /** `127.0.0.1:<port>`, for `dns.setServers()`. */
  server = '';
  /** Every question asked, `TYPE name` (e.g. `SRV _mongodb._tcp.test1.example.test`). */
  readonly questions: string[] = [];
  delayMS = 0;
  silent = false;
  private readonly socket: Socket = createSocket('udp4');
  private readonly srv = new Map<string, readonly SrvAnswer[]>();
  private readonly txt = new Map<string, readonly (readonly string[])[]>();
  /** The timers of the answers held back by delayMS. */
  private readonly held = new Set<NodeJS.Timeout>();

  constructor(zone: Zone) {
    this.setZone(zone);
    this.socket.on('message', (message, remote) => {
      const reply = this.answer(message);
      if (reply === undefined || this.silent) return;
      const send = (): void => this.socket.send(reply, remote.port, remote.address);
      if (this.delayMS > 0) {
        const timer = setTimeout(() => {
          this.held.delete(timer);
          send();
        }, this.delayMS);
        this.held.add(timer);
      } else send();
    });
  }

  /** Replaces the zone. */
  setZone(zone: Zone): void {
    this.srv.clear();
    this.txt.clear();
    for (const [name, records] of Object.entries(zone.srv ?? {})) this.srv.set(name.toLowerCase(), records);
    for (const [name, records] of Object.entries(zone.txt ?? {})) this.txt.set(name.toLowerCase(), records);
  }

  async start(): Promise<this> {
    this.socket.bind(0, '127.0.0.1');
    await once(this.socket, 'listening');
    this.server = `127.0.0.1:${this.socket.address().port}`;
    return this;
  }

  /** Closes the socket; the answers still held back (delayMS) are dropped. */
  close(): Promise<void> {
    for (const timer of this.held) clearTimeout(timer);
    this.held.clear();
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  /** The reply to the query `message`, or undefined when it cannot be read. */
  private answer(message: Buffer): Buffer | undefined {
    if (message.length < 12) return undefined;
    const id = message.readUInt16BE(0);
    let offset = 12;
    const labels: string[] = [];
    while (offset < message.length && message[offset] !== 0) {
      const length = message[offset];
      labels.push(message.subarray(offset + 1, offset + 1 + length).toString('latin1'));
      offset += 1 + length;
    }
    offset += 1;
    const type = message.readUInt16BE(offset);
    const question = message.subarray(12, offset + 4);
    const name = labels.join('.').toLowerCase();
    this.questions.push(`${type === TYPE_SRV ? 'SRV' : type === TYPE_TXT ? 'TXT' : type} ${name}`);
    const known = this.srv.has(name) || this.txt.has(name);
    const answers: Buffer[] = [];
    if (type === TYPE_SRV) {
      for (const record of this.srv.get(name) ?? []) {
        const target = encodeName(record.target);
        const data = Buffer.alloc(6);
        data.writeUInt16BE(record.priority ?? 0, 0);
        data.writeUInt16BE(record.weight ?? 5, 2);
        data.writeUInt16BE(record.port, 4);
        answers.push(resourceRecord(TYPE_SRV, Buffer.concat([data, target])));
      }
    } else if (type === TYPE_TXT) {
      for (const strings of this.txt.get(name) ?? []) {
        answers.push(resourceRecord(TYPE_TXT, Buffer.concat(strings.map((s) => Buffer.concat([Buffer.from([Buffer.byteLength(s)]), Buffer.from(s)])))));
      }
    }
    const header = Buffer.alloc(12);
    header.writeUInt16BE(id, 0);
    // QR, RD, RA; RCODE 3 (NXDOMAIN) for a name absent from the zone.
    header.writeUInt16BE(0x8180 | (known ? 0 : 3), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    return Buffer.concat([header, question, ...answers]);
  }
}

/** A name in DNS wire form. */
function encodeName(name: string): Buffer {
  const parts = name.replace(/\.$/, '').split('.').filter((p) => p !== '');
  return Buffer.concat([...parts.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p, 'latin1')])), Buffer.from([0])]);
}

/** An answer's resource record, its name a pointer to the question's (offset 12). */
function resourceRecord(type: number, data: Buffer): Buffer {
  const head = Buffer.alloc(12);
  head.writeUInt16BE(0xc00c, 0);
  head.writeUInt16BE(type, 2);
  head.writeUInt16BE(1, 4); // IN
  head.writeUInt32BE(60, 6); // TTL
  head.writeUInt16BE(data.length, 10);
  return Buffer.concat([head, data]);
}
