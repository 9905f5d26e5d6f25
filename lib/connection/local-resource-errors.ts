/**
 * The system error codes of an operation that failed for want of this host's own resources, whatever the server or
 * the file it was for: out of file descriptors (for the process, EMFILE, or for the system, ENFILE), of memory
 * (ENOMEM), of socket buffers (ENOBUFS: the kernel's memory for a socket or its route; on Windows, where Node reports
 * WSAENOBUFS so, out of local ports to connect from), or of local addresses and ports to connect from (EADDRNOTAVAIL).
 * Connect errors with them carry no overload label (no server load causes them); a TLS file read that failed with them
 * is tried again by the next connection.
 *
 * Source: extension (POSIX error numbers, as Node's system errors name them in `code`; CMAP "Backpressure-enabled":
 * no backpressure labels for errors that never occur due to server overload).
 */
export const LOCAL_RESOURCE_ERRORS: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'ENOMEM', 'ENOBUFS', 'EADDRNOTAVAIL']);
