// Balance and usage with the API key (issue 32, item 4), over real HTTP against a local gateway with a
// real Redis hot path journaling to a real PostgreSQL: GET /v1/key, /v1/credits and /v1/generation (and
// their /api/v1 aliases) answer in OpenRouter's field names with exact micro-USD beside, from the record
// and the ledger; a request of another account is not found, a revoked key is refused.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { until } from './e2e-support.js';
import { findUsage } from '../../src/record/usage-query.js';
import { openPostgres } from '../../src/record/database.js';

const testDb = useTestDatabase('account_info');
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ ledger: 'redis', record: testDb.db, keyCaps: { monthlyCap: 5_000_000, lifetimeCap: 50_000_000 } });
});
afterAll(async () => {
  await h.close();
});

async function get(path: string, key: string, header: 'bearer' | 'x-api-key' = 'bearer'): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${h.baseUrl}${path}`, { headers: header === 'bearer' ? { authorization: `Bearer ${key}` } : { 'x-api-key': key } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

type Data = Record<string, unknown> & { micros: Record<string, unknown> };
const data = (b: Record<string, unknown>): Data => b.data as Data;

async function recorded(): Promise<void> {
  await h.settled();
  await h.journal?.flush();
}

/** A request's generation once the record has it (its settlement may still be on its way to PostgreSQL). */
async function recordedGeneration(id: string, key: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return until(`generation ${id}`, async () => {
    await recorded();
    const r = await get(`/v1/generation?id=${id}`, key);
    return r.status === 404 ? undefined : r;
  }, 10_000);
}

const openai = () => new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });

describe('GET /v1/key, /v1/credits, /v1/generation', () => {
  let spent = 0;
  const ids: { requestId: string; completionId: string; messageId: string; streamRequestId: string } = { requestId: '', completionId: '', messageId: '', streamRequestId: '' };

  beforeAll(async () => {
    await h.backend.accounts.setKeyRateLimits(h.accountId, h.keyId, { requestsPerMinute: 600 });
    await h.backend.accounts.setAccountRateLimits(h.accountId, { tokensPerMinute: 2_000_000 });
    const { data: completion, response } = await openai().chat.completions.create({ model: 'outlaw-1-xploded', max_tokens: 40, messages: [{ role: 'user', content: 'hello' }] }).withResponse();
    ids.requestId = response.headers.get('x-request-id') ?? '';
    ids.completionId = completion.id;
    const message = await new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 }).messages.create({ model: 'outlaw-1-xploded', max_tokens: 40, messages: [{ role: 'user', content: 'hi' }] });
    // Messages clients read the request id from the request-id header (a message's id is its upstream's).
    ids.messageId = message._request_id ?? '';
    const stream = await openai().chat.completions.create({ model: 'outlaw-1-xploded', max_tokens: 60, stream: true, messages: [{ role: 'user', content: 'stream' }] }).withResponse();
    for await (const chunk of stream.data) void chunk;
    ids.streamRequestId = stream.response.headers.get('x-request-id') ?? '';
    // All three requests in the record (a stream's settlement may still be on its way after its last byte).
    spent = await until('three records', async () => {
      await recorded();
      const sum = await testDb.db.query<{ n: number; spent: string }>('SELECT count(*)::int AS n, sum(cost)::text AS spent FROM usage_records WHERE account_id = $1', [h.accountId]);
      return sum.rows[0]?.n === 3 ? Number(sum.rows[0].spent) : undefined;
    }, 10_000);
    expect(spent).toBeGreaterThan(0);
  });

  it("/v1/key: the key's name, caps, spend by period, what is left and its rate limits", async () => {
    const { status, body } = await get('/v1/key', h.key);
    expect(status).toBe(200);
    const d = data(body);
    expect(d).toMatchObject({ label: 'e2e', name: 'e2e', id: h.keyId, is_free_tier: false, limit_reset: 'monthly', limit: 5, monthly_cap: 5, lifetime_cap: 50 });
    // Everything was spent today, this week and this month.
    expect(d.micros).toMatchObject({ usage: spent, usage_daily: spent, usage_weekly: spent, usage_monthly: spent, limit: 5_000_000, limit_remaining: 5_000_000 - spent });
    expect(d.usage).toBe(spent / 1_000_000);
    expect(d.usage_daily).toBe(spent / 1_000_000);
    expect(d.limit_remaining).toBe((5_000_000 - spent) / 1_000_000);
    // The monthly cap binds before the balance (100 USD) does.
    expect((d.micros as { remaining: number }).remaining).toBe(5_000_000 - spent);
    expect(d.rate_limit).toEqual({ requests: 600, interval: '1m' });
    expect(d.rate_limits).toEqual({ requests_per_minute: 600, tokens_per_minute: 2_000_000, concurrent_requests: null, interval: '1m' });
    // The same under OpenRouter's path, and with the Anthropic clients' header.
    const alias = await get('/api/v1/key', h.key, 'x-api-key');
    expect(alias.status).toBe(200);
    expect(data(alias.body).micros).toEqual(d.micros);
  });

  it('/v1/credits: credited, used and the balance, which is their difference', async () => {
    const { status, body } = await get('/v1/credits', h.key);
    expect(status).toBe(200);
    const d = data(body);
    expect(d.micros).toMatchObject({ total_credits: 100_000_000, total_usage: spent, balance: 100_000_000 - spent, held: 0, available: 100_000_000 - spent });
    expect(d.total_credits).toBe(100);
    expect(d.total_usage).toBe(spent / 1_000_000);
    expect(d.balance).toBe((100_000_000 - spent) / 1_000_000);
    expect((await get('/api/v1/credits', h.key)).body).toEqual(body);
  });

  it('/v1/generation: one request of this account, by its request id or its reply id', async () => {
    const byRequest = await get(`/v1/generation?id=${ids.requestId}`, h.key);
    expect(byRequest.status).toBe(200);
    const d = data(byRequest.body);
    const row = await findUsage(testDb.db, h.accountId, ids.requestId);
    expect(d).toMatchObject({
      id: ids.requestId,
      model: 'outlaw-1-xploded',
      provider_name: 'sim',
      upstream: 'sim',
      key_id: h.keyId,
      total_cost_micros: row?.cost,
      total_cost: (row?.cost ?? 0) / 1_000_000,
      tokens_prompt: row?.usage.input,
      tokens_completion: row?.usage.output,
      native_tokens_cached: row?.usage.cachedInput,
      native_tokens_reasoning: row?.usage.reasoning,
      status: 'completed',
      http_status: 200,
      cancelled: false,
      refunded: false,
    });
    expect(d.finish_reason).toEqual(expect.any(String));
    expect(d.latency).toEqual(expect.any(Number));
    // The completion's own id finds the same record; so does the request id an Anthropic client reads.
    expect(data((await get(`/v1/generation?id=${ids.completionId}`, h.key)).body).id).toBe(ids.requestId);
    const msg = await get(`/api/v1/generation?id=${ids.messageId}`, h.key);
    expect(msg.status).toBe(200);
    expect(data(msg.body).id).toBe(ids.messageId);
    expect(ids.messageId).toMatch(/^req_/);
    // A response's id (resp_…) too.
    const resp = await openai().responses.create({ model: 'outlaw-1-xploded', max_output_tokens: 20, input: 'hi' });
    const byResponse = await recordedGeneration(resp.id, h.key);
    expect(byResponse.status).toBe(200);
    expect(data(byResponse.body).id).toBe(resp.id.replace(/^resp_/, 'req_'));
    // A stream's time to its first token, within its latency.
    const s = data((await get(`/v1/generation?id=${ids.streamRequestId}`, h.key)).body);
    expect(s.time_to_first_token).toEqual(expect.any(Number));
    expect(s.time_to_first_token as number).toBeLessThanOrEqual(s.latency as number);
    expect(s.generation_time).toBe((s.latency as number) - (s.time_to_first_token as number));
  });

  it("the official clients read all three with their generic GET (openai's and Anthropic's), and a 404 is the SDK's NotFoundError", async () => {
    // Each SDK's answer is the same document a plain GET reads (earlier tests here spent more since).
    await recorded();
    const client = openai();
    const key = (await client.get('/key')) as { data: Data };
    expect(key.data).toEqual(data((await get('/v1/key', h.key)).body));
    expect(key.data).toMatchObject({ id: h.keyId });
    const credits = (await client.get('/credits')) as { data: Data };
    expect(credits.data).toEqual(data((await get('/v1/credits', h.key)).body));
    const generation = (await client.get('/generation', { query: { id: ids.completionId } })) as { data: Data };
    expect(generation.data).toEqual(data((await get(`/v1/generation?id=${ids.completionId}`, h.key)).body));
    await expect(client.get('/generation', { query: { id: 'req_not_ours' } })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const anthropic = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const viaAnthropic = (await anthropic.get('/v1/credits')) as { data: Data };
    expect(viaAnthropic.data).toEqual(credits.data);
  });

  it("another account's request is not found, in a clear error; a missing id is a 400", async () => {
    const oursBefore = data((await get('/v1/credits', h.key)).body).micros;
    const other = await h.backend.accounts.createAccount('other');
    await h.backend.ledger.credit(other.id, 10_000_000, `start-${other.id}`);
    const otherKey = await h.backend.accounts.createKey(other.id, { name: 'theirs' });
    const res = await new OpenAI({ apiKey: otherKey.secret, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 }).chat.completions
      .create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'mine' }] })
      .withResponse();
    const theirs = res.response.headers.get('x-request-id') ?? '';
    expect((await recordedGeneration(theirs, otherKey.secret)).status).toBe(200);
    const asked = await get(`/v1/generation?id=${theirs}`, h.key);
    expect(asked.status).toBe(404);
    const error = asked.body.error as { code: string; message: string; type: string };
    expect(error.code).toBe('generation_not_found');
    expect(error.message).toMatch(/No request with id .* on this key's account/);
    // And their spend is not in ours.
    expect(data((await get('/v1/credits', h.key)).body).micros).toEqual(oursBefore);
    const missing = await get('/v1/generation', h.key);
    expect(missing.status).toBe(400);
    expect((missing.body.error as { param: string }).param).toBe('id');
  });

  it('a revoked key is refused (401), as is a call without a key', async () => {
    const extra = await h.backend.accounts.createKey(h.accountId, { name: 'short-lived' });
    expect((await get('/v1/key', extra.secret)).status).toBe(200);
    await h.backend.accounts.revokeKey(h.accountId, extra.record.id);
    // Revocations reach the gateway's key cache within its TTL.
    const refused = await until('revoked', async () => {
      const r = await get('/v1/key', extra.secret);
      return r.status === 401 ? r : undefined;
    }, 10_000);
    expect((refused.body.error as { code: string }).code).toBe('revoked_api_key');
    expect((await fetch(`${h.baseUrl}/v1/credits`)).status).toBe(401);
  });
});

describe('without a record, the hot path answers', () => {
  let m: Harness;
  beforeAll(async () => {
    m = await startHarness({ ledger: 'memory' });
  });
  afterAll(async () => {
    await m.close();
  });

  it('/v1/generation and the spend of /v1/key come from the ledger\'s recent records', async () => {
    const { response } = await new OpenAI({ apiKey: m.key, baseURL: `${m.baseUrl}/v1`, maxRetries: 0 }).chat.completions
      .create({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    await m.settled();
    const rid = response.headers.get('x-request-id') ?? '';
    const cost = (await m.backend.ledger.listUsage(m.accountId))[0]?.cost ?? -1;
    const g = await fetch(`${m.baseUrl}/v1/generation?id=${rid}`, { headers: { authorization: `Bearer ${m.key}` } });
    expect(g.status).toBe(200);
    expect(((await g.json()) as { data: { total_cost_micros: number } }).data.total_cost_micros).toBe(cost);
    const k = await fetch(`${m.baseUrl}/v1/key`, { headers: { authorization: `Bearer ${m.key}` } });
    const kd = ((await k.json()) as { data: Data }).data;
    expect(kd.micros).toMatchObject({ usage: cost, usage_daily: cost, usage_weekly: cost, usage_monthly: cost, limit: null });
    expect(kd.limit).toBeNull();
    expect(kd.rate_limit).toBeNull();
  });
});

describe('a record that does not answer', () => {
  it('is a retryable 503 usage_records_unavailable in the client\'s format, never a 500', async () => {
    // A pool of its own on the test database, closed under the gateway: real PostgreSQL failures.
    const db = await openPostgres(testDb.url, { max: 2 });
    const r = await startHarness({ ledger: 'redis', record: db });
    try {
      await db.close();
      const res = await fetch(`${r.baseUrl}/v1/generation?id=req_x`, { headers: { authorization: `Bearer ${r.key}` } });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('usage_records_unavailable');
      const key = await fetch(`${r.baseUrl}/v1/key`, { headers: { authorization: `Bearer ${r.key}` } });
      expect(key.status).toBe(503);
      await key.text();
    } finally {
      await r.close().catch(() => undefined);
    }
  });
});
