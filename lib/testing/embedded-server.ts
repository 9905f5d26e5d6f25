/**
 * An embedded MongoDB wire-protocol endpoint, for demos and tests on machines without mongod: a TCP server on
 * 127.0.0.1 (random port by default) that answers OP_MSG commands the way a standalone mongod does for the commands
 * a pool and its monitor use (hello, isMaster, ping, buildInfo), and `{ ok: 1 }` to anything else.
 *
 * Not a database: it stores nothing.
 */
import * as net from 'node:net';
import type { Document } from 'bson';
import { decodeOpMsg, encodeOpMsg, MessageFramer, OpCode, type WireMessage } from '../connection/wire-protocol';

/** Options of an {@link EmbeddedServer}. */
export interface EmbeddedServerOptions {
  /** TCP port; 0 (default) picks a free one. */
  port?: number;
  /** maxWireVersion it reports. Default 25 (MongoDB 8.0). */
  maxWireVersion?: number;
  /** Server version it reports in buildInfo. Default "8.0.0". */
  version?: string;
}

/** What the server knows of one client connection. */
export interface ClientConnectionInfo {
  /** The server-side connection id (reported as `connectionId` in hello). */
  readonly id: number;
  /** `client.application.name` from the connection's handshake, if any. */
  appName: string | undefined;
}

/** The command handler context: the connection the command came on. */
export type CommandHandler = (command: Document, client: ClientConnectionInfo) => Document | Promise<Document>;

/**
 * The embedded endpoint. `start()` it, connect to {@link address}, `stop()` it.
 */
export class EmbeddedServer {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private nextConnectionId = 1;
  private readonly handlers = new Map<string, CommandHandler>();
  private port = 0;
  /** The number of client connections accepted since start. */
  connectionsAccepted = 0;

  constructor(private readonly options: EmbeddedServerOptions = {}) {
    this.server = net.createServer((socket) => this.accept(socket));
    const hello = (legacy: boolean): CommandHandler => (_cmd, client) => this.helloReply(legacy, client);
    this.handlers.set('hello', hello(false));
    this.handlers.set('ismaster', hello(true));
    this.handlers.set('ping', () => ({ ok: 1 }));
    this.handlers.set('buildinfo', () => ({
      version: this.options.version ?? '8.0.0',
      versionArray: (this.options.version ?? '8.0.0').split('.').map(Number).concat(0).slice(0, 4),
      maxBsonObjectSize: 16 * 1024 * 1024,
      ok: 1,
    }));
    this.handlers.set('endsessions', () => ({ ok: 1 }));
  }

  /** `127.0.0.1:<port>` once started. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** A `mongodb://` connection string for this endpoint. */
  get uri(): string {
    return `mongodb://${this.address}/?directConnection=true`;
  }

  /** The number of client connections open right now. */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** Starts listening on 127.0.0.1. Resolves once it accepts connections. */
  async start(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port ?? 0, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  /** Stops listening and closes every client connection. */
  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Adds or replaces the handler of a command (name matched case-insensitively). */
  handle(commandName: string, handler: CommandHandler): void {
    this.handlers.set(commandName.toLowerCase(), handler);
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    this.connectionsAccepted++;
    socket.setNoDelay(true);
    const client: ClientConnectionInfo = { id: this.nextConnectionId++, appName: undefined };
    const framer = new MessageFramer();
    let chain = Promise.resolve();
    socket.on('data', (chunk: Buffer) => {
      let messages: WireMessage[];
      try {
        messages = framer.push(chunk);
      } catch {
        socket.destroy();
        return;
      }
      for (const message of messages) {
        chain = chain.then(() => this.reply(socket, client, message));
      }
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.sockets.delete(socket));
  }

  private async reply(socket: net.Socket, client: ClientConnectionInfo, message: WireMessage): Promise<void> {
    if (socket.destroyed) return;
    if (message.header.opCode !== OpCode.OP_MSG) {
      socket.destroy();
      return;
    }
    let response: Document;
    try {
      const command = decodeOpMsg(message.body).document;
      const name = Object.keys(command)[0]?.toLowerCase() ?? '';
      if ((name === 'hello' || name === 'ismaster') && command.client?.application?.name !== undefined) {
        client.appName = String(command.client.application.name);
      }
      const handler = this.handlers.get(name);
      response = handler ? await handler(command, client) : { ok: 1 };
    } catch (error) {
      response = { ok: 0, errmsg: (error as Error).message, code: 2, codeName: 'BadValue' };
    }
    if (!socket.destroyed) socket.write(encodeOpMsg(0, message.header.requestId, response));
  }

  private helloReply(legacy: boolean, client: ClientConnectionInfo): Document {
    return {
      ...(legacy ? { ismaster: true } : { isWritablePrimary: true }),
      helloOk: true,
      maxBsonObjectSize: 16 * 1024 * 1024,
      maxMessageSizeBytes: 48_000_000,
      maxWriteBatchSize: 100_000,
      localTime: new Date(),
      logicalSessionTimeoutMinutes: 30,
      connectionId: client.id,
      minWireVersion: 0,
      maxWireVersion: this.options.maxWireVersion ?? 25,
      readOnly: false,
      ok: 1,
    };
  }
}
