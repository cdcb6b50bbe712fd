// Many concurrent streams to one upstream origin: over HTTP/1.1 each holds a connection until it ends,
// so a connection cap on the upstream pool is a cap on concurrent streams. By default there is none;
// TOLLGATE_UPSTREAM_MAX_CONNECTIONS sets one, and requests past it wait for a connection.
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

const MODEL = 'outlaw-1-xploded';
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Opens `n` streams at once and resolves with how many sent their first event within `waitMs`. */
async function openStreams(harness: Harness, n: number, waitMs: number): Promise<{ started: number; abort: () => void }> {
  const pool = new Pool(harness.baseUrl, { connections: n });
  const controller = new AbortController();
  let started = 0;
  const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
  const all = Array.from({ length: n }, async () => {
    try {
      const res = await pool.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${harness.key}` },
        body,
        signal: controller.signal,
      });
      // Read on (never break out: that would close the stream and free its upstream connection).
      let counted = false;
      for await (const chunk of res.body) {
        if (!counted && (chunk as Buffer).toString('utf8').includes('data: ')) {
          counted = true;
          started += 1;
        }
      }
    } catch {
      // Aborted at the end of the test.
    }
  });
  const deadline = Date.now() + waitMs;
  while (started < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return {
    started,
    abort: () => {
      controller.abort();
      void Promise.allSettled(all).then(() => pool.destroy());
    },
  };
}

describe('upstream connections', () => {
  it('has no per-origin cap by default: 600 concurrent streams to one upstream all start', { timeout: 60_000 }, async () => {
    // The first token comes at once, the next only after a minute: every stream stays open.
    h = await startHarness({ simulator: { firstTokenDelayMs: 0, tokenDelayMs: 60_000 } });
    const { started, abort } = await openStreams(h, 600, 30_000);
    abort();
    expect(started).toBe(600);
  });

  it('TOLLGATE_UPSTREAM_MAX_CONNECTIONS caps them: past the cap a stream waits for a connection', { timeout: 30_000 }, async () => {
    h = await startHarness({ simulator: { firstTokenDelayMs: 0, tokenDelayMs: 60_000 }, config: { upstreamMaxConnections: 3 } });
    const { started, abort } = await openStreams(h, 5, 3_000);
    // The two past the cap never reached the upstream.
    expect(h.simulator.requests).toHaveLength(3);
    abort();
    expect(started).toBe(3);
  });
});
