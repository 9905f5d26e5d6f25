/**
 * The test environment of the SRV records of the Initial DNS Seedlist Discovery and SRV polling tests, on this host:
 * a local DNS responder answering for `*.test.build.10gen.cc`, mongos endpoints (EmbeddedServer with `mongos: true`)
 * for the ports 27017 to 27020, and a SOCKS5 proxy that sends each SRV target's port to its endpoint (the targets,
 * `localhost.test.build.10gen.cc`, do not resolve here).
 *
 * Source: Polling SRV Records for mongos Discovery spec, tests/README.md, "Configuring the Test Environment".
 */
import * as dns from 'node:dns';
import { EmbeddedServer } from '../../lib/testing';
import { DnsResponder, type Zone } from './dns-responder';
import { startSocks5Proxy, type Socks5Proxy } from './socks5-proxy';

/** The SRV records' target. */
export const SRV_TARGET = 'localhost.test.build.10gen.cc';
/** The SRV name of `mongodb+srv://test1.test.build.10gen.cc`. */
export const TEST1 = '_mongodb._tcp.test1.test.build.10gen.cc';
/** SRV answers for `ports` of {@link SRV_TARGET}. */
export const srvRecords = (...ports: number[]) => ports.map((port) => ({ target: SRV_TARGET, port }));
/** The host an SRV record of `port` names. */
export const srvHost = (port: number): string => `${SRV_TARGET}:${port}`;

/** The responder, the proxy and the mongos of ports 27017 to 27020; `stop()` puts Node's DNS servers back. */
export class SrvEnvironment {
  readonly servers = new Map<number, EmbeddedServer>();
  responder!: DnsResponder;
  proxy!: Socks5Proxy;
  private dnsServers: string[] = [];

  constructor(private readonly zone: Zone) {}

  async start(): Promise<this> {
    for (const port of [27017, 27018, 27019, 27020]) this.servers.set(port, await new EmbeddedServer({ mongos: true }).start());
    this.proxy = await startSocks5Proxy({
      map: (_host, port) => {
        const server = this.servers.get(port);
        return server === undefined ? undefined : { host: '127.0.0.1', port: Number(server.address.split(':')[1]) };
      },
    });
    this.dnsServers = dns.getServers();
    this.responder = await new DnsResponder(this.zone).start();
    dns.setServers([this.responder.server]);
    return this;
  }

  /** The query of a mongodb+srv URI whose hosts are reached through the proxy, without TLS. */
  get query(): string {
    return `tls=false&proxyHost=127.0.0.1&proxyPort=${this.proxy.port}`;
  }

  /** Answers with the environment's zone again. */
  reset(): void {
    this.responder.setZone(this.zone);
    this.responder.silent = false;
    this.responder.questions.length = 0;
  }

  async stop(): Promise<void> {
    dns.setServers(this.dnsServers);
    await this.responder?.close();
    await this.proxy?.close();
    for (const server of this.servers.values()) await server.stop();
  }
}
