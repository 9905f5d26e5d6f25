/**
 * Whether this Node.js keeps an Error's stack as V8's lazy accessor (22 and later): only there does a failed
 * checkout's stack get its caller's frames (lib/pool/caller-frames.ts).
 */
export const LAZY_STACKS = typeof Object.getOwnPropertyDescriptor(new Error(), 'stack')?.get === 'function';
