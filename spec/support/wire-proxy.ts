/**
 * A TCP proxy for tests, in front of a server (the embedded endpoint or MONGODB_URI's): it records every message a
 * client sends (the command name of each OP_MSG, `OP_<code>` for anything else) and can rewrite OP_MSG commands on
 * their way to the server (their document sequences passed on unchanged) and replies on their way back, so one test
 * can play an older server (a field the server never sees) or a hostile one (a reply changed in flight) in front of a
 * real one. Plain TCP only: a TLS stream passes unchanged but cannot be read.
 */
import * as net from 'node:net';
import type { Document } from 'bson';
import { decodeOpMsg, encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { MessageFramer, OpCode, writeHeader, type WireMessage } from '../../lib/connection/wire-protocol';

export interface WireProxyHooks {
  /**
   * Rewrites a command before the server gets it (return it, changed or not). `connection`: the proxied connection it
   * came on, numbered from 1 in the order the proxy accepted them.
   */
  request?(command: Document, connection: number): Document;
  /**
   * Whether to hold a command back for good, as a server gone without a FIN does: it never reaches the server and
   * gets no reply. Asked after `request`, with the command as the server would get it.
   */
  hold?(command: Document, connection: number): boolean;
  /** Rewrites a reply before the client gets it; `command` is the request it answers, as the server got it. */
  reply?(reply: Document, command: Document): Document;
}

export interface WireProxy {
  /** `127.0.0.1:<port>`: where clients connect. */
  readonly address: string;
  /** The command names the clients sent, in order, over every connection. */
  readonly commands: string[];
  /** The connections the proxy accepted, and how many of them the client or the server has since closed. */
  readonly sockets: { accepted: number; closed: number };
  /** The numbers (see {@link WireProxyHooks.request}) of the proxied connections still open. */
  openConnections(): number[];
  hooks: WireProxyHooks;
  stop(): Promise<void>;
}

/** The bytes of `message`, unchanged. */
function raw(message: WireMessage): Buffer {
  const header = Buffer.alloc(16);
  writeHeader(header, message.header);
  return Buffer.concat([header, message.body]);
}

export async function startWireProxy(target: string, hooks: WireProxyHooks = {}): Promise<WireProxy> {
  const [host, port] = target.split(':');
  const commands: string[] = [];
  const sockets = { accepted: 0, closed: 0 };
  const open = new Set<net.Socket>();
  const live = new Set<number>();
  const proxy: WireProxy = { address: '', commands, sockets, hooks, openConnections: () => [...live], stop: async () => undefined };
  const server = net.createServer((client) => {
    const number = ++sockets.accepted;
    live.add(number);
    const upstream = net.connect({ host, port: Number(port) });
    open.add(client).add(upstream);
    const requests = new Map<number, Document>();
    const toServer = new MessageFramer();
    const toClient = new MessageFramer();
    let closed = false;
    const close = (): void => {
      if (!closed) sockets.closed++;
      closed = true;
      live.delete(number);
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('data', (chunk: Buffer) => {
      for (const message of toServer.push(chunk)) {
        if (message.header.opCode !== OpCode.OP_MSG) {
          commands.push(`OP_${message.header.opCode}`);
          upstream.write(raw(message));
          continue;
        }
        const decoded = decodeOpMsg(message.body);
        let command = decoded.document;
        commands.push(Object.keys(command)[0]);
        command = proxy.hooks.request?.(command, number) ?? command;
        if (proxy.hooks.hold?.(command, number) === true) continue;
        requests.set(message.header.requestId, command);
        // The document sequences (a bulk write's `documents`, say) go on as they came, after the command, and so does the
        // moreToCome bit: such a request must stay one the server does not answer. (exhaustAllowed is not passed on:
        // the proxy rewrites one reply per request.)
        upstream.write(encodeOpMsg(message.header.requestId, 0, command, decoded.flags & OpMsgFlag.moreToCome, undefined, decoded.sequences));
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      for (const message of toClient.push(chunk)) {
        const command = requests.get(message.header.responseTo);
        if (message.header.opCode !== OpCode.OP_MSG || command === undefined || proxy.hooks.reply === undefined) {
          client.write(raw(message));
          continue;
        }
        const reply = proxy.hooks.reply(decodeOpMsg(message.body).document, command);
        client.write(encodeOpMsg(message.header.requestId, message.header.responseTo, reply));
      }
    });
    for (const socket of [client, upstream]) {
      socket.on('error', close);
      socket.on('close', close);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  Object.assign(proxy, {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  });
  return proxy;
}
