// Cache-aware prices with the official clients (issue #32, item 1), on the example catalog's
// mimo-v2.6-flash-xploded: $1.00 input, $3.00 output, $0.10 cache read, $1.25 5-minute cache write,
// $2.00 1-hour cache write, per 1M tokens. The simulator emulates prompt caching (Anthropic
// cache_control breakpoints with their ttl; OpenAI prompt_cache_key), the gateway runs on a real Redis
// hot path with its journal to a real PostgreSQL: the answer's usage, the usage record, its CSV row and
// JSON carry reads and both writes apart, and the charge is each class at its own price.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiUsage } from '../../src/dashboard/usage-routes.js';
import { usageCsvStream } from '../../src/dashboard/usage-view.js';
import { statementPage } from '../../src/record/statement.js';
import { findUsage } from '../../src/record/usage-query.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';

const MODEL = 'mimo-v2.6-flash-xploded';
/** The example catalog's prices of MODEL, micro-USD per 1M tokens. */
const PRICE = { input: 1_000_000n, output: 3_000_000n, read: 100_000n, write5m: 1_250_000n, write1h: 2_000_000n };

const testDb = useTestDatabase('cache_prices');

/** Σ class × price, rounded up once. */
function cost(c: { uncached: number; read: number; write5m: number; write1h: number; output: number }): number {
  const scaled =
    BigInt(c.uncached) * PRICE.input + BigInt(c.read) * PRICE.read + BigInt(c.write5m) * PRICE.write5m + BigInt(c.write1h) * PRICE.write1h + BigInt(c.output) * PRICE.output;
  return Number((scaled + 999_999n) / 1_000_000n);
}

async function recordOf(h: Harness, requestId: string) {
  await h.settled();
  await h.journal?.flush();
  const rec = await findUsage(testDb.db, h.accountId, requestId);
  expect(rec, `usage record of ${requestId}`).toBeDefined();
  return rec!;
}

describe('an Anthropic client and upstream: cache_control writes for 5 minutes and 1 hour, then reads', () => {
  let h: Harness;
  let client: Anthropic;
  const SYSTEM: Anthropic.TextBlockParam[] = [
    { type: 'text', text: 'You are a patient assistant for a hardware shop. '.repeat(20), cache_control: { type: 'ephemeral', ttl: '1h' } },
  ];

  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'anthropic', ledger: 'redis', record: testDb.db, simulator: { promptCache: true } });
    client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the first turn writes the system prompt for an hour and the message for 5 minutes; each is priced at its own write price', async () => {
    const { data, response } = await client.messages
      .create({
        model: MODEL,
        max_tokens: 200,
        system: SYSTEM,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Which screws hold a shelf bracket? '.repeat(5), cache_control: { type: 'ephemeral' } }] }],
      })
      .withResponse();
    const u = data.usage;
    const up = h.simulator.requests.at(-1)!;
    expect(up.cacheWrite1hTokens).toBeGreaterThan(0);
    expect(up.cacheWrite5mTokens).toBeGreaterThan(0);
    expect(up.cachedInputTokens).toBe(0);
    // The client's usage: input_tokens exclude the writes, which are split by lifetime.
    expect(u.cache_read_input_tokens).toBe(0);
    expect(u.cache_creation_input_tokens).toBe(up.cacheWrite5mTokens + up.cacheWrite1hTokens);
    expect(u.cache_creation).toEqual({ ephemeral_5m_input_tokens: up.cacheWrite5mTokens, ephemeral_1h_input_tokens: up.cacheWrite1hTokens });
    expect(u.input_tokens + (u.cache_creation_input_tokens ?? 0)).toBe(up.inputTokens);

    const rec = await recordOf(h, response.headers.get('x-request-id') ?? '');
    expect(rec.usage).toEqual({ input: up.inputTokens, output: u.output_tokens, cachedInput: 0, reasoning: 0, cacheWrite5m: up.cacheWrite5mTokens, cacheWrite1h: up.cacheWrite1hTokens });
    const expected = cost({ uncached: u.input_tokens, read: 0, write5m: up.cacheWrite5mTokens, write1h: up.cacheWrite1hTokens, output: u.output_tokens });
    expect(rec.cost).toBe(expected);
    // Billed at the plain input price, the writes would have cost less: the operator's loss this closes.
    expect(rec.cost).toBeGreaterThan(cost({ uncached: up.inputTokens, read: 0, write5m: 0, write1h: 0, output: u.output_tokens }));
    expect(apiUsage(rec)).toMatchObject({ input_tokens: up.inputTokens, cached_input_tokens: 0, cache_write_5m_tokens: up.cacheWrite5mTokens, cache_write_1h_tokens: up.cacheWrite1hTokens, cost_micro_usd: expected });
    // The statement's charge of this one request names it, with the tokens its amount was computed from.
    const line = (await statementPage(testDb.db, { accountId: h.accountId })).lines.find((l) => l.requestId === rec.requestId);
    expect(line).toMatchObject({ kind: 'usage', amount: -expected, tokens: { input: up.inputTokens, output: u.output_tokens, cacheRead: 0, cacheWrite5m: up.cacheWrite5mTokens, cacheWrite1h: up.cacheWrite1hTokens } });
  });

  it('the next turn reads the hour-long system prompt from the cache (streamed), and the CSV row shows the split', async () => {
    const stream = client.messages.stream({
      model: MODEL,
      max_tokens: 200,
      system: SYSTEM,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'And for a heavy mirror? '.repeat(5), cache_control: { type: 'ephemeral' } }] }],
    });
    const message = await stream.finalMessage();
    const requestId = (await stream.withResponse()).response.headers.get('x-request-id') ?? '';
    const u = message.usage;
    const up = h.simulator.requests.at(-1)!;
    expect(up.cachedInputTokens).toBeGreaterThan(0);
    expect(up.cacheWrite1hTokens).toBe(0);
    expect(up.cacheWrite5mTokens).toBeGreaterThan(0);
    expect(u.cache_read_input_tokens).toBe(up.cachedInputTokens);
    expect(u.cache_creation_input_tokens).toBe(up.cacheWrite5mTokens);
    expect(u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0)).toBe(up.inputTokens);

    const rec = await recordOf(h, requestId);
    expect(rec.usage).toEqual({ input: up.inputTokens, output: u.output_tokens, cachedInput: up.cachedInputTokens, reasoning: 0, cacheWrite5m: up.cacheWrite5mTokens });
    const expected = cost({ uncached: u.input_tokens, read: up.cachedInputTokens, write5m: up.cacheWrite5mTokens, write1h: 0, output: u.output_tokens });
    expect(rec.cost).toBe(expected);

    let csv = '';
    for await (const chunk of await usageCsvStream(testDb.db, h.accountId, { requestId }, new Map())) csv += String(chunk);
    const [header, row] = csv.split('\r\n');
    const cells = (line: string | undefined) => (line ?? '').split(',');
    const column = (name: string) => cells(row)[cells(header).indexOf(name)];
    expect(column('input_tokens')).toBe(String(up.inputTokens));
    expect(column('cached_input_tokens')).toBe(String(up.cachedInputTokens));
    expect(column('cache_write_5m_tokens')).toBe(String(up.cacheWrite5mTokens));
    expect(column('cache_write_1h_tokens')).toBe('0');
    expect(column('cost_micro_usd')).toBe(String(expected));
  });
});

describe('an OpenAI client and upstream: a prompt_cache_key prefix read from the cache', () => {
  let h: Harness;
  let client: OpenAI;

  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'openai', ledger: 'redis', record: testDb.db, simulator: { promptCache: true } });
    client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the second turn reports cached_tokens within prompt_tokens, charged at the cache-read price', async () => {
    const history: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You answer questions about the shop inventory. '.repeat(20) },
      { role: 'user', content: 'Do you sell wall plugs?' },
    ];
    const first = await client.chat.completions.create({ model: MODEL, messages: history, prompt_cache_key: 'inventory' });
    expect(first.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    history.push({ role: 'assistant', content: first.choices[0]?.message.content ?? '' }, { role: 'user', content: 'Which sizes?' });
    const { data, response } = await client.chat.completions.create({ model: MODEL, messages: history, prompt_cache_key: 'inventory' }).withResponse();
    const up = h.simulator.requests.at(-1)!;
    const u = data.usage!;
    expect(up.cachedInputTokens).toBeGreaterThan(0);
    // OpenAI's convention: prompt_tokens include the cached ones; there are no writes to report. (The
    // model reasons: its reasoning tokens are output, at the output price, as the catalog sets none.)
    expect(u.prompt_tokens).toBe(up.inputTokens);
    expect(u.prompt_tokens_details?.cached_tokens).toBe(up.cachedInputTokens);
    expect(u.prompt_tokens_details).not.toHaveProperty('cache_write_tokens');

    const rec = await recordOf(h, response.headers.get('x-request-id') ?? '');
    expect(rec.usage).toEqual({ input: up.inputTokens, output: u.completion_tokens, cachedInput: up.cachedInputTokens, reasoning: u.completion_tokens_details?.reasoning_tokens ?? 0 });
    expect(rec.cost).toBe(cost({ uncached: up.inputTokens - up.cachedInputTokens, read: up.cachedInputTokens, write5m: 0, write1h: 0, output: u.completion_tokens }));
  });
});

describe('/v1/models shows the cache prices in both shapes', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('OpenAI shape (openai SDK) and Anthropic shape (@anthropic-ai/sdk)', async () => {
    const prices = { input: 1, output: 3, cache_read: 0.1, cached_input: 0.1, cache_write_5m: 1.25, cache_write_1h: 2, currency: 'USD', unit: 'per 1M tokens' };
    const openai = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    const listed = (await openai.models.retrieve(MODEL)) as unknown as { pricing: unknown };
    expect(listed.pricing).toEqual(prices);
    const anthropic = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const info = (await anthropic.models.retrieve(MODEL)) as unknown as { pricing: unknown };
    expect(info.pricing).toEqual(prices);
    // A model without cache prices lists none: its cache tokens cost the input price.
    const plain = (await openai.models.retrieve('outlaw-1-xploded')) as unknown as { pricing: unknown };
    expect(plain.pricing).toEqual({ input: 0.3, output: 1, currency: 'USD', unit: 'per 1M tokens' });
  });
});
