// An upstream's response body with every credential the gateway sent it replaced, before any part of
// the gateway reads it: whole replies, error bodies and streams alike, for every format, so no relay,
// decoder or cut (an error message shortened to its first thousand characters) can pass one on. A
// credential split across two network reads is caught too: a read that ends with the start of one keeps
// that start back until the next read shows whether the rest follows (a read ending in a complete SSE
// event, as streams' reads do, keeps nothing back and goes out at once).
import { REDACTED } from './sent-credentials.js';

/** A response body as the relays read it: its chunks, or its whole text. */
export interface UpstreamBody extends AsyncIterable<Buffer> {
  text(): Promise<string>;
}

const REPLACEMENT = Buffer.from(REDACTED);
const EMPTY = Buffer.alloc(0);

/** `buf` with every needle replaced; `buf` itself when none occurs. */
function replaceAll(buf: Buffer, needles: readonly Buffer[]): Buffer {
  for (const needle of needles) {
    let at = buf.indexOf(needle);
    if (at < 0) continue;
    const parts: Buffer[] = [];
    let from = 0;
    while (at >= 0) {
      parts.push(buf.subarray(from, at), REPLACEMENT);
      from = at + needle.length;
      at = buf.indexOf(needle, from);
    }
    parts.push(buf.subarray(from));
    buf = Buffer.concat(parts);
  }
  return buf;
}

/** Length of the longest end of `buf` that is the start (not the whole) of a needle. */
function heldBackLength(buf: Buffer, needles: readonly Buffer[]): number {
  let longest = 0;
  for (const needle of needles) {
    for (let start = Math.max(0, buf.length - needle.length + 1); start < buf.length; start++) {
      const n = buf.length - start;
      if (n <= longest) break;
      if (buf[start] === needle[0] && buf.compare(needle, 0, n, start) === 0) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

async function* redactedChunks(source: AsyncIterable<unknown>, needles: readonly Buffer[]): AsyncGenerator<Buffer> {
  let carry = EMPTY;
  for await (const piece of source) {
    const chunk = typeof piece === 'string' ? Buffer.from(piece) : (piece as Buffer);
    const buf = replaceAll(carry.length === 0 ? chunk : Buffer.concat([carry, chunk]), needles);
    const keep = heldBackLength(buf, needles);
    carry = keep === 0 ? EMPTY : Buffer.from(buf.subarray(buf.length - keep));
    if (buf.length > keep) yield keep === 0 ? buf : buf.subarray(0, buf.length - keep);
  }
  if (carry.length > 0) yield carry;
}

/** `source` with each of `secrets` replaced by `[redacted]`; `source`'s own chunks when there are none. */
export function redactedBody(source: AsyncIterable<unknown>, secrets: readonly string[]): UpstreamBody {
  const needles = secrets.map((s) => Buffer.from(s, 'utf8'));
  const chunks = (): AsyncIterable<Buffer> => (needles.length === 0 ? (source as AsyncIterable<Buffer>) : redactedChunks(source, needles));
  return {
    [Symbol.asyncIterator]: () => chunks()[Symbol.asyncIterator](),
    async text() {
      const parts: Buffer[] = [];
      for await (const chunk of chunks()) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      return Buffer.concat(parts).toString('utf8');
    },
  };
}
