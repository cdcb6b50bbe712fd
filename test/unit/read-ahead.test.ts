// An upstream body read ahead while its relay waits (a count for Anthropic's message_start): what came
// before the upstream broke off must reach the relay, which a destroyed stream would drop.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readAhead } from '../../src/upstream/read-ahead.js';
import type { UpstreamBody } from '../../src/upstream/redacted-body.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A body as undici hands one over: a Readable stream of Buffers, with text(). */
function upstreamBody(): { body: UpstreamBody; stream: PassThrough } {
  const stream = new PassThrough();
  return { body: Object.assign(stream, { text: async () => '' }) as unknown as UpstreamBody, stream };
}

async function readAll(body: AsyncIterable<Buffer>): Promise<{ text: string; error?: unknown }> {
  let text = '';
  try {
    for await (const chunk of body) text += chunk.toString();
  } catch (error) {
    return { text, error };
  }
  return { text };
}

describe('read-ahead of an upstream body', () => {
  it('keeps what came before the upstream broke off while the reader was not there yet, then the break', async () => {
    const { body, stream } = upstreamBody();
    const ahead = readAhead(body);
    stream.write('event: a\n\n');
    stream.write('event: b\n\n');
    await sleep(10);
    stream.destroy(new Error('upstream cut'));
    await sleep(10);
    const read = await readAll(ahead);
    expect(read.text).toBe('event: a\n\nevent: b\n\n');
    expect(String(read.error)).toContain('upstream cut');
  });

  it('without it, the same stream read late gives nothing of what came before the break', async () => {
    const { body, stream } = upstreamBody();
    // Nobody reads yet (the relay waits): the error has no other listener.
    stream.on('error', () => undefined);
    stream.write('event: a\n\n');
    await sleep(10);
    stream.destroy(new Error('upstream cut'));
    await sleep(10);
    expect((await readAll(body)).text).toBe('');
  });

  it('hands over everything in order when the reader comes early, late, or mid-way', async () => {
    for (const readerAfterMs of [0, 5, 30]) {
      const { body, stream } = upstreamBody();
      const ahead = readAhead(body);
      const writing = (async () => {
        for (let i = 0; i < 20; i++) {
          stream.write(`${i},`);
          await sleep(2);
        }
        stream.end();
      })();
      await sleep(readerAfterMs);
      const read = await readAll(ahead);
      await writing;
      expect(read).toEqual({ text: Array.from({ length: 20 }, (_, i) => `${i},`).join('') });
    }
  });
});
