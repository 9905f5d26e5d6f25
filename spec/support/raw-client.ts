/**
 * A bare client for tests of a server: one socket, raw OP_MSG, no pool and no handshake (so no `helloOk` unless a
 * command sends it). Each `send` reads the reply of the one message it wrote.
 */
import * as net from 'node:net';
import type { Document } from 'bson';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import { MessageFramer } from '../../lib/connection/wire-protocol';

export interface RawClient {
  readonly socket: net.Socket;
  send(doc: Document): Promise<Document>;
  close(): void;
}

export async function rawClient(address: string): Promise<RawClient> {
  const [host, port] = address.split(':');
  const socket = net.connect({ host, port: Number(port) });
  await new Promise((r) => socket.once('connect', r));
  const framer = new MessageFramer();
  let requestId = 100;
  return {
    socket,
    send(doc) {
      return new Promise((resolve) => {
        socket.once('data', (chunk: Buffer) => resolve(decodeOpMsg(framer.push(chunk)[0].body).document));
        socket.write(encodeOpMsg(++requestId, 0, doc));
      });
    },
    close: () => socket.destroy(),
  };
}
