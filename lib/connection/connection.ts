/**
 * Connection: one MongoDB connection over a TCP socket, speaking OP_MSG, one request at a time.
 *
 * Source: CMAP spec, "Connection" (Single Endpoint, Single Lifetime, Single Track, Perishable: Errored); OP_MSG spec.
 */
import type { Socket } from 'node:net';
import type { Document } from 'bson';
import { ConnectionBusyError, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError } from '../errors';
import type { PoolConnection } from '../pool/state';
import {
  decodeOpMsg,
  DEFAULT_MAX_MESSAGE_SIZE_BYTES,
  encodeOpMsg,
  MessageFramer,
  OpCode,
  type WireMessage,
} from './wire-protocol';

/** Options of one {@link Connection.command} call. */
export interface CommandOptions {
  /** Fail the command (and error the connection) if no reply arrives within this many ms. 0 = no limit. */
  readonly timeoutMS?: number;
}

/** Identity and limits of a connection, from the pool and the handshake. */
export interface ConnectionInit {
  readonly id: number;
  readonly generation: number;
  readonly address: string;
  /** Default reply timeout of every command, in ms (0 = none). */
  readonly socketTimeoutMS?: number;
}

interface InFlight {
  readonly requestId: number;
  readonly resolve: (doc: Document) => void;
  readonly reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

let nextRequestId = 1;

/** A fresh wire-protocol request id (positive int32, wrapping). */
export function newRequestId(): number {
  const id = nextRequestId;
  nextRequestId = nextRequestId >= 0x7fffffff ? 1 : nextRequestId + 1;
  return id;
}

/**
 * A MongoDB connection. Created established by the connection factory (socket connected, handshake done); used by
 * one caller at a time while checked out of its pool.
 */
export class Connection implements PoolConnection {
  /** The pool-assigned id (CMAP "Monotonically Increasing ID"). */
  readonly id: number;
  /** The pool generation at creation. */
  readonly generation: number;
  /** The Endpoint, `host:port`. */
  readonly address: string;
  /** The handshake reply (`hello` / legacy hello), once the handshake is done. */
  hello: Readonly<Document> = {};
  /** maxMessageSizeBytes from the handshake (default 48,000,000): larger replies are wire-protocol errors. */
  maxMessageSizeBytes = DEFAULT_MAX_MESSAGE_SIZE_BYTES;

  private erroredBy: Error | undefined;
  private destroyed = false;
  private inFlight: InFlight | undefined;
  private framer: MessageFramer;
  private readonly socketTimeoutMS: number;

  constructor(
    private readonly socket: Socket,
    init: ConnectionInit,
  ) {
    this.id = init.id;
    this.generation = init.generation;
    this.address = init.address;
    this.socketTimeoutMS = init.socketTimeoutMS ?? 0;
    this.framer = new MessageFramer(this.maxMessageSizeBytes);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error) => this.fail(new MongoNetworkError(this.address, `connection ${this.id} to ${this.address}: ${error.message}`, { cause: error })));
    socket.on('close', () => this.fail(new MongoNetworkError(this.address, `connection ${this.id} to ${this.address} closed`)));
  }

  /** True once the connection met a network error, timeout or wire-protocol error, or was destroyed. */
  get errored(): boolean {
    return this.erroredBy !== undefined || this.destroyed;
  }

  /** The error that made the connection errored, if any. */
  get error(): Error | undefined {
    return this.erroredBy;
  }

  /** Applies the handshake's limits (called by the factory once the handshake reply is in). */
  applyHandshake(reply: Document): void {
    this.hello = reply;
    if (typeof reply.maxMessageSizeBytes === 'number' && reply.maxMessageSizeBytes > 0) {
      this.maxMessageSizeBytes = reply.maxMessageSizeBytes;
      this.framer = new MessageFramer(this.maxMessageSizeBytes);
    }
  }

  /**
   * Runs one command on database `db` and resolves to the reply document.
   *
   * @throws {ConnectionBusyError} (rejection) when another command is in flight on this connection.
   * @throws {MongoServerError} (rejection) when the reply has `ok: 0`; the connection stays usable.
   * @throws {MongoNetworkError} (rejection) on a socket error or close, a malformed reply or a reply that answers
   *   another request; {@link MongoNetworkTimeoutError} when `timeoutMS` (default socketTimeoutMS) elapses. Both
   *   leave the connection errored.
   */
  command(db: string, command: Document, options: CommandOptions = {}): Promise<Document> {
    if (this.errored) {
      return Promise.reject(this.erroredBy ?? new MongoNetworkError(this.address, `connection ${this.id} to ${this.address} is closed`));
    }
    if (this.inFlight !== undefined) return Promise.reject(new ConnectionBusyError(this.address, this.id));
    const requestId = newRequestId();
    return new Promise<Document>((resolve, reject) => {
      const inFlight: InFlight = { requestId, resolve, reject, timer: undefined };
      this.inFlight = inFlight;
      const timeoutMS = options.timeoutMS ?? this.socketTimeoutMS;
      if (timeoutMS > 0) {
        inFlight.timer = setTimeout(() => {
          this.fail(new MongoNetworkTimeoutError(this.address, `connection ${this.id} to ${this.address} timed out after ${timeoutMS} ms waiting for a reply`));
        }, timeoutMS);
      }
      this.socket.write(encodeOpMsg(requestId, 0, { ...command, $db: db }));
    });
  }

  /** Closes the socket (idempotent) and fails the request in flight with `error`, or a network error. */
  destroy(error?: Error): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.settle(undefined, error ?? new MongoNetworkError(this.address, `connection ${this.id} to ${this.address} was closed by the pool`));
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    let messages: WireMessage[];
    try {
      messages = this.framer.push(chunk);
    } catch (error) {
      return this.fail(this.protocolError((error as Error).message));
    }
    for (const message of messages) this.onMessage(message);
  }

  private onMessage(message: WireMessage): void {
    const inFlight = this.inFlight;
    if (inFlight === undefined || message.header.responseTo !== inFlight.requestId) {
      return this.fail(this.protocolError(`reply responseTo ${message.header.responseTo} does not match the request in flight (${inFlight?.requestId ?? 'none'})`));
    }
    if (message.header.opCode !== OpCode.OP_MSG) {
      return this.fail(this.protocolError(`unexpected opcode ${message.header.opCode} in reply`));
    }
    let document: Document;
    try {
      document = decodeOpMsg(message.body).document;
    } catch (error) {
      return this.fail(this.protocolError((error as Error).message));
    }
    if (document.ok === 1 || document.ok === true) this.settle(document, undefined);
    else this.settle(undefined, new MongoServerError(document));
  }

  private protocolError(detail: string): MongoNetworkError {
    return new MongoNetworkError(this.address, `connection ${this.id} to ${this.address}: wire-protocol error: ${detail}`);
  }

  /** Marks the connection errored, fails the request in flight, and closes the socket. */
  private fail(error: Error): void {
    if (this.erroredBy === undefined && !this.destroyed) this.erroredBy = error;
    this.settle(undefined, error);
    if (!this.destroyed) {
      this.destroyed = true;
      this.socket.destroy();
    }
  }

  private settle(reply: Document | undefined, error: Error | undefined): void {
    const inFlight = this.inFlight;
    if (inFlight === undefined) return;
    this.inFlight = undefined;
    if (inFlight.timer !== undefined) clearTimeout(inFlight.timer);
    if (error !== undefined) inFlight.reject(error);
    else inFlight.resolve(reply!);
  }
}
