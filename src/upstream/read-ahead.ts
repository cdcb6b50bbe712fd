// An upstream's streamed body read on from now, into memory, until its reader starts. A relay that
// must wait before it reads (a translated stream to an Anthropic client waits for the count of the
// prompt its message_start reports) would otherwise lose what the upstream sent before breaking off:
// a body destroyed by the upstream's cut drops the chunks it had buffered, and the output they held
// would go uncharged. Once the reader starts it reads the body itself, with its backpressure.
import type { UpstreamBody } from './redacted-body.js';

/** At most this much is read ahead; past it the rest waits in the connection, as without read-ahead. */
export const READ_AHEAD_BYTES = 256 * 1024;

export function readAhead(body: UpstreamBody): UpstreamBody {
  const source = body[Symbol.asyncIterator]();
  const early: Buffer[] = [];
  let earlyBytes = 0;
  let end: 'done' | { error: unknown } | undefined;
  let readerCame = false;
  const readEarly = async (): Promise<void> => {
    while (!readerCame && end === undefined && earlyBytes < READ_AHEAD_BYTES) {
      try {
        const r = await source.next();
        if (r.done === true) end = 'done';
        else {
          early.push(r.value);
          earlyBytes += r.value.length;
        }
      } catch (error) {
        end = { error };
      }
    }
  };
  const reading = readEarly();
  async function* chunks(): AsyncGenerator<Buffer> {
    readerCame = true;
    // The early reader stops after the read it is waiting for; its chunks come first, then its end.
    await reading;
    yield* early.splice(0);
    if (end === 'done') return;
    if (end !== undefined) throw end.error;
    for (;;) {
      const r = await source.next();
      if (r.done === true) return;
      yield r.value;
    }
  }
  return {
    [Symbol.asyncIterator]: chunks,
    async text() {
      const parts: Buffer[] = [];
      for await (const chunk of chunks()) parts.push(chunk);
      return Buffer.concat(parts).toString('utf8');
    },
  };
}
