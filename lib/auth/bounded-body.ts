/**
 * The bytes of an HTTP answer's `body` (a Node.js `IncomingMessage`, or a fetch `Response.body`), as UTF-8 text, read
 * while they stay within `maxBytes`: once more arrive, reading stops (the stream is destroyed or cancelled, so an
 * endpoint cannot fill the memory) and the Promise rejects with `tooLarge()`. A credential or metadata endpoint
 * (MONGODB-AWS's STS, ECS and EC2; MONGODB-OIDC's Azure and Google Cloud metadata services) answers a few KiB.
 *
 * @throws `tooLarge()` (rejection) past `maxBytes`; the stream's own error (rejection) when it fails.
 *
 * Source: extension (the auth spec sets no limit on an endpoint's answer).
 */
export async function boundedText(body: AsyncIterable<Uint8Array>, maxBytes: number, tooLarge: () => unknown): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    // Leaving the loop by throwing ends the iteration: Node destroys a Readable, a ReadableStream is cancelled.
    if (size > maxBytes) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
