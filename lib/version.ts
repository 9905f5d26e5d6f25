/** The name and version this library reports in the handshake's `client.driver` (kept equal to package.json). */
export const DRIVER_INFO = Object.freeze({ name: 'rxcmap', version: '0.1.0' });
