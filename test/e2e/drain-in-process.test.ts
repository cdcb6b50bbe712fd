// The drain bound inside one process: a stream still open when it passes is ended with the client's
// error event, charged for what was generated, and not counted as an upstream failure (a deploy with
// long streams must not page whoever looks after the upstreams).
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('drain bound', () => {
  it('ends an open stream with an error event, settles it, and counts no upstream error', async () => {
    h = await startHarness({ ledger: 'redis', simulator: { tokenDelayMs: 40, replyTokens: 200 }, config: { drainTimeoutMs: 300 } });
    const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'outlaw-1-xploded', stream: true, messages: [{ role: 'user', content: 'Tell a story.' }] }),
    });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id') ?? '';
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    const closing = h.gateway.close();
    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await closing;
    const last = text.trimEnd().split('\n\n').at(-1) ?? '';
    expect((JSON.parse(last.replace(/^data: /, '')) as { error: { type: string; message: string } }).error).toMatchObject({ type: 'service_unavailable_error', message: expect.stringMatching(/restarting/) as unknown });
    expect(text).not.toContain('[DONE]');
    expect(h.logLines.some((l) => l.includes('"drain_timeout"'))).toBe(true);

    const record = (await h.backend.ledger.listUsage(h.accountId, { limit: 10 })).find((r) => r.requestId === requestId);
    expect(record?.usage.output).toBeGreaterThan(0);
    expect(record?.usage.output).toBeLessThan(200);
    expect(record?.cost).toBeGreaterThan(0);
    const audit = await h.backend.ledger.audit(h.accountId);
    expect(audit).toMatchObject({ difference: 0, holdsOutstanding: 0, drawnDown: record?.cost });

    const exposition = await h.gateway.metrics.registry.metrics();
    expect(exposition).not.toMatch(/upstream_errors_total\{[^}]*class="stream_cut"[^}]*\} [1-9]/);
  }, 30_000);

  it('closes a connection that never sent a request instead of waiting the drain bound for it', async () => {
    h = await startHarness({ config: { drainTimeoutMs: 20_000 } });
    // A client's spare connection: connected, nothing sent (Node counts it as receiving a request).
    const { port } = new URL(h.baseUrl);
    const silent = connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
    const closedBySilence = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    const started = performance.now();
    await h.gateway.close();
    await closedBySilence;
    // Well inside the 20 s bound: closed a second or so after the drain began.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(h.logLines.some((l) => l.includes('"drain_timeout"'))).toBe(false);
  }, 30_000);
});
