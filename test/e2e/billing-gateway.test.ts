// Billing through the whole gateway (issue 3 acceptance): real HTTP over loopback, the simulator as
// upstream, the Redis ledger. Caps and balance under a burst of concurrent requests, charges to the
// micro-dollar against the simulator's own token counts, a gateway killed mid-stream, the 402 bodies
// and their max_tokens hint, and the output limit sent upstream when the client gives none.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import type { TokenUsage } from '../../src/billing/ledger.js';
import { worstCase } from '../../src/reserve/worst-case.js';
import { buildSnapshot } from '../../src/catalog/build-snapshot.js';
import { readConfig } from '../../src/config.js';
import { startGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/telemetry/logger.js';
import type { CatalogModel } from '../../src/catalog/snapshot.js';
import { startSimulator, type SimulatedRequest } from '../../src/simulator/server.js';
import { countTokens } from '../../src/wire/token-count.js';
import { decodeChatRequest } from '../../src/decode/chat-request.js';
import { newRequestId } from '../../src/http/request-context.js';
import { chatCompletionPlan } from '../../src/http/routes/chat-completions.js';
import { EXAMPLE_MODELS, StaticCatalog, startHarness, type Harness, type HarnessOptions } from '../helpers/gateway-harness.js';
import { contentPieces, readUntilContent, until } from './e2e-support.js';
import { killGatewayProcesses, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.js';

const MODEL = 'outlaw-1-xploded';
const PROMPT = 'Tell me about the river stone.';

type Body = Record<string, unknown>;

function chatBody(extra: Body = {}): Body {
  return { model: MODEL, messages: [{ role: 'user', content: PROMPT }], ...extra };
}

function modelOf(h: Harness, id = MODEL): CatalogModel {
  const m = h.catalog.current().byId.get(id);
  if (m === undefined) throw new Error(`${id} missing from the example catalog`);
  return m;
}

/** The gateway's own worst case for this body: the real decoder, the upstream bodies it builds, the catalog entry. */
function worstOfModel(model: CatalogModel, body: Body): number {
  return worstCase(chatCompletionPlan(decodeChatRequest(structuredClone(body)), model, newRequestId()).footprint, model).amount;
}

function worstOf(h: Harness, body: Body): number {
  return worstOfModel(modelOf(h, body.model as string), body);
}

/** Independent check of the cost rule: ceil((in·p_in + out·p_out) / 1e6) µUSD, in BigInt. */
function expectedCost(h: Harness | CatalogModel, input: number, output: number, model = MODEL): number {
  const p = ('pricing' in h ? h : modelOf(h, model)).pricing;
  const scaled = BigInt(input) * BigInt(p.input) + BigInt(output) * BigInt(p.output);
  return Number((scaled + 999_999n) / 1_000_000n);
}

function post(h: Harness, body: Body, signal?: AbortSignal): Promise<Response> {
  return fetch(`${h.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

/** The usage record of one request, once settlement has written it. */
async function usageRecord(h: Harness, requestId: string) {
  return until(`usage record of ${requestId}`, async () => (await h.backend.ledger.listUsage(h.accountId)).find((r) => r.requestId === requestId), 5000);
}

// The gateway loads the o200k rank table on its first cut stream (seconds of synchronous work); the
// test, gateway and simulator share this process, so load it up front or the simulator's pacing timers
// would fire late, after the gateway already hung up, and count tokens nobody received.
beforeAll(async () => {
  await countTokens(['warm up']);
}, 30_000);

// Client cuts and deadlines are exact only while no token is on the wire when the gateway hangs up: an
// upstream keeps generating until it sees the disconnect (3-45 ms here, one shared event loop), and the
// gateway cannot count what it never received. So paced tests leave 150-200 ms between tokens.
const harnesses: Harness[] = [];
async function harness(opts: HarnessOptions): Promise<Harness> {
  const h = await startHarness({ ledger: 'redis', ...opts });
  harnesses.push(h);
  return h;
}
afterAll(async () => {
  await Promise.all(harnesses.map((h) => h.close()));
});

const START = 100_000_000;

describe('a burst of 500 concurrent requests at one limit that admits exactly N worst cases', () => {
  const N = 7;
  const RACERS = 500;
  const body = chatBody({ max_tokens: 2000 });

  const limits: Array<[string, (amount: number) => Pick<HarnessOptions, 'balanceMicros' | 'keyCaps'>, string]> = [
    ['lifetime cap', (a) => ({ keyCaps: { lifetimeCap: N * a + a - 1 } }), 'key_lifetime_cap_reached'],
    ['monthly cap', (a) => ({ keyCaps: { monthlyCap: N * a + a - 1 } }), 'key_monthly_cap_reached'],
    ['balance', (a) => ({ balanceMicros: N * a + a - 1 }), 'insufficient_balance'],
  ];

  it.each(limits)('%s', async (_name, limitFor, code) => {
    // The amount depends only on the body and the catalog, so a throwaway computation with the example prices fixes it.
    const probe = await harness({ ledger: 'memory' });
    const amount = worstOf(probe, body);
    const limit = N * amount + amount - 1;
    // A slow first token keeps every admitted hold in flight while the others race for the rest
    // (client, gateway and simulator share one event loop here, so the burst takes a few seconds).
    const h = await harness({ simulator: { firstTokenDelayMs: 8000 }, ...limitFor(amount) });
    const pool = new Pool(h.baseUrl, { connections: RACERS, pipelining: 1 });
    try {
      const payload = JSON.stringify(body);
      const fired = Promise.all(
        Array.from({ length: RACERS }, async () => {
          const res = await pool.request({
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
            body: payload,
          });
          return { at: Date.now(), status: res.statusCode, body: (await res.body.json()) as { error?: { code?: string; needed_micro_usd?: number } } };
        }),
      );
      // While the admitted ones are upstream, their holds add up to N worst cases: within the limit.
      await until('N requests upstream', () => (h.simulator.requests.length >= N ? true : undefined), 5000);
      const inFlight = await h.backend.ledger.keySpend(h.accountId, h.keyId);
      const held = (await h.backend.ledger.balance(h.accountId)).held;
      expect(held).toBe(N * amount);
      expect(Math.max(inFlight.lifetimeSpent + inFlight.lifetimeHeld, inFlight.monthSpent + inFlight.monthHeld)).toBeLessThanOrEqual(limit);

      const results = await fired;
      const ok = results.filter((r) => r.status === 200);
      const refused = results.filter((r) => r.status === 402);
      expect(ok).toHaveLength(N);
      expect(refused).toHaveLength(RACERS - N);
      for (const r of refused) expect(r.body.error).toMatchObject({ code, needed_micro_usd: amount, available_micro_usd: amount - 1 });
      // Every refusal came while all N holds were still in flight (no settlement freed room early).
      expect(Math.max(...refused.map((r) => r.at))).toBeLessThan(Math.min(...ok.map((r) => r.at)));
      expect(h.simulator.requests).toHaveLength(N);

      await h.settled();
      const spend = await h.backend.ledger.keySpend(h.accountId, h.keyId);
      const bal = await h.backend.ledger.balance(h.accountId);
      expect(bal.held).toBe(0);
      expect(spend.lifetimeHeld + spend.monthHeld).toBe(0);
      const charged = h.simulator.requests.reduce((s, r) => s + expectedCost(h, r.inputTokens, r.outputTokensSent), 0);
      expect(spend.lifetimeSpent).toBe(charged);
      expect(spend.monthSpent).toBe(charged);
      expect(charged).toBeLessThanOrEqual(limit);
      const audit = await h.backend.ledger.audit(h.accountId);
      expect(audit.difference).toBe(0);
      expect(audit.holdsOutstanding).toBe(0);
      expect(audit.usageTotal).toBe(charged);
    } finally {
      await pool.close();
    }
  }, 60_000);
});

describe('charges to the micro-dollar against the simulator', () => {
  const openai = (h: Harness) => new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });

  async function expectSettled(h: Harness, requestId: string, sim: SimulatedRequest, status: string, before: number): Promise<number> {
    const record = await usageRecord(h, requestId);
    const cost = expectedCost(h, sim.inputTokens, sim.outputTokensSent);
    expect(record.usage).toMatchObject<Partial<TokenUsage>>({ input: sim.inputTokens, output: sim.outputTokensSent });
    expect(record.cost).toBe(cost);
    expect(record.status).toBe(status);
    const bal = await h.backend.ledger.balance(h.accountId);
    expect(bal).toEqual({ balance: before - cost, held: 0 });
    expect((await h.backend.ledger.audit(h.accountId)).difference).toBe(0);
    return cost;
  }

  it('non-streaming, completed: the upstream-reported usage', async () => {
    const h = await harness({});
    const { data, response } = await openai(h).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 500 }).withResponse();
    const requestId = response.headers.get('x-request-id') as string;
    const sim = h.simulator.requests[0] as SimulatedRequest;
    expect(data.usage?.completion_tokens).toBe(sim.outputTokensSent);
    const cost = await expectSettled(h, requestId, sim, 'completed', START);
    expect(cost).toBeGreaterThan(0);
  });

  it('streaming, completed: the usage chunk the gateway asked for', async () => {
    const h = await harness({});
    const { data: stream, response } = await openai(h)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 500, stream: true })
      .withResponse();
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    const sim = h.simulator.requests[0] as SimulatedRequest;
    await expectSettled(h, response.headers.get('x-request-id') as string, sim, 'completed', START);
  });

  it('streaming, cut by the client mid-way: what the upstream sent, more than 0 and less than the hold', async () => {
    const h = await harness({ simulator: { tokenDelayMs: 20 } });
    // Held after the fifth token (one role chunk comes first), so none is on the wire when the client
    // hangs up: the upstream sent exactly what the gateway read.
    h.simulator.injectFault({ stallAfterChunks: 6, stallMs: 60_000 });
    const body = chatBody({ max_tokens: 500, stream: true, sim_reply_tokens: 200 });
    const reservation = worstOf(h, body);
    const abort = new AbortController();
    const res = await post(h, body, abort.signal);
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id') as string;
    await readUntilContent(res, 5);
    await until('the simulator to hold the stream', () => (h.simulator.requests[0]?.stalled === true ? true : undefined));
    abort.abort();
    const sim = await h.simulator.waitForRequest((r) => r.aborted);
    const cost = await expectSettled(h, requestId, sim, 'client_cancelled', START);
    expect(sim.outputTokensSent).toBe(5);
    expect(cost).toBeGreaterThan(0);
    expect(cost).toBeLessThan(reservation);
  });

  it('upstream failure before any token: charged nothing, the hold released', async () => {
    const h = await harness({});
    h.simulator.injectFault({ status: 500, times: 2 });
    const res = await post(h, chatBody({ max_tokens: 500 }));
    expect(res.status).toBeGreaterThanOrEqual(500);
    const requestId = res.headers.get('x-request-id') as string;
    const record = await usageRecord(h, requestId);
    expect(record).toMatchObject({ cost: 0, status: 'upstream_failed' });
    expect(await h.backend.ledger.balance(h.accountId)).toEqual({ balance: START, held: 0 });
    const spend = await h.backend.ledger.keySpend(h.accountId, h.keyId);
    expect(spend).toEqual({ lifetimeSpent: 0, lifetimeHeld: 0, monthSpent: 0, monthHeld: 0 });
    expect((await h.backend.ledger.audit(h.accountId)).difference).toBe(0);
  });

  it('upstream cut mid-stream: charged for what was generated', async () => {
    const h = await harness({});
    h.simulator.injectFault({ cutAfterChunks: 7 });
    const res = await post(h, chatBody({ max_tokens: 500, stream: true, sim_reply_tokens: 100 }));
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('"error"');
    const sim = h.simulator.requests[0] as SimulatedRequest;
    expect(sim.outputTokensSent).toBe(6); // the role chunk carries none
    const cost = await expectSettled(h, res.headers.get('x-request-id') as string, sim, 'upstream_failed', START);
    expect(cost).toBeGreaterThan(0);
  });
});

describe.each([
  ['openai', 'glm-5.3-xploded'],
  ['anthropic', MODEL],
  ['anthropic', 'glm-5.3-xploded'],
] as const)('charges with a %s upstream, model %s', (format, model) => {
  const body = (extra: Body): Body => ({ model, messages: [{ role: 'user', content: PROMPT }], max_tokens: 800, ...extra });

  async function expectCharged(h: Harness, res: Response, status: string): Promise<number> {
    const requestId = res.headers.get('x-request-id') as string;
    const record = await usageRecord(h, requestId);
    const sim = h.simulator.requests[0] as SimulatedRequest;
    const cost = expectedCost(h, sim.inputTokens, sim.outputTokensSent, model);
    expect(record.usage).toMatchObject({ input: sim.inputTokens, output: sim.outputTokensSent });
    expect(record).toMatchObject({ cost, status });
    expect(await h.backend.ledger.balance(h.accountId)).toEqual({ balance: START - cost, held: 0 });
    expect((await h.backend.ledger.audit(h.accountId)).difference).toBe(0);
    return cost;
  }

  it('non-streaming, completed', async () => {
    const h = await harness({ upstreamFormat: format });
    const res = await post(h, body({}));
    expect(res.status).toBe(200);
    await res.json();
    expect(await expectCharged(h, res, 'completed')).toBeGreaterThan(0);
  });

  it('streaming, completed', async () => {
    const h = await harness({ upstreamFormat: format });
    const res = await post(h, body({ stream: true }));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('[DONE]');
    expect(await expectCharged(h, res, 'completed')).toBeGreaterThan(0);
  });

  it('streaming, cut by the client', async () => {
    const h = await harness({ upstreamFormat: format, simulator: { tokenDelayMs: 150 } });
    const abort = new AbortController();
    const res = await post(h, body({ stream: true, sim_reply_tokens: 200 }), abort.signal);
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let seen = '';
    while ((seen.match(/content":"[^"]/g) ?? []).length < 5) {
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended before the client cut it');
      seen += new TextDecoder().decode(value);
    }
    abort.abort();
    await h.simulator.waitForRequest((r) => r.aborted);
    const cost = await expectCharged(h, res, 'client_cancelled');
    expect(cost).toBeGreaterThan(0);
    expect(cost).toBeLessThan(worstOf(h, body({ stream: true, sim_reply_tokens: 200 })));
  });

  it('upstream cut mid-stream', async () => {
    const h = await harness({ upstreamFormat: format });
    h.simulator.injectFault({ cutAfterChunks: 9 });
    const res = await post(h, body({ stream: true, sim_reply_tokens: 100 }));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"error"');
    expect(await expectCharged(h, res, 'upstream_failed')).toBeGreaterThan(0);
  });

  it('in-band upstream error mid-stream', async () => {
    const h = await harness({ upstreamFormat: format });
    h.simulator.injectFault({ errorEventAfterChunks: 9 });
    const res = await post(h, body({ stream: true, sim_reply_tokens: 100 }));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"error"');
    expect(await expectCharged(h, res, 'upstream_failed')).toBeGreaterThan(0);
  });

  it("the gateway's own request deadline mid-stream", async () => {
    // The deadline falls midway between two paced tokens (every 200 ms), so no token is on the wire when it fires.
    const h = await harness({ upstreamFormat: format, simulator: { tokenDelayMs: 200 }, config: { requestTimeoutMs: 1100 } });
    const res = await post(h, body({ stream: true, sim_reply_tokens: 200 }));
    expect(res.status).toBe(200);
    await res.text();
    await h.simulator.waitForRequest((r) => r.aborted);
    // Recorded as what ended it: the deadline, not the upstream.
    const cost = await expectCharged(h, res, 'timed_out');
    expect(cost).toBeGreaterThan(0);
  });

  it('non-streaming upstream dropped before replying: charged nothing', async () => {
    const h = await harness({ upstreamFormat: format });
    h.simulator.injectFault({ cutAfterChunks: 0, times: 3 });
    const res = await post(h, body({}));
    expect(res.status).toBeGreaterThanOrEqual(500);
    const record = await usageRecord(h, res.headers.get('x-request-id') as string);
    expect(record).toMatchObject({ cost: 0, status: 'upstream_failed' });
    expect(await h.backend.ledger.balance(h.accountId)).toEqual({ balance: START, held: 0 });
  });
});

describe('charges through the Anthropic Messages endpoint and for tool calls', () => {
  it('Anthropic client, both upstream formats: streamed and cut by the upstream, to the micro-dollar', async () => {
    for (const format of ['openai', 'anthropic'] as const) {
      const h = await harness({ upstreamFormat: format });
      const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
      const { data: message, response } = await client.messages.create({ model: MODEL, max_tokens: 300, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
      const first = h.simulator.requests[0] as SimulatedRequest;
      expect(message.usage.output_tokens).toBe(first.outputTokensSent);
      const rec1 = await usageRecord(h, response.headers.get('x-request-id') as string);
      expect(rec1).toMatchObject({ cost: expectedCost(h, first.inputTokens, first.outputTokensSent), status: 'completed' });

      h.simulator.injectFault({ cutAfterChunks: 9 });
      const res = await fetch(`${h.baseUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': h.key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, max_tokens: 300, stream: true, messages: [{ role: 'user', content: PROMPT }], sim_reply_tokens: 100 }),
      });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('event: error');
      const second = h.simulator.requests[1] as SimulatedRequest;
      expect(second.outputTokensSent).toBeGreaterThan(0);
      const rec2 = await usageRecord(h, res.headers.get('x-request-id') as string);
      expect(rec2).toMatchObject({ cost: expectedCost(h, second.inputTokens, second.outputTokensSent), status: 'upstream_failed' });
      expect(await h.backend.ledger.balance(h.accountId)).toEqual({ balance: START - rec1.cost - rec2.cost, held: 0 });
      expect((await h.backend.ledger.audit(h.accountId)).difference).toBe(0);
    }
  });

  it('a tool call cut mid-arguments is charged for the name and the argument tokens sent', async () => {
    for (const format of ['openai', 'anthropic'] as const) {
      const h = await harness({ upstreamFormat: format });
      h.simulator.injectFault({ cutAfterChunks: format === 'openai' ? 5 : 6 });
      const tools = [{ type: 'function', function: { name: 'lookup_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city', 'days'] } } }];
      const res = await post(h, chatBody({ max_tokens: 300, stream: true, tools, tool_choice: { type: 'function', function: { name: 'lookup_weather' } } }));
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('lookup_weather');
      const sim = h.simulator.requests[0] as SimulatedRequest;
      expect(sim.outputTokensSent).toBeGreaterThan(2);
      const record = await usageRecord(h, res.headers.get('x-request-id') as string);
      expect(record.usage).toMatchObject({ input: sim.inputTokens, output: sim.outputTokensSent });
      expect(record).toMatchObject({ cost: expectedCost(h, sim.inputTokens, sim.outputTokensSent), status: 'upstream_failed' });
    }
  });

  it('a 402 on /v1/messages is in the Anthropic error shape, with the hint', async () => {
    const h = await harness({ keyCaps: { monthlyCap: 4000 } });
    const res = await fetch(`${h.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': h.key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 40_000, messages: [{ role: 'user', content: PROMPT }] }),
    });
    expect(res.status).toBe(402);
    const body = (await res.json()) as { type: string; error: { type: string; code: string; available_micro_usd: number; max_tokens_hint?: number } };
    expect(body).toMatchObject({ type: 'error', error: { type: 'billing_error', code: 'key_monthly_cap_reached', available_micro_usd: 4000 } });
    expect(body.error.max_tokens_hint).toBeGreaterThan(0);
  });
});

describe('a mixed burst of streams: completed, cut by clients, cut by the upstream', () => {
  it('each request is charged what its upstream sent, and the books balance', async () => {
    const h = await harness({ simulator: { tokenDelayMs: 150 } });
    const COUNT = 60;
    h.simulator.injectFault({ cutAfterChunks: 8, times: COUNT / 3 });
    const body = JSON.stringify(chatBody({ max_tokens: 400, stream: true, sim_reply_tokens: 24 }));
    const outcomes = await Promise.all(
      Array.from({ length: COUNT }, async (_, i) => {
        const abort = new AbortController();
        const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
          body,
          signal: abort.signal,
        });
        const requestId = res.headers.get('x-request-id') as string;
        const reader = (res.body as ReadableStream<Uint8Array>).getReader();
        // Clients cut late enough that every stream has started (the burst's start-up is the busiest moment).
        const cutAt = i % 3 === 0 ? 10 + (i % 7) : Number.POSITIVE_INFINITY;
        let seen = '';
        for (;;) {
          if (contentPieces('openai', seen) >= cutAt) {
            abort.abort();
            return { requestId, cut: true };
          }
          const { value, done } = await reader.read();
          if (done) return { requestId, cut: false };
          seen += new TextDecoder().decode(value);
        }
      }),
    );
    const records = await until('every usage record', async () => {
      const all = await h.backend.ledger.listUsage(h.accountId, { limit: 1000 });
      return all.length === COUNT ? all : undefined;
    }, 5000);
    const simOf = (requestId: string) => h.simulator.requests.find((r) => r.headers['x-request-id'] === requestId);
    // The upstream's side of a client cut is recorded once its connection closes.
    await until('upstreams of client cuts closed', () =>
      records.every((r) => r.status !== 'client_cancelled' || simOf(r.requestId)?.aborted === true || simOf(r.requestId)?.finished === true) ? true : undefined,
      5000,
    );
    expect(outcomes.filter((o) => o.cut).length).toBeGreaterThan(0);
    let total = 0;
    for (const record of records) {
      const sim = simOf(record.requestId);
      expect(sim, `upstream request of ${record.requestId}`).toBeDefined();
      const s = sim as SimulatedRequest;
      expect(record.usage, record.status).toMatchObject({ input: s.inputTokens, output: s.outputTokensSent });
      expect(record.cost).toBe(expectedCost(h, s.inputTokens, s.outputTokensSent));
      total += record.cost;
    }
    expect(new Set(records.map((r) => r.status))).toEqual(new Set(['completed', 'client_cancelled', 'upstream_failed']));
    expect(await h.backend.ledger.balance(h.accountId)).toEqual({ balance: START - total, held: 0 });
    expect(await h.backend.ledger.audit(h.accountId)).toMatchObject({ difference: 0, holdsOutstanding: 0, usageTotal: total });
  });
});

interface RefusalBody {
  error: { message: string; type: string; param: null; code: string; needed_micro_usd: number; available_micro_usd: number; needed_usd: string; available_usd: string; max_tokens_hint?: number };
}

describe('402 refusals name the limit, the amounts and the largest affordable max_tokens', () => {
  const cases: Array<[string, (limit: number) => Pick<HarnessOptions, 'balanceMicros' | 'keyCaps'>]> = [
    ['insufficient_balance', (l) => ({ balanceMicros: l })],
    ['key_lifetime_cap_reached', (l) => ({ keyCaps: { lifetimeCap: l } })],
    ['key_monthly_cap_reached', (l) => ({ keyCaps: { monthlyCap: l } })],
  ];

  it.each(cases)('%s: the hint is admitted, one more token is refused', async (code, limitFor) => {
    const LIMIT = 5000; // µUSD: about 5,000 output tokens of this model
    const h = await harness(limitFor(LIMIT));
    const res = await post(h, chatBody({ max_tokens: 50_000 }));
    expect(res.status).toBe(402);
    const body = (await res.json()) as RefusalBody;
    expect(body.error).toMatchObject({ type: 'billing_error', param: null, code, needed_micro_usd: worstOf(h, chatBody({ max_tokens: 50_000 })), available_micro_usd: LIMIT });
    expect(body.error.needed_usd).toMatch(/^\d+\.\d{6}$/);
    expect(body.error.message.length).toBeGreaterThan(20);
    const hint = body.error.max_tokens_hint;
    expect(hint).toBeTypeOf('number');
    const tokens = hint as number;
    // The hint is the largest limit whose worst case fits, by the gateway's own bound.
    expect(worstOf(h, chatBody({ max_tokens: tokens }))).toBeLessThanOrEqual(LIMIT);
    expect(worstOf(h, chatBody({ max_tokens: tokens + 1 }))).toBeGreaterThan(LIMIT);

    const over = await post(h, chatBody({ max_tokens: tokens + 1 }));
    expect(over.status).toBe(402);
    expect(((await over.json()) as RefusalBody).error.code).toBe(code);
    const fits = await post(h, chatBody({ max_tokens: tokens }));
    expect(fits.status).toBe(200);
    await fits.json();
  });

  it.each([
    ['key_monthly_cap_reached', { lifetimeCap: 6000, monthlyCap: 5000 }],
    ['key_lifetime_cap_reached', { lifetimeCap: 5000, monthlyCap: 6000 }],
  ] as const)('both caps: the tighter one is named (%s), and the hint fits it', async (code, keyCaps) => {
    const h = await harness({ keyCaps });
    const res = await post(h, chatBody({ max_tokens: 50_000 }));
    expect(res.status).toBe(402);
    const body = (await res.json()) as RefusalBody;
    expect(body.error).toMatchObject({ code, available_micro_usd: 5000 });
    const hint = body.error.max_tokens_hint as number;
    expect(worstOf(h, chatBody({ max_tokens: hint }))).toBeLessThanOrEqual(5000);
    expect(worstOf(h, chatBody({ max_tokens: hint + 1 }))).toBeGreaterThan(5000);
    const over = await post(h, chatBody({ max_tokens: hint + 1 }));
    expect(over.status).toBe(402);
    expect(((await over.json()) as RefusalBody).error).toMatchObject({ code, available_micro_usd: 5000 });
    const fits = await post(h, chatBody({ max_tokens: hint }));
    expect(fits.status).toBe(200);
    await fits.json();
  });

  it('no hint when not even the prompt fits', async () => {
    const h = await harness({ balanceMicros: 3 });
    const res = await post(h, chatBody({ max_tokens: 10 }));
    expect(res.status).toBe(402);
    const body = (await res.json()) as RefusalBody;
    expect(body.error).toMatchObject({ code: 'insufficient_balance', available_micro_usd: 3 });
    expect(body.error.max_tokens_hint).toBeUndefined();
  });

  it('a refusal without max_tokens says the default output limit was reserved', async () => {
    const h = await harness({ keyCaps: { lifetimeCap: 1000 } });
    const res = await post(h, chatBody());
    expect(res.status).toBe(402);
    const body = (await res.json()) as RefusalBody;
    expect(body.error.code).toBe('key_lifetime_cap_reached');
    expect(body.error.needed_micro_usd).toBe(worstOf(h, chatBody()));
    expect(body.error.message).toContain(String(modelOf(h).defaultMaxOutputTokens));
    expect(body.error.max_tokens_hint).toBeGreaterThan(0);
  });
});

describe('a request without max_tokens', () => {
  it('reaches the upstream with the default output limit the reservation covered', async () => {
    const h = await harness({});
    for (const stream of [false, true]) {
      const res = await post(h, chatBody({ stream }));
      expect(res.status).toBe(200);
      await res.text();
    }
    const bodies = h.simulator.requests.map((r) => r.body as Body);
    expect(bodies).toHaveLength(2);
    for (const b of bodies) expect(b.max_tokens).toBe(modelOf(h).defaultMaxOutputTokens);
  });

  it('keeps the client limit when it gave one (max_completion_tokens)', async () => {
    const h = await harness({});
    const res = await post(h, chatBody({ max_completion_tokens: 77 }));
    expect(res.status).toBe(200);
    await res.json();
    const b = h.simulator.requests[0]?.body as Body;
    expect(b.max_completion_tokens).toBe(77);
    expect(b.max_tokens).toBeUndefined();
  });

  it('sends only max_completion_tokens when the client sent a larger max_tokens too: the limit reserved for', async () => {
    const h = await harness({});
    const body = chatBody({ max_completion_tokens: 77, max_tokens: 4000 });
    const res = await post(h, body);
    expect(res.status).toBe(200);
    await res.json();
    const b = h.simulator.requests[0]?.body as Body;
    expect(b.max_completion_tokens).toBe(77);
    expect(b.max_tokens).toBeUndefined();
    expect(worstOf(h, body)).toBe(worstOf(h, chatBody({ max_completion_tokens: 77 })));
  });
});

describe('a gateway killed mid-stream', () => {
  const REQUEST_TIMEOUT_MS = 3000;
  const HOLD_MARGIN_MS = 1000;
  let gateway: GatewayProcess | undefined;
  afterAll(() => killGatewayProcesses());

  it('its hold is reaped after the deadline; a late settlement charges once, a second is a no-op', async () => {
    const redis = new Redis(inject('redisUrl'));
    const namespace = `e2e-kill-${randomBytes(4).toString('hex')}`;
    const backend = createRedisBackend({ redis, namespace });
    const simulator = await startSimulator({ tokenDelayMs: 50 });
    try {
      const account = await backend.accounts.createAccount('kill');
      await backend.ledger.credit(account.id, START, 'start');
      const { record: key, secret } = await backend.accounts.createKey(account.id, { name: 'kill', lifetimeCap: 10_000_000 });

      gateway = await startGatewayProcess({
        REDIS_URL: inject('redisUrl'),
        TOLLGATE_TEST_NAMESPACE: namespace,
        TOLLGATE_SIMULATOR_URL: simulator.url,
        TOLLGATE_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        TOLLGATE_HOLD_MARGIN_MS: String(HOLD_MARGIN_MS),
      });
      const url = gateway.url;

      const body = { model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 1000, stream: true, sim_reply_tokens: 500 };
      const model = buildSnapshot([{ source: 'test', spec: { models: EXAMPLE_MODELS } }], 1).byId.get(MODEL) as CatalogModel;
      const sentAt = Date.now();
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status, res.status === 200 ? '' : await res.text()).toBe(200);
      const requestId = res.headers.get('x-request-id') as string;
      expect(requestId).toBeTruthy();
      const reader = await readUntilContent(res, 3);
      await gateway.kill();
      await reader.read().catch(() => undefined);

      // The hold outlives its gateway until its deadline: nothing returns it early.
      const amount = (await backend.ledger.balance(account.id)).held;
      expect(amount).toBe(worstOfModel(model, body));
      expect((await backend.ledger.keySpend(account.id, key.id)).lifetimeHeld).toBe(amount);
      expect(await backend.ledger.reapExpired(), `reaped ${Date.now() - sentAt} ms after the request`).toBe(0);

      // A surviving gateway's reaper (every 100 ms) returns all of it, and not before the deadline.
      const survivor = await startGateway({
        config: { ...readConfig({}), port: 0, metricsPort: 0, reaperIntervalMs: 100 },
        catalog: new StaticCatalog({ models: EXAMPLE_MODELS }),
        backend,
        secrets: { resolve: () => undefined },
        serveMetrics: false,
        logger: createLogger({ destination: { write: () => undefined } }),
      });
      try {
        const deadline = sentAt + REQUEST_TIMEOUT_MS + HOLD_MARGIN_MS;
        await new Promise((r) => setTimeout(r, Math.max(0, deadline - 300 - Date.now())));
        expect((await backend.ledger.balance(account.id)).held).toBe(amount);
        await until('the hold reaped', async () => ((await backend.ledger.balance(account.id)).held === 0 ? true : undefined), 5000);
        expect(Date.now()).toBeGreaterThanOrEqual(deadline);
      } finally {
        await survivor.close();
      }
      expect(await backend.ledger.balance(account.id)).toEqual({ balance: START, held: 0 });
      expect(await backend.ledger.keySpend(account.id, key.id)).toMatchObject({ lifetimeSpent: 0, lifetimeHeld: 0 });

      // The settlement the dead gateway never made arrives late: charged once, and only once.
      const sim = simulator.requests[0] as SimulatedRequest;
      const usage = { input: sim.inputTokens, output: sim.outputTokensSent, cachedInput: 0, reasoning: 0 };
      const cost = expectedCost(model, usage.input, usage.output);
      const settlement = { requestId, accountId: account.id, keyId: key.id, model: MODEL, usage, cost, status: 'client_cancelled' as const, latencyMs: 1 };
      expect(await backend.ledger.settle(settlement)).toMatchObject({ charged: cost, released: 0, duplicate: false, late: true });
      expect(await backend.ledger.settle(settlement)).toMatchObject({ charged: 0, duplicate: true });
      expect(await backend.ledger.balance(account.id)).toEqual({ balance: START - cost, held: 0 });
      expect(await backend.ledger.keySpend(account.id, key.id)).toMatchObject({ lifetimeSpent: cost, lifetimeHeld: 0 });
      const records = await backend.ledger.listUsage(account.id);
      expect(records.filter((r) => r.requestId === requestId)).toHaveLength(1);
      const audit = await backend.ledger.audit(account.id);
      expect(audit).toMatchObject({ difference: 0, holdsOutstanding: 0, usageTotal: cost });
    } finally {
      await gateway?.kill();
      await simulator.close();
      await backend.ledger.close();
      await backend.accounts.close();
      await redis.quit();
    }
  });
});
