/**
 * What the tests of a client's server selection look at inside it.
 */
import type { Client } from '../../lib';

/** How many server selections of `c` wait for a ready server (its private Set of them). */
export const selectionsWaiting = (c: Client): number => (c as unknown as { selections: Set<unknown> }).selections.size;
