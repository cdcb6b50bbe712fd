// Cache-aware prices through every translation pair (issue #32, item 1): each client format (chat
// completions, messages, Responses) against each upstream format (OpenAI, Anthropic, Gemini), whole and
// streamed, over loopback HTTP to the simulator, whose cache report (reads, 5-minute and 1-hour writes)
// is random per run, as are the catalog's prices (each cache price present or not). For every run:
//  - the usage the client sees, read back in its own format's convention, has exactly the upstream's
//    classes: the same prompt total (so no token is counted twice, whichever format includes cache tokens
//    in its input count), reads and writes of each lifetime apart;
//  - the usage record has the same classes, and its cost is Σ class × price to the micro-dollar, each
//    absent cache price being the input price (a reference computed here, in BigInt).
// Gemini has no cache-write class (its upstream reports reads only), so its writes are always 0.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelSpec } from '../../src/catalog/types.js';
import { mergeAnthropicUsage, usageFromAnthropicCounters, type AnthropicUsageCounters } from '../../src/formats/anthropic-messages/usage.js';
import { usageFromOpenAI } from '../../src/formats/openai-chat/usage.js';
import { usageFromResponses } from '../../src/formats/openai-responses/usage.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import type { CacheReport } from '../../src/simulator/server.js';
import type { NormalizedUsage } from '../../src/representation/index.js';
import { EXAMPLE_MODELS, startHarness, upstreamFor, type Harness } from '../helpers/gateway-harness.js';

const MODEL = 'outlaw-1-xploded';
const BASE = EXAMPLE_MODELS.find((m) => m.id === MODEL) as ModelSpec;

type Client = 'chat' | 'messages' | 'responses';
const CLIENTS: readonly Client[] = ['chat', 'messages', 'responses'];
const UPSTREAMS: readonly UpstreamFormatName[] = ['openai', 'anthropic', 'gemini'];

/** Prices in micro-USD per 1M tokens; each cache price absent or set. */
interface Prices {
  input: number;
  output: number;
  cacheRead: number | undefined;
  cacheWrite5m: number | undefined;
  cacheWrite1h: number | undefined;
}

/** Micros per 1M tokens as the catalog's decimal text (at most 6 decimals). */
const decimal = (micros: number): string => {
  const frac = String(micros % 1_000_000).padStart(6, '0').replace(/0+$/, '');
  return `${Math.floor(micros / 1_000_000)}${frac === '' ? '' : `.${frac}`}`;
};

const price = fc.integer({ min: 0, max: 40_000_000 });
const optionalPrice = fc.option(price, { nil: undefined });
const prices: fc.Arbitrary<Prices> = fc.record({ input: price, output: price, cacheRead: optionalPrice, cacheWrite5m: optionalPrice, cacheWrite1h: optionalPrice });
/** The share of the prompt reported as read, then of the rest as 5-minute writes, then of the rest as 1-hour writes, in 1/1000. */
const split = fc.record({ read: fc.integer({ min: 0, max: 1000 }), write5m: fc.integer({ min: 0, max: 1000 }), write1h: fc.integer({ min: 0, max: 1000 }) });
const promptWords = fc.integer({ min: 1, max: 120 });

/** Σ class × price, rounded up once to the micro-USD: the issue's formula, apart from the gateway's code. */
function expectedCost(u: { input: number; read: number; write5m: number; write1h: number; output: number }, p: Prices): number {
  const uncached = u.input - u.read - u.write5m - u.write1h;
  const scaled =
    BigInt(uncached) * BigInt(p.input) +
    BigInt(u.read) * BigInt(p.cacheRead ?? p.input) +
    BigInt(u.write5m) * BigInt(p.cacheWrite5m ?? p.input) +
    BigInt(u.write1h) * BigInt(p.cacheWrite1h ?? p.input) +
    BigInt(u.output) * BigInt(p.output);
  return Number((scaled + 999_999n) / 1_000_000n);
}

function sseEvents(text: string): EventSourceMessage[] {
  const events: EventSourceMessage[] = [];
  createParser({ onEvent: (e) => events.push(e) }).feed(text);
  return events;
}

/** One completion in the client's wire format; returns the request id and the usage it saw, read in that format's convention. */
async function complete(h: Harness, client: Client, stream: boolean, prompt: string): Promise<{ requestId: string; seen: NormalizedUsage }> {
  const request: Record<Client, { path: string; headers: Record<string, string>; body: Record<string, unknown> }> = {
    chat: {
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${h.key}` },
      body: { model: MODEL, messages: [{ role: 'user', content: prompt }], stream, ...(stream ? { stream_options: { include_usage: true } } : {}) },
    },
    messages: {
      path: '/v1/messages',
      headers: { 'x-api-key': h.key, 'anthropic-version': '2023-06-01' },
      body: { model: MODEL, max_tokens: 256, messages: [{ role: 'user', content: prompt }], stream },
    },
    responses: { path: '/v1/responses', headers: { authorization: `Bearer ${h.key}` }, body: { model: MODEL, input: prompt, stream } },
  };
  const r = request[client];
  const res = await fetch(`${h.baseUrl}${r.path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...r.headers }, body: JSON.stringify(r.body) });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const requestId = res.headers.get('x-request-id') ?? '';
  if (!stream) {
    const usage = (JSON.parse(text) as { usage: unknown }).usage;
    const seen = client === 'chat' ? usageFromOpenAI(usage) : client === 'messages' ? usageFromAnthropic(usage) : usageFromResponses(usage);
    return { requestId, seen };
  }
  const events = sseEvents(text);
  const data = events.filter((e) => e.data !== '[DONE]').map((e) => JSON.parse(e.data) as Record<string, unknown>);
  if (client === 'chat') {
    const withUsage = data.filter((d) => d.usage !== null && d.usage !== undefined);
    expect(withUsage).toHaveLength(1);
    return { requestId, seen: usageFromOpenAI(withUsage[0]?.usage) };
  }
  if (client === 'messages') {
    // Anthropic's stream usage is cumulative: message_start, then message_delta's counters over it.
    const counters: AnthropicUsageCounters = {};
    for (const d of data) {
      if (d.type === 'message_start') mergeAnthropicUsage(counters, (d.message as { usage: unknown }).usage);
      if (d.type === 'message_delta') mergeAnthropicUsage(counters, d.usage);
    }
    return { requestId, seen: usageFromAnthropicCounters(counters) };
  }
  const completed = data.find((d) => d.type === 'response.completed') as { response: { usage: unknown } } | undefined;
  return { requestId, seen: usageFromResponses(completed?.response.usage) };
}

function usageFromAnthropic(u: unknown): NormalizedUsage {
  const c: AnthropicUsageCounters = {};
  mergeAnthropicUsage(c, u);
  return usageFromAnthropicCounters(c);
}

describe.each(UPSTREAMS)('cache prices through every client format, %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  let share = { read: 0, write5m: 0, write1h: 0 };

  beforeAll(async () => {
    h = await startHarness({
      upstreamFormat,
      simulator: {
        // The run's split of whatever prompt arrives: reads first, then 5-minute writes, then 1-hour writes.
        cacheReport: ({ inputTokens }): CacheReport => {
          const read = Math.floor((inputTokens * share.read) / 1000);
          const write5m = Math.floor(((inputTokens - read) * share.write5m) / 1000);
          const write1h = Math.floor(((inputTokens - read - write5m) * share.write1h) / 1000);
          return { read, write5m, write1h };
        },
      },
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  for (const client of CLIENTS) {
    for (const stream of [false, true]) {
      it(`${client} client, ${stream ? 'streamed' : 'whole'}: the client sees each class once and is charged Σ class × price`, async () => {
        await fc.assert(
          fc.asyncProperty(prices, split, promptWords, async (p, s, words) => {
            h.catalog.swap({
              models: [
                {
                  ...BASE,
                  pricing: {
                    input: decimal(p.input),
                    output: decimal(p.output),
                    ...(p.cacheRead === undefined ? {} : { cacheRead: decimal(p.cacheRead) }),
                    ...(p.cacheWrite5m === undefined ? {} : { cacheWrite5m: decimal(p.cacheWrite5m) }),
                    ...(p.cacheWrite1h === undefined ? {} : { cacheWrite1h: decimal(p.cacheWrite1h) }),
                  },
                  upstreams: [upstreamFor(upstreamFormat, h.simulator, `sim-${MODEL}`)],
                },
              ],
            });
            share = s;
            const prompt = Array.from({ length: words }, (_, i) => `word${i}`).join(' ');
            const { requestId, seen } = await complete(h, client, stream, prompt);
            const up = h.simulator.requests.at(-1)!;
            const upstream = {
              input: up.inputTokens,
              read: up.cachedInputTokens,
              write5m: up.cacheWrite5mTokens,
              write1h: up.cacheWrite1hTokens,
              output: up.outputTokensSent,
            };
            if (upstreamFormat === 'gemini') expect(upstream.write5m + upstream.write1h).toBe(0);
            // What the client sees, in its own convention: the upstream's classes, each once.
            expect({ input: seen.input, read: seen.cacheRead, write5m: seen.cacheWrite5m, write1h: seen.cacheWrite1h, output: seen.output }).toEqual(upstream);
            await h.settled();
            const records = await h.backend.ledger.listUsage(h.accountId, { limit: 5 });
            const rec = records.find((r) => r.requestId === requestId);
            expect(rec, `usage record of ${requestId}`).toBeDefined();
            const u = rec!.usage;
            expect({ input: u.input, read: u.cachedInput, write5m: u.cacheWrite5m ?? 0, write1h: u.cacheWrite1h ?? 0, output: u.output }).toEqual(upstream);
            expect(rec!.cost).toBe(expectedCost(upstream, p));
          }),
          { numRuns: 8 },
        );
      });
    }
  }
});
