// A cost ceiling per request (issue 39, item 4), through the official clients: the x-tollgate-max-cost-usd
// header (per request with the SDKs' `headers` option, or on the client with `defaultHeaders`) and a
// key's default. Over every upstream format (OpenAI, Anthropic, Gemini), for every client format (chat
// completions, messages, Responses), whole and streamed: a ceiling below the request's worst case is
// served with the largest output limit that fits, named in x-tollgate-max-tokens and exactly what the
// upstream got (the simulator records each body), and the charge stays within the ceiling even though
// the reply runs to that limit; a ceiling below the prompt's own cost is a 402 in the caller's format
// naming both, with nothing sent upstream or charged; a key's default applies without a header, and a
// header can lower it, never raise it. The default also goes through the record (PostgreSQL) and Redis.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { redisKeys } from '../../src/billing/redis-keys.js';
import type { Queryable } from '../../src/record/database.js';
import { findUsage } from '../../src/record/usage-query.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import type { SimulatedRequest } from '../../src/simulator/server.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { until } from './e2e-support.js';

/** $0.30 input and $1.00 output per 1M tokens: an output token costs 1 µUSD. */
const MODEL = 'outlaw-1-xploded';
const HEADER = 'x-tollgate-max-cost-usd';
const SENT_LIMIT = 'x-tollgate-max-tokens';
/** Asked for: its output alone may cost 2,000 µUSD, four times the ceiling. */
const ASKED = 2_000;
const CEILING = '0.0005';
const CEILING_MICROS = 500;
/** Every reply runs to its output limit, so the charge is as close to the ceiling as it gets. */
const LONG_REPLIES = { replyTokens: 10_000 };

type ClientFormat = 'chat completions' | 'messages' | 'responses';
const CLIENT_FORMATS: ClientFormat[] = ['chat completions', 'messages', 'responses'];
const MODES: Array<['whole' | 'streamed', boolean]> = [
  ['whole', false],
  ['streamed', true],
];

interface Clients {
  openai: OpenAI;
  anthropic: Anthropic;
}

function clientsOf(h: Harness, key: string, defaultHeaders?: Record<string, string>): Clients {
  return {
    openai: new OpenAI({ apiKey: key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0, ...(defaultHeaders ? { defaultHeaders } : {}) }),
    anthropic: new Anthropic({ apiKey: key, baseURL: h.baseUrl, maxRetries: 0, ...(defaultHeaders ? { defaultHeaders } : {}) }),
  };
}

interface Ask {
  headers?: Record<string, string>;
  maxTokens?: number;
  prompt?: string;
  model?: string;
}

interface Served {
  requestId: string;
  /** x-tollgate-max-tokens, or null without it. */
  sentLimit: string | null;
  /** Output tokens the client was told of. */
  outputTokens: number;
}

/** One request through the format's official client, per-request headers in its `headers` option. */
async function ask(c: Clients, format: ClientFormat, stream: boolean, a: Ask = {}): Promise<Served> {
  const model = a.model ?? MODEL;
  const prompt = a.prompt ?? 'What does a tollgate do?';
  const maxTokens = a.maxTokens ?? ASKED;
  const options = a.headers === undefined ? {} : { headers: a.headers };
  const served = (response: Response, outputTokens: number | undefined): Served => ({
    requestId: response.headers.get('x-request-id') ?? '',
    sentLimit: response.headers.get(SENT_LIMIT),
    outputTokens: outputTokens ?? -1,
  });
  if (format === 'chat completions') {
    if (!stream) {
      const { data, response } = await c.openai.chat.completions.create({ model, max_tokens: maxTokens, messages: [{ role: 'user', content: prompt }] }, options).withResponse();
      return served(response, data.usage?.completion_tokens);
    }
    const { data, response } = await c.openai.chat.completions
      .create({ model, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: prompt }] }, options)
      .withResponse();
    let output: number | undefined;
    for await (const chunk of data) if (chunk.usage) output = chunk.usage.completion_tokens;
    return served(response, output);
  }
  if (format === 'messages') {
    if (!stream) {
      const { data, response } = await c.anthropic.messages.create({ model, max_tokens: maxTokens, messages: [{ role: 'user', content: prompt }] }, options).withResponse();
      return served(response, data.usage.output_tokens);
    }
    const { data, response } = await c.anthropic.messages.create({ model, max_tokens: maxTokens, stream: true, messages: [{ role: 'user', content: prompt }] }, options).withResponse();
    let output: number | undefined;
    for await (const event of data) if (event.type === 'message_delta') output = event.usage.output_tokens;
    return served(response, output);
  }
  if (!stream) {
    const { data, response } = await c.openai.responses.create({ model, max_output_tokens: maxTokens, input: prompt }, options).withResponse();
    return served(response, data.usage?.output_tokens);
  }
  const { data, response } = await c.openai.responses.create({ model, max_output_tokens: maxTokens, input: prompt, stream: true }, options).withResponse();
  let output: number | undefined;
  for await (const event of data) if (event.type === 'response.completed' || event.type === 'response.incomplete') output = event.response.usage?.output_tokens;
  return served(response, output);
}

/** The output limit an upstream body carries, in its format's field. */
function upstreamLimit(format: UpstreamFormatName, body: unknown): unknown {
  const b = body as Record<string, unknown>;
  if (format === 'gemini') return (b.generationConfig as Record<string, unknown> | undefined)?.maxOutputTokens;
  if (format === 'anthropic') return b.max_tokens;
  return b.max_completion_tokens ?? b.max_tokens;
}

/** The body the upstream got for a request id (the gateway sends it as x-request-id). */
function upstreamRequest(h: Harness, requestId: string): SimulatedRequest {
  const found = h.simulator.requests.filter((r) => r.headers['x-request-id'] === requestId);
  expect(found, `upstream requests of ${requestId}`).toHaveLength(1);
  return found[0]!;
}

/** The settled usage record of a request: the record's (PostgreSQL) when the gateway journals to one. */
async function recordOf(h: Harness, requestId: string): Promise<{ cost: number; usage: { output: number } }> {
  await h.settled();
  if (h.journal !== undefined && recordDb !== undefined) {
    await h.journal.flush();
    const recorded = await findUsage(recordDb, h.accountId, requestId);
    expect(recorded, `usage record of ${requestId}`).toBeDefined();
    return recorded!;
  }
  const record = (await h.backend.ledger.listUsage(h.accountId, { limit: 1000 })).find((r) => r.requestId === requestId);
  expect(record, `usage record of ${requestId}`).toBeDefined();
  return record!;
}

/** The record of the one suite that has it. */
let recordDb: Queryable | undefined;

/** The request was served under `ceiling` micro-USD: a lowered limit, sent upstream as named, and a charge within it. */
async function expectServedWithin(h: Harness, upstreamFormat: UpstreamFormatName, s: Served, ceiling: number, asked = ASKED): Promise<number> {
  const sent = Number(s.sentLimit);
  expect(Number.isSafeInteger(sent) && sent > 0, `${SENT_LIMIT}: ${s.sentLimit}`).toBe(true);
  expect(sent).toBeLessThan(asked);
  expect(upstreamLimit(upstreamFormat, upstreamRequest(h, s.requestId).body)).toBe(sent);
  // The reply ran to that limit, and still the charge is within the ceiling.
  expect(s.outputTokens).toBe(sent);
  const record = await recordOf(h, s.requestId);
  expect(record.usage.output).toBe(sent);
  expect(record.cost).toBeGreaterThan(0);
  expect(record.cost).toBeLessThanOrEqual(ceiling);
  return sent;
}

describe.each<UpstreamFormatName>(['openai', 'anthropic', 'gemini'])('over a %s-format upstream: a ceiling below the worst case lowers the output limit sent', (upstreamFormat) => {
  let h: Harness;
  let clients: Clients;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat, simulator: LONG_REPLIES });
    clients = clientsOf(h, h.key);
  });
  afterAll(async () => {
    await h?.close();
  });

  describe.each(CLIENT_FORMATS)('%s', (format) => {
    it.each(MODES)('%s: the largest limit that fits is sent and named; the charge is within the ceiling', async (_mode, stream) => {
      const s = await ask(clients, format, stream, { headers: { [HEADER]: CEILING } });
      await expectServedWithin(h, upstreamFormat, s, CEILING_MICROS);
    });
  });

  it('a ceiling above the worst case changes nothing: the asked limit is sent, and named', async () => {
    const s = await ask(clients, 'chat completions', false, { headers: { [HEADER]: '5' }, maxTokens: 40 });
    expect(s.sentLimit).toBe('40');
    expect(upstreamLimit(upstreamFormat, upstreamRequest(h, s.requestId).body)).toBe(40);
  });
});

describe('the ceiling in force: refusals, bad headers, a key default, the SDKs\' defaultHeaders', () => {
  let h: Harness;
  let clients: Clients;
  beforeAll(async () => {
    h = await startHarness({ simulator: LONG_REPLIES });
    clients = clientsOf(h, h.key);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A prompt of 20,000 bytes: its input bound alone is 20,000 tokens at $0.30/M, 6,000 µUSD and more. */
  const LONG_PROMPT = 'toll '.repeat(4_000);

  describe.each(CLIENT_FORMATS)('%s', (format) => {
    it.each(MODES)('%s: a ceiling below the prompt\'s cost is a 402 naming both; nothing is sent upstream or charged', async (_mode, stream) => {
      await h.settled();
      const sent = h.simulator.requests.length;
      const usage = (await h.backend.ledger.listUsage(h.accountId, { limit: 1000 })).length;
      const balance = await h.backend.ledger.balance(h.accountId);
      const err = await ask(clients, format, stream, { headers: { [HEADER]: '0.001' }, prompt: LONG_PROMPT }).then(
        () => undefined,
        (e: unknown) => e,
      );
      const apiError = format === 'messages' ? (err as InstanceType<typeof Anthropic.APIError>) : (err as InstanceType<typeof OpenAI.APIError>);
      expect(apiError).toBeInstanceOf(format === 'messages' ? Anthropic.APIError : OpenAI.APIError);
      expect(apiError.status).toBe(402);
      // The caller's wire format: OpenAI's {"error": {...}} or Anthropic's {"type": "error", "error": {...}}.
      const body = (format === 'messages' ? (apiError.error as { error: Record<string, unknown> }).error : apiError.error) as Record<string, unknown>;
      expect(body).toMatchObject({ type: 'billing_error', code: 'cost_ceiling_too_low', ceiling_micro_usd: 1_000, ceiling_usd: '0.001000', ceiling_set_by: HEADER });
      const promptCost = body.prompt_cost_micro_usd as number;
      expect(promptCost).toBeGreaterThan(6_000);
      expect(body.message).toBe(
        `This request's prompt alone (with one output token) may cost up to ${body.prompt_cost_usd as string} USD, above the ceiling of 0.001000 USD set by ${HEADER}. Raise the ceiling or shorten the prompt; nothing was charged.`,
      );
      await h.settled();
      expect(h.simulator.requests.length).toBe(sent);
      expect((await h.backend.ledger.listUsage(h.accountId, { limit: 1000 })).length).toBe(usage);
      expect(await h.backend.ledger.balance(h.accountId)).toEqual(balance);
    });

    it('a malformed, negative, too precise or absurd header is a 400 naming it, in the caller\'s format; nothing is sent upstream', async () => {
      const sent = h.simulator.requests.length;
      for (const [value, says] of [
        ['-0.01', 'must not be negative'],
        ['0.0000001', 'has more than 6 decimals'],
        ['five cents', 'is not a decimal amount of USD'],
        ['1e-3', 'is not a decimal amount of USD'],
        ['$0.05', 'is not a decimal amount of USD'],
        ['2000000', 'is above the largest ceiling taken, 1000000.000000 USD'],
        ['99999999999999999999999999', 'is above the largest ceiling taken'],
      ] as const) {
        const err = await ask(clients, format, false, { headers: { [HEADER]: value } }).then(
          () => undefined,
          (e: unknown) => e,
        );
        const apiError = err as InstanceType<typeof OpenAI.APIError> | InstanceType<typeof Anthropic.APIError>;
        expect(apiError?.status, `${value}`).toBe(400);
        const body = (format === 'messages' ? (apiError.error as { type: string; error: Record<string, unknown> }) : { type: 'error', error: apiError.error as Record<string, unknown> });
        expect(body.type).toBe('error');
        expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_cost_ceiling' });
        expect(body.error.message).toContain(`The ${HEADER} header ${says}`);
      }
      expect(h.simulator.requests.length).toBe(sent);
    });

    it.each(MODES)("%s: a key's default applies without a header; a header lower than it wins, a higher one is capped at it", async (_mode, stream) => {
      const created = await h.backend.accounts.createKey(h.accountId, { name: 'ceiling', maxCostPerRequest: CEILING_MICROS });
      const keyed = clientsOf(h, created.secret);
      const byDefault = await ask(keyed, format, stream);
      const sent = await expectServedWithin(h, 'openai', byDefault, CEILING_MICROS);
      // Asking for more than the key allows is asking for the key's ceiling.
      const above = await ask(keyed, format, stream, { headers: { [HEADER]: '0.01' } });
      expect(Number(above.sentLimit)).toBe(sent);
      await expectServedWithin(h, 'openai', above, CEILING_MICROS);
      const below = await ask(keyed, format, stream, { headers: { [HEADER]: '0.0003' } });
      expect(Number(below.sentLimit)).toBeLessThan(sent);
      await expectServedWithin(h, 'openai', below, 300);
    });
  });

  it("a key default below the prompt's cost is a 402 that says the key set it and a header cannot raise it", async () => {
    const created = await h.backend.accounts.createKey(h.accountId, { name: 'tight', maxCostPerRequest: 1_000 });
    const err = await ask(clientsOf(h, created.secret), 'chat completions', false, { headers: { [HEADER]: '1.00' }, prompt: LONG_PROMPT }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(err?.status).toBe(402);
    expect(err?.error).toMatchObject({ code: 'cost_ceiling_too_low', ceiling_set_by: 'key', ceiling_micro_usd: 1_000 });
    expect((err?.error as { message: string }).message).toContain(`above the ceiling of 0.001000 USD set as this key's max cost per request (a ${HEADER} header can lower it, not raise it)`);
  });

  it('the SDKs\' defaultHeaders set a ceiling for every request of the client', async () => {
    const withDefaults = clientsOf(h, h.key, { [HEADER]: CEILING });
    await expectServedWithin(h, 'openai', await ask(withDefaults, 'chat completions', false), CEILING_MICROS);
    await expectServedWithin(h, 'openai', await ask(withDefaults, 'messages', true), CEILING_MICROS);
    await expectServedWithin(h, 'openai', await ask(withDefaults, 'responses', false), CEILING_MICROS);
  });

  it('/v1/key shows the key\'s default; /v1/models says how to set a ceiling, in both shapes', async () => {
    const created = await h.backend.accounts.createKey(h.accountId, { name: 'shown', maxCostPerRequest: 50_000 });
    const key = (await (await fetch(`${h.baseUrl}/v1/key`, { headers: { authorization: `Bearer ${created.secret}` } })).json()) as { data: Record<string, unknown> };
    expect(key.data.max_cost_per_request).toBe(0.05);
    expect((key.data.micros as Record<string, unknown>).max_cost_per_request).toBe(50_000);
    const plain = (await (await fetch(`${h.baseUrl}/v1/key`, { headers: { authorization: `Bearer ${h.key}` } })).json()) as { data: Record<string, unknown> };
    expect(plain.data.max_cost_per_request).toBeNull();

    const howTo = { header: HEADER, unit: 'USD', output_limit_header: SENT_LIMIT };
    const listed = (await clients.openai.models.retrieve(MODEL)) as unknown as { cost_ceiling: unknown };
    expect(listed.cost_ceiling).toEqual(howTo);
    for await (const m of clients.openai.models.list()) expect((m as unknown as { cost_ceiling: unknown }).cost_ceiling).toEqual(howTo);
    const info = (await clients.anthropic.models.retrieve(MODEL)) as unknown as { cost_ceiling: unknown };
    expect(info.cost_ceiling).toEqual(howTo);
  });
});

describe('thinking budgets under a ceiling (reasoning model, Anthropic-format upstream)', () => {
  /** $0.40 input, $1.60 output per 1M tokens; it reasons. */
  const THINKER = 'glm-5.3-flash-xploded';
  let h: Harness;
  let clients: Clients;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'anthropic' });
    clients = clientsOf(h, h.key);
  });
  afterAll(async () => {
    await h?.close();
  });

  it("a Messages client's thinking budget is kept: the limit stays above budget_tokens, or a 402 says the budget does not fit", async () => {
    const thinking = { type: 'enabled' as const, budget_tokens: 2_000 };
    const params = { model: THINKER, max_tokens: 8_000, thinking, messages: [{ role: 'user' as const, content: 'Think about tolls.' }] };
    const { response } = await clients.anthropic.messages.create(params, { headers: { [HEADER]: '0.005' } }).withResponse();
    const sent = Number(response.headers.get(SENT_LIMIT));
    expect(sent).toBeGreaterThan(2_000);
    expect(sent).toBeLessThan(8_000);
    const body = upstreamRequest(h, response.headers.get('x-request-id') ?? '').body as { max_tokens: number; thinking: unknown };
    expect(body.max_tokens).toBe(sent);
    expect(body.thinking).toEqual(thinking);
    expect((await recordOf(h, response.headers.get('x-request-id') ?? '')).cost).toBeLessThanOrEqual(5_000);

    const before = h.simulator.requests.length;
    const err = await clients.anthropic.messages.create(params, { headers: { [HEADER]: '0.002' } }).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof Anthropic.APIError>,
    );
    expect(err?.status).toBe(402);
    expect((err?.error as { error: { message: string } }).error.message).toContain('with the 2001 output tokens its thinking budget needs (max_tokens above budget_tokens)');
    expect(h.simulator.requests.length).toBe(before);
  });

  it('a translated reasoning effort gets a thinking budget below the lowered max_tokens', async () => {
    const { response } = await clients.openai.chat.completions
      .create({ model: THINKER, max_tokens: 16_000, reasoning_effort: 'medium', messages: [{ role: 'user', content: 'Think about tolls.' }] }, { headers: { [HEADER]: '0.005' } })
      .withResponse();
    const sent = Number(response.headers.get(SENT_LIMIT));
    expect(sent).toBeGreaterThan(1_024);
    expect(sent).toBeLessThan(16_000);
    const body = upstreamRequest(h, response.headers.get('x-request-id') ?? '').body as { max_tokens: number; thinking?: { type: string; budget_tokens: number } };
    expect(body.max_tokens).toBe(sent);
    // Medium effort asks 8,192 tokens of thinking; Anthropic refuses a budget not below max_tokens.
    expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: sent - 1 });
  });
});

describe("a key's default through the record (PostgreSQL) and Redis", () => {
  const testDb = useTestDatabase('cost_ceiling');
  let h: Harness;
  let redis: Redis;
  beforeAll(async () => {
    h = await startHarness({ ledger: 'redis', record: testDb.db, simulator: LONG_REPLIES });
    recordDb = testDb.db;
    redis = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await h?.close();
    await redis?.quit();
  });

  it('set on a key, it is in the record and the Redis key hash, and the gateway applies it; cleared, it is gone', async () => {
    const created = await h.backend.accounts.createKey(h.accountId, { name: 'recorded' });
    expect(await h.backend.accounts.updateKey(h.accountId, created.record.id, { maxCostPerRequest: CEILING_MICROS })).toBe(true);
    const row = await testDb.db.query<{ max_cost_per_request: string | null }>('SELECT max_cost_per_request FROM api_keys WHERE id = $1', [created.record.id]);
    expect(Number(row.rows[0]?.max_cost_per_request)).toBe(CEILING_MICROS);
    const keyHash = redisKeys(h.redisNamespace ?? '').key(h.accountId, created.record.id);
    expect(await redis.hget(keyHash, 'maxCost')).toBe(String(CEILING_MICROS));

    const keyed = clientsOf(h, created.secret);
    await expectServedWithin(h, 'openai', await ask(keyed, 'chat completions', true), CEILING_MICROS);

    expect(await h.backend.accounts.updateKey(h.accountId, created.record.id, { maxCostPerRequest: null })).toBe(true);
    expect(await redis.hget(keyHash, 'maxCost')).toBeNull();
    expect((await h.backend.accounts.getKey(h.accountId, created.record.id))?.maxCostPerRequest).toBeUndefined();
    // The gateway's key cache holds a lookup for TOLLGATE_KEY_CACHE_TTL_MS (1 s): then the ceiling is gone.
    const unlimited = await until('the cleared default to reach the gateway', async () => {
      const s = await ask(keyed, 'chat completions', false, { maxTokens: 30 });
      return s.sentLimit === null ? s : undefined;
    });
    expect(upstreamLimit('openai', upstreamRequest(h, unlimited.requestId).body)).toBe(30);
  });
});
