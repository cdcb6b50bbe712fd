// Per-key rate limits through the official SDKs against a local gateway on a real Redis: a request
// refused once by the key's requests-per-window limit is a 429 in the client's format with retry-after
// and the family's rate-limit headers, the SDK's own retry waits it out and succeeds, and the 429 is
// never charged; admitted answers carry the headers too. The window is shortened to 2 s
// (TOLLGATE_RATE_LIMIT_WINDOW_MS) so the retry waits seconds, not a minute; every timing is Redis's.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { until } from './e2e-support.js';

const WINDOW_MS = 2_000;
let h: Harness;
let redis: Redis;

beforeAll(async () => {
  h = await startHarness({ ledger: 'redis', config: { rateLimitWindowMs: WINDOW_MS } });
  redis = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  await h.close();
  await redis.quit();
});

/** Waits, by Redis's clock, for the start of the next window (no request counted in it yet), so the next few requests share it. */
async function freshWindow(): Promise<void> {
  const [s, us] = await redis.time();
  const into = (Number(s) * 1000 + Math.floor(Number(us) / 1000)) % WINDOW_MS;
  await new Promise((r) => setTimeout(r, WINDOW_MS - into + 20));
}

/** A fetch that notes each answer's status and headers, for the SDK to call through. */
function recordingFetch(seen: Array<{ status: number; headers: Headers }>): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    seen.push({ status: res.status, headers: res.headers });
    return res;
  };
}

async function limitRequests(perWindow: number): Promise<void> {
  await h.backend.accounts.setKeyRateLimits(h.accountId, h.keyId, { requestsPerMinute: perWindow, tokensPerMinute: 1_000_000 });
}

async function usageCount(): Promise<number> {
  await h.settled();
  return (await h.backend.ledger.listUsage(h.accountId)).length;
}

describe('rate limits through the official SDKs', () => {
  it('openai: refused once by RPM, the SDK waits out retry-after and succeeds; the 429 is not charged', async () => {
    await limitRequests(1);
    const seen: Array<{ status: number; headers: Headers }> = [];
    // The SDK's default retries (2), through a fetch that records what it got.
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, fetch: recordingFetch(seen) });
    const before = await usageCount();
    const balanceBefore = (await h.backend.ledger.balance(h.accountId)).balance;
    await freshWindow();
    const first = await client.chat.completions.create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'one' }] });
    const second = await client.chat.completions.create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'two' }] });
    expect(first.choices[0]?.message.content).toBeTruthy();
    expect(second.choices[0]?.message.content).toBeTruthy();
    expect(seen.map((s) => s.status)).toEqual([200, 429, 200]);
    const [ok, refused, retried] = seen as [(typeof seen)[0], (typeof seen)[0], (typeof seen)[0]];
    expect(ok.headers.get('x-ratelimit-limit-requests')).toBe('1');
    expect(ok.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(ok.headers.get('x-ratelimit-reset-requests')).toMatch(/^(\d+ms|\d+(\.\d+)?s)$/);
    expect(ok.headers.get('x-ratelimit-limit-tokens')).toBe('1000000');
    expect(refused.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    const wait = Number(refused.headers.get('retry-after-ms'));
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(WINDOW_MS + 10);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(retried.headers.get('x-ratelimit-limit-requests')).toBe('1');
    // Two answers, two usage records; the 429 left none and took nothing beyond their charges.
    await until('two usage records', async () => ((await usageCount()) >= before + 2 ? true : undefined));
    expect(await usageCount()).toBe(before + 2);
    const charged = (await h.backend.ledger.listUsage(h.accountId, { limit: 2 })).reduce((sum, u) => sum + u.cost, 0);
    expect((await h.backend.ledger.balance(h.accountId)).balance).toBe(balanceBefore - charged);
  });

  it("openai: the 429's body is OpenAI's error shape, code rate_limit_exceeded", async () => {
    await limitRequests(1);
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    await freshWindow();
    await client.chat.completions.create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'one' }] });
    const err = await client.chat.completions.create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'two' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    const e = err as InstanceType<typeof OpenAI.RateLimitError>;
    expect(e.status).toBe(429);
    expect(e.code).toBe('rate_limit_exceeded');
    expect(e.type).toBe('rate_limit_error');
    expect(e.message).toMatch(/limit of 1 requests per 2 s is reached; retry in/);
  });

  it('responses API: the same 429 in OpenAI shape, and the headers on its answers', async () => {
    await limitRequests(1);
    const seen: Array<{ status: number; headers: Headers }> = [];
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0, fetch: recordingFetch(seen) });
    await freshWindow();
    const ok = await client.responses.create({ model: 'outlaw-1-xploded', max_output_tokens: 20, input: 'one' });
    expect(ok.output_text).toBeTruthy();
    expect(seen[0]?.headers.get('x-ratelimit-limit-requests')).toBe('1');
    const err = await client.responses.create({ model: 'outlaw-1-xploded', max_output_tokens: 20, input: 'two' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('rate_limit_exceeded');
    expect(seen[1]?.headers.get('retry-after')).not.toBeNull();
  });

  it('anthropic: refused once by RPM, the SDK waits out retry-after and succeeds, with anthropic-ratelimit-* headers', async () => {
    await limitRequests(1);
    const seen: Array<{ status: number; headers: Headers }> = [];
    const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, fetch: recordingFetch(seen) });
    const before = await usageCount();
    await freshWindow();
    const first = await client.messages.create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'one' }] });
    const second = await client.messages.create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'two' }] });
    expect(first.content.length).toBeGreaterThan(0);
    expect(second.content.length).toBeGreaterThan(0);
    expect(seen.map((s) => s.status)).toEqual([200, 429, 200]);
    const [ok, refused] = seen as [(typeof seen)[0], (typeof seen)[0]];
    expect(ok.headers.get('anthropic-ratelimit-requests-limit')).toBe('1');
    expect(ok.headers.get('anthropic-ratelimit-requests-remaining')).toBe('0');
    const reset = ok.headers.get('anthropic-ratelimit-requests-reset') ?? '';
    expect(reset).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    expect(Math.abs(Date.parse(reset) - Date.now())).toBeLessThan(WINDOW_MS + 2_000);
    expect(ok.headers.get('anthropic-ratelimit-tokens-limit')).toBe('1000000');
    expect(ok.headers.get('anthropic-ratelimit-input-tokens-limit')).toBe('1000000');
    expect(refused.headers.get('anthropic-ratelimit-requests-remaining')).toBe('0');
    expect(refused.headers.get('retry-after')).not.toBeNull();
    await until('two usage records', async () => ((await usageCount()) >= before + 2 ? true : undefined));
    expect(await usageCount()).toBe(before + 2);
  });

  it("anthropic: the 429's body is Anthropic's error shape, type rate_limit_error", async () => {
    await limitRequests(1);
    await freshWindow();
    const auth = { 'x-api-key': h.key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' };
    const body = JSON.stringify({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] });
    expect((await fetch(`${h.baseUrl}/v1/messages`, { method: 'POST', headers: auth, body })).status).toBe(200);
    const res = await fetch(`${h.baseUrl}/v1/messages`, { method: 'POST', headers: auth, body });
    expect(res.status).toBe(429);
    const json = (await res.json()) as { type: string; error: { type: string; message: string } };
    expect(json.type).toBe('error');
    expect(json.error.type).toBe('rate_limit_error');
    expect(json.error.message).toMatch(/requests per 2 s/);
  });

  it('a request alone over the token limit is a final 429: the SDK does not retry it', async () => {
    await h.backend.accounts.setKeyRateLimits(h.accountId, h.keyId, { tokensPerMinute: 100 });
    const seen: Array<{ status: number; headers: Headers }> = [];
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, fetch: recordingFetch(seen) });
    const err = await client.chat.completions.create({ model: 'outlaw-1-xploded', max_tokens: 500, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as Error).message).toMatch(/more than this API key's limit of 100 tokens per 2 s; lower max_tokens/);
    expect(seen.map((s) => s.status)).toEqual([429]);
    expect(seen[0]?.headers.get('x-should-retry')).toBe('false');
  });

  it('a stream carries the headers too', async () => {
    await h.backend.accounts.setKeyRateLimits(h.accountId, h.keyId, { concurrentRequests: 5, tokensPerMinute: 1_000_000 });
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'outlaw-1-xploded', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    expect(response.headers.get('x-ratelimit-limit-tokens')).toBe('1000000');
    expect(Number(response.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(1_000_000);
  });

  it('without limits an answer carries no rate-limit headers', async () => {
    await h.backend.accounts.setKeyRateLimits(h.accountId, h.keyId, {});
    const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit-requests')).toBeNull();
    await res.text();
  });
});
