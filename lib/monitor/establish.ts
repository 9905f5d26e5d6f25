/**
 * establish: one dedicated connection of a monitor (its monitoring connection, or its RTT connection), from a
 * connection factory, abortable.
 *
 * Source: server monitoring spec, "Servers are monitored with dedicated sockets", "Measuring RTT" (a dedicated RTT
 * connection); the abort handling is an extension.
 */
import { from, Observable, type Subscription } from 'rxjs';
import type { Connection } from '../connection/connection';
import { completedWithoutConnection } from '../pool/command-runner';
import { destroyQuietly, destroyWhenResolved } from '../pool/connection-checks';
import type { ConnectionFactory } from '../pool/contract';

/**
 * Establishes a connection to `address` with `factory` (descriptor id `id`, generation 0). Unsubscribing
 * `subscription` before it emits aborts the establishment (signal, unsubscription) and, since a Promise cannot be
 * cancelled, whatever a Promise factory resolves to is destroyed. Once the connection is delivered, the descriptor's
 * signal never aborts (neither when the factory completes nor on unsubscription), as in a pool: a factory that hands
 * it to `net.connect({ signal })`, or destroys its connection when it aborts, keeps the connection it delivered. A
 * connection that arrives once `isClosed()` is destroyed too, so none outlives its monitor. A factory that emits more
 * than one connection has every one after the first destroyed as it arrives. `connection` rejects with what the
 * factory failed with, or with a PoolCallbackError (`callback` 'connectionFactory') when the factory completes without
 * a connection, as a pool's establishment does.
 *
 * Source: extension.
 */
export function establish(
  factory: ConnectionFactory<Connection>,
  address: string,
  id: number,
  isClosed: () => boolean,
): { readonly connection: Promise<Connection>; readonly subscription: Subscription } {
  const controller = new AbortController();
  const established = new Observable<Connection>((subscriber) => {
    const input = factory({ id, generation: 0, address, signal: controller.signal });
    let delivered = false;
    const inner = from(input).subscribe({
      next: (c) => {
        // One connection per establishment: another one (a factory whose Observable emits more) is nobody's.
        if (delivered) return destroyQuietly(c);
        delivered = true;
        subscriber.next(c);
      },
      error: (e: unknown) => subscriber.error(e),
      // Completing without a connection fails the establishment, as in a pool: else the check waiting on it never ends.
      complete: () => (delivered ? subscriber.complete() : subscriber.error(completedWithoutConnection(address, id))),
    });
    return () => {
      inner.unsubscribe();
      // Delivered, the establishment is over, not abandoned: the signal stays as it is, as a pool leaves it.
      if (delivered) return;
      controller.abort();
      destroyWhenResolved(input);
    };
  });
  let subscription!: Subscription;
  const connection = new Promise<Connection>((resolve, reject) => {
    subscription = established.subscribe({
      next: (c) => (isClosed() ? destroyQuietly(c) : resolve(c)),
      error: reject,
    });
  });
  return { connection, subscription };
}
