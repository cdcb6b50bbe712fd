// Prometheus metrics through a real gateway (issue 5 acceptance): scripted traffic over loopback with
// the official clients, the simulator as upstream (both formats) and the Redis ledger, then GET /metrics
// on the gateway's metrics port, parsed from the text exposition. Every scenario asserts the complete
// set of counter and histogram-count changes (scrape after minus scrape before): the expected ones to
// the unit, and that nothing else moved. Tokens are the simulator's own counts; cost is the ledger's
// charge as recorded.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { UsageRecord } from '../../src/billing/ledger.js';
import { worstCase } from '../../src/reserve/worst-case.js';
import type { SimulatedRequest } from '../../src/simulator/server.js';
import type { ClientFormatName } from '../../src/formats/index.js';
import { decodeChatRequest } from '../../src/decode/chat-request.js';
import { countTokens } from '../../src/wire/token-count.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { readUntilContent, simulatorCost, until } from './e2e-support.js';
import { newRequestId } from '../../src/http/request-context.js';
import { chatCompletionPlan } from '../../src/http/routes/chat-completions.js';

const MODEL = 'outlaw-1-xploded';
const REASONING_MODEL = 'glm-5.3-xploded';
const PROMPT = 'Tell me about the river stone.';
const ROUTES: Record<ClientFormatName, string> = { openai: '/v1/chat/completions', anthropic: '/v1/messages' };

// ---------------------------------------------------------------------------------------------
// The Prometheus text exposition format, parsed (only what the gateway emits: no timestamps needed,
// but tolerated; label values with \\, \" and \n escapes).

interface Exposition {
  /** `name{label="value",...}` with labels sorted by name -> value. */
  samples: Map<string, number>;
  /** Metric family name -> type (counter, gauge, histogram, ...). */
  types: Map<string, string>;
}

function seriesKey(name: string, labels: Readonly<Record<string, string>>): string {
  const parts = Object.keys(labels)
    .sort()
    .map((k) => `${k}=${JSON.stringify(labels[k])}`);
  return parts.length === 0 ? name : `${name}{${parts.join(',')}}`;
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0 || text[eq + 1] !== '"') throw new Error(`bad label set: {${text}}`);
    const name = text.slice(i, eq).trim();
    let value = '';
    let j = eq + 2;
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === '\\') {
        const next = text[++j];
        value += next === 'n' ? '\n' : (next ?? '');
      } else value += text[j];
    }
    if (j >= text.length) throw new Error(`unterminated label value: {${text}}`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i++;
  }
  return labels;
}

function parseExposition(body: string): Exposition {
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  for (const line of body.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (m) types.set(m[1]!, m[2]!);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (!m) throw new Error(`unparsable exposition line: ${line}`);
    const value = m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : Number(m[3]);
    samples.set(seriesKey(m[1]!, m[2] ? parseLabels(m[2]) : {}), value);
  }
  return { samples, types };
}

async function scrape(h: Harness): Promise<Exposition> {
  const port = h.gateway.metricsServer?.port;
  if (port === undefined) throw new Error('the gateway serves no /metrics');
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** Series that only ever count: counters and the `_count` of histograms. */
function countingSeries(e: Exposition, key: string): boolean {
  const name = key.replace(/\{.*$/, '');
  if (e.types.get(name) === 'counter') return true;
  return name.endsWith('_count') && e.types.get(name.slice(0, -'_count'.length)) === 'histogram';
}

/** Every counting series that changed between the scrapes, with its change. */
function deltas(before: Exposition, after: Exposition): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of after.samples) {
    if (!countingSeries(after, key)) continue;
    const d = value - (before.samples.get(key) ?? 0);
    if (d !== 0) out[key] = d;
  }
  return out;
}

function gauge(e: Exposition, name: string): number {
  const v = e.samples.get(name);
  if (v === undefined) throw new Error(`no series ${name}`);
  return v;
}

/** The expected changes, as `deltas` reports them (zero entries dropped). */
function expected(entries: Array<[string, Record<string, string>, number]>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, labels, v] of entries) {
    const key = seriesKey(`tollgate_${name}`, labels);
    out[key] = (out[key] ?? 0) + v;
    if (out[key] === 0) delete out[key];
  }
  return out;
}

/**
 * Scrapes until the request is fully accounted: its requests_total sample (recorded last, after
 * settlement) has moved. Returns that scrape.
 */
async function scrapeWhenFinished(h: Harness, before: Exposition, format: ClientFormatName, status: string, model = MODEL): Promise<Exposition> {
  const key = seriesKey('tollgate_requests_total', { format, model, route: ROUTES[format], status });
  return until(`${key} to move`, async () => {
    const now = await scrape(h);
    return (now.samples.get(key) ?? 0) > (before.samples.get(key) ?? 0) ? now : undefined;
  });
}

async function usageRecord(h: Harness, requestId: string): Promise<UsageRecord> {
  return until(`usage record of ${requestId}`, async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 1000 })).find((r) => r.requestId === requestId));
}

/** The gateway's request log line of one request, parsed. */
function requestLogLine(h: Harness, requestId: string): Record<string, unknown> {
  const lines = h.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request' && l.requestId === requestId);
  expect(lines, `request log lines of ${requestId}`).toHaveLength(1);
  return lines[0]!;
}

function simRequest(h: Harness, requestId: string): SimulatedRequest {
  const all = h.simulator.requests.filter((r) => r.headers['x-request-id'] === requestId);
  expect(all, `upstream calls of ${requestId}`).toHaveLength(1);
  return all[0]!;
}

// ---------------------------------------------------------------------------------------------

type Body = Record<string, unknown>;

function body(extra: Body = {}, model = MODEL): Body {
  return { model, max_tokens: 300, messages: [{ role: 'user', content: PROMPT }], ...extra };
}

interface Sent {
  status: number;
  requestId: string;
}

/** A whole request through the official client of the format; the stream read to its end. */
async function viaSdk(h: Harness, format: ClientFormatName, b: Body, key = h.key): Promise<Sent> {
  try {
    if (format === 'openai') {
      const client = new OpenAI({ apiKey: key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
      const params = b as unknown as OpenAI.Chat.ChatCompletionCreateParams;
      if (b.stream === true) {
        const { data, response } = await client.chat.completions.create({ ...params, stream: true }).withResponse();
        let text = '';
        for await (const chunk of data) text += chunk.choices[0]?.delta.content ?? '';
        expect(text.length).toBeGreaterThan(0);
        return { status: response.status, requestId: response.headers.get('x-request-id') ?? '' };
      }
      const { data, response } = await client.chat.completions.create({ ...params, stream: false }).withResponse();
      expect(data.choices[0]?.message.content?.length).toBeGreaterThan(0);
      return { status: response.status, requestId: response.headers.get('x-request-id') ?? '' };
    }
    const client = new Anthropic({ apiKey: key, baseURL: h.baseUrl, maxRetries: 0 });
    const params = b as unknown as Anthropic.MessageCreateParams;
    if (b.stream === true) {
      const { data, response } = await client.messages.create({ ...params, stream: true }).withResponse();
      let text = '';
      for await (const e of data) if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      expect(text.length).toBeGreaterThan(0);
      return { status: response.status, requestId: response.headers.get('x-request-id') ?? '' };
    }
    const { data, response } = await client.messages.create({ ...params, stream: false }).withResponse();
    expect(data.content.length).toBeGreaterThan(0);
    return { status: response.status, requestId: response.headers.get('x-request-id') ?? '' };
  } catch (err) {
    // Both SDKs raise an APIError carrying the status and the response headers.
    const e = err as { status?: number; headers?: Headers | Record<string, string> };
    if (typeof e.status !== 'number') throw err;
    const headers = e.headers;
    const requestId = headers instanceof Headers ? headers.get('x-request-id') : headers?.['x-request-id'];
    return { status: e.status, requestId: requestId ?? '' };
  }
}

function rawPost(h: Harness, format: ClientFormatName, b: Body, signal?: AbortSignal): Promise<Response> {
  const auth: Record<string, string> = format === 'openai' ? { authorization: `Bearer ${h.key}` } : { 'x-api-key': h.key, 'anthropic-version': '2023-06-01' };
  return fetch(`${h.baseUrl}${ROUTES[format]}`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(b),
    ...(signal ? { signal } : {}),
  });
}

/** Text pieces relayed so far, in either format's stream. */
/** What one completed (or cut) upstream call adds, besides its request line and upstream errors. */
function meteredCall(model: string, sim: SimulatedRequest, record: UsageRecord, opts: { ttft: boolean }): Array<[string, Record<string, string>, number]> {
  return [
    ['reservations_total', { outcome: 'admitted', reason: 'none' }, 1],
    ['ledger_call_duration_seconds_count', { operation: 'reserve' }, 1],
    ['ledger_call_duration_seconds_count', { operation: 'settle' }, 1],
    ['upstream_duration_seconds_count', { model, upstream: 'sim' }, 1],
    ['upstream_time_to_first_token_seconds_count', { model, upstream: 'sim' }, opts.ttft ? 1 : 0],
    ['tokens_total', { model, kind: 'input' }, sim.inputTokens],
    ['tokens_total', { model, kind: 'output' }, sim.outputTokensSent],
    ['cost_micro_usd_total', { model }, record.cost],
  ];
}

function requestLine(format: ClientFormatName, status: string, model = MODEL): Array<[string, Record<string, string>, number]> {
  return [
    ['requests_total', { route: ROUTES[format], format, model, status }, 1],
    ['request_duration_seconds_count', { route: ROUTES[format], format, model }, 1],
  ];
}

// The o200k table loads at gateway start; loading it here first keeps this process's event loop (shared
// by test, gateway and simulator) free of that stall while paced streams run.
beforeAll(async () => {
  await countTokens(['warm up']);
}, 30_000);

describe.each(['openai', 'anthropic'] as const)('metrics through a gateway with %s-format upstreams', (upstreamFormat) => {
  let h: Harness;
  beforeAll(async () => {
    // A fast reaper so the holds gauges are sampled within the test's patience; key lookups cached for the
    // whole run, and the test key's done now, so only a scenario's new keys add lookups to its deltas.
    h = await startHarness({ ledger: 'redis', upstreamFormat, config: { reaperIntervalMs: 50, keyCacheTtlMs: 3_600_000 } });
    expect(await h.gateway.authenticator.lookup(h.key)).toBeDefined();
  });
  afterAll(async () => {
    await h?.close();
  });

  describe.each(['openai', 'anthropic'] as const)('%s client', (format) => {
    it.each([false, true])('a success (stream %s): request, upstream call, tokens, cost and reservation', async (stream) => {
      const before = await scrape(h);
      const sent = await viaSdk(h, format, body({ stream }));
      expect(sent.status).toBe(200);
      const after = await scrapeWhenFinished(h, before, format, '200');
      const sim = simRequest(h, sent.requestId);
      const record = await usageRecord(h, sent.requestId);
      expect(record.usage).toMatchObject({ input: sim.inputTokens, output: sim.outputTokensSent });
      expect(record.cost).toBe(simulatorCost(h, sim));
      expect(record.cost).toBeGreaterThan(0);
      // A non-streamed reply has no first token to time: the whole body arrives at once.
      expect(deltas(before, after)).toEqual(expected([...requestLine(format, '200'), ...meteredCall(MODEL, sim, record, { ttft: stream })]));
      expect(gauge(after, 'tollgate_active_streams')).toBe(0);
    });

    it('402 refusals by each reason: no upstream call, no settlement', async () => {
      const capped = await h.backend.accounts.createKey(h.accountId, { name: 'capped', lifetimeCap: 2_000 });
      const poor = await h.backend.accounts.createAccount('poor');
      await h.backend.ledger.credit(poor.id, 3_000, 'start');
      const poorKey = await h.backend.accounts.createKey(poor.id, { name: 'poor' });
      const calls = h.simulator.requests.length;
      const before = await scrape(h);
      // Worst case of 20,000 output tokens: about 20,000 µUSD, past both limits (and under the Anthropic SDK's
      // non-streaming max_tokens bound).
      expect((await viaSdk(h, format, body({ max_tokens: 20_000 }), capped.secret)).status).toBe(402);
      expect((await viaSdk(h, format, body({ max_tokens: 20_000, stream: true }), poorKey.secret)).status).toBe(402);
      const after = await until('both refusals counted', async () => {
        const now = await scrape(h);
        return deltas(before, now)[seriesKey('tollgate_requests_total', { format, model: MODEL, route: ROUTES[format], status: '402' })] === 2 ? now : undefined;
      });
      expect(h.simulator.requests.length).toBe(calls);
      expect(deltas(before, after)).toEqual(
        expected([
          ...requestLine(format, '402'),
          ...requestLine(format, '402'),
          ['reservations_total', { outcome: 'refused', reason: 'key_lifetime_cap_reached' }, 1],
          ['reservations_total', { outcome: 'refused', reason: 'insufficient_balance' }, 1],
          ['ledger_call_duration_seconds_count', { operation: 'reserve' }, 2],
          // Each new key is read from the store once, timed as a ledger lookup.
          ['ledger_call_duration_seconds_count', { operation: 'lookup' }, 2],
        ]),
      );
    });

    it('an upstream 5xx: a 502 to the client, one 5xx upstream error, nothing charged', async () => {
      h.simulator.injectFault({ status: 500, match: { model: `sim-${MODEL}` } });
      const before = await scrape(h);
      const sent = await viaSdk(h, format, body());
      expect(sent.status).toBe(502);
      const after = await scrapeWhenFinished(h, before, format, '502');
      expect(simRequest(h, sent.requestId).status).toBe(500);
      expect(await usageRecord(h, sent.requestId)).toMatchObject({ cost: 0, status: 'upstream_failed' });
      expect(deltas(before, after)).toEqual(
        expected([
          ...requestLine(format, '502'),
          ['reservations_total', { outcome: 'admitted', reason: 'none' }, 1],
          ['ledger_call_duration_seconds_count', { operation: 'reserve' }, 1],
          ['ledger_call_duration_seconds_count', { operation: 'settle' }, 1],
          // The failed call is timed like any other: the histogram's count is the number of calls.
          ['upstream_duration_seconds_count', { model: MODEL, upstream: 'sim' }, 1],
          ['upstream_errors_total', { model: MODEL, upstream: 'sim', class: '5xx' }, 1],
        ]),
      );
    });

    it('a stream cut by the upstream: a stream_cut error, and what was generated is metered', async () => {
      h.simulator.injectFault({ cutAfterChunks: 9, match: { model: `sim-${MODEL}` } });
      const before = await scrape(h);
      const res = await rawPost(h, format, body({ stream: true, sim_reply_tokens: 100 }));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('error');
      const requestId = res.headers.get('x-request-id') as string;
      const after = await scrapeWhenFinished(h, before, format, '200');
      const sim = simRequest(h, requestId);
      expect(sim.outputTokensSent).toBeGreaterThan(0);
      expect(sim.outputTokensSent).toBeLessThan(100);
      const record = await usageRecord(h, requestId);
      expect(record).toMatchObject({ status: 'upstream_failed', usage: { input: sim.inputTokens, output: sim.outputTokensSent }, cost: simulatorCost(h, sim) });
      expect(deltas(before, after)).toEqual(
        expected([
          ...requestLine(format, '200'),
          ...meteredCall(MODEL, sim, record, { ttft: true }),
          ['upstream_errors_total', { model: MODEL, upstream: 'sim', class: 'stream_cut' }, 1],
        ]),
      );
      expect(gauge(after, 'tollgate_active_streams')).toBe(0);
    });

    it('a stream cut by the client: status 499, metered to what the upstream sent, no upstream error; the stream is active until then', async () => {
      // The simulator holds the stream after its fourth token (its events before the first token: one
      // role chunk in OpenAI's format; message_start, ping and content_block_start in Anthropic's), so no
      // token is on the wire when the client hangs up: the upstream sent exactly what the gateway read.
      const stallAfterChunks = (upstreamFormat === 'openai' ? 1 : 3) + 4;
      h.simulator.injectFault({ tokenDelayMs: 20, stallAfterChunks, stallMs: 60_000, match: { model: `sim-${MODEL}` } });
      const before = await scrape(h);
      const abort = new AbortController();
      const res = await rawPost(h, format, body({ stream: true, sim_reply_tokens: 200 }), abort.signal);
      expect(res.status).toBe(200);
      const requestId = res.headers.get('x-request-id') as string;
      await readUntilContent(res, 4, format);
      await until('the simulator to hold the stream after its fourth token', () => (simRequest(h, requestId).stalled ? true : undefined));
      expect(gauge(await scrape(h), 'tollgate_active_streams')).toBe(1);
      abort.abort();
      await h.simulator.waitForRequest((r) => r.headers['x-request-id'] === requestId && r.aborted);
      // 499, nginx's "client closed request": the 200 the stream began with is not what happened.
      const after = await scrapeWhenFinished(h, before, format, '499');
      const sim = simRequest(h, requestId);
      expect(sim.outputTokensSent).toBe(4);
      const record = await usageRecord(h, requestId);
      expect(record).toMatchObject({ status: 'client_cancelled', usage: { input: sim.inputTokens, output: sim.outputTokensSent }, cost: simulatorCost(h, sim) });
      expect(deltas(before, after)).toEqual(expected([...requestLine(format, '499'), ...meteredCall(MODEL, sim, record, { ttft: true })]));
      expect(gauge(after, 'tollgate_active_streams')).toBe(0);
      expect(requestLogLine(h, requestId)).toMatchObject({ status: 499, route: ROUTES[format], costMicroUsd: record.cost, level: 30 });
    });
  });

  it('holds gauges: a request in flight is counted with its worst case after a reaper tick, and both go back to 0 once it settles', async () => {
    const b = body({ stream: true, sim_reply_tokens: 12 });
    const model = h.catalog.current().byId.get(MODEL)!;
    const amount = worstCase(chatCompletionPlan(decodeChatRequest(structuredClone(b)), model, newRequestId()).footprint, model).amount;
    h.simulator.injectFault({ tokenDelayMs: 150, match: { model: `sim-${MODEL}` } });
    const res = await rawPost(h, 'openai', b);
    expect(res.status).toBe(200);
    // A sample taken before this request reserved may still show the previous test's hold (another
    // amount), so wait for the sample that shows this one.
    const held = await until('the hold in the gauges', async () => {
      const e = await scrape(h);
      return gauge(e, 'tollgate_holds_outstanding') === 1 && gauge(e, 'tollgate_held_micro_usd') === amount ? e : undefined;
    });
    expect(gauge(held, 'tollgate_held_micro_usd')).toBe(amount);
    expect((await h.backend.ledger.balance(h.accountId)).held).toBe(amount);
    expect(await res.text()).toContain('[DONE]');
    await until('the gauges back to 0', async () => {
      const e = await scrape(h);
      return gauge(e, 'tollgate_holds_outstanding') === 0 && gauge(e, 'tollgate_held_micro_usd') === 0 ? true : undefined;
    });
    expect((await h.backend.ledger.balance(h.accountId)).held).toBe(0);
  });

  it('a reasoning model: reasoning tokens are counted as the upstream reported them', async () => {
    const before = await scrape(h);
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    const { data, response } = await client.chat.completions
      .create({ model: REASONING_MODEL, max_tokens: 400, messages: [{ role: 'user', content: PROMPT }] })
      .withResponse();
    const requestId = response.headers.get('x-request-id') as string;
    const after = await scrapeWhenFinished(h, before, 'openai', '200', REASONING_MODEL);
    const sim = simRequest(h, requestId);
    const record = await usageRecord(h, requestId);
    expect(data.usage?.completion_tokens).toBe(sim.outputTokensSent);
    const reasoning = record.usage.reasoning;
    if (upstreamFormat === 'openai') {
      // What the simulator reported, relayed untouched to the client.
      expect(reasoning).toBe(data.usage?.completion_tokens_details?.reasoning_tokens);
      expect(reasoning).toBeGreaterThan(0);
    }
    expect(deltas(before, after)).toEqual(
      expected([
        ...requestLine('openai', '200', REASONING_MODEL),
        ...meteredCall(REASONING_MODEL, sim, record, { ttft: false }),
        ['tokens_total', { model: REASONING_MODEL, kind: 'reasoning' }, reasoning],
      ]),
    );
  });

  it("a new key: its first request reads the key from the store (a timed ledger lookup), the next is served from the gateway's cache", async () => {
    const fresh = await h.backend.accounts.createKey(h.accountId, { name: 'fresh' });
    const before = await scrape(h);
    const first = await viaSdk(h, 'openai', body(), fresh.secret);
    const second = await viaSdk(h, 'openai', body(), fresh.secret);
    expect([first.status, second.status]).toEqual([200, 200]);
    const after = await until('both requests counted', async () => {
      const now = await scrape(h);
      return deltas(before, now)[seriesKey('tollgate_requests_total', { format: 'openai', model: MODEL, route: ROUTES.openai, status: '200' })] === 2 ? now : undefined;
    });
    const calls = await Promise.all(
      [first, second].map(async (s) => meteredCall(MODEL, simRequest(h, s.requestId), await usageRecord(h, s.requestId), { ttft: false })),
    );
    expect(deltas(before, after)).toEqual(
      expected([
        ...requestLine('openai', '200'),
        ...requestLine('openai', '200'),
        ...calls.flat(),
        ['ledger_call_duration_seconds_count', { operation: 'lookup' }, 1],
      ]),
    );
  });

  it('route labels are templates: a prefix-less path is its /v1 route, a request refused before routing keeps its route, an unknown path is other', async () => {
    const before = await scrape(h);
    // The OpenAI SDK with a base URL without /v1 posts to /chat/completions.
    const client = new OpenAI({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const { response } = await client.chat.completions.create({ model: MODEL, max_tokens: 300, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    expect(response.status).toBe(200);
    const requestId = response.headers.get('x-request-id') as string;
    const noKey = await fetch(`${h.baseUrl}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body()) });
    expect(noKey.status).toBe(401);
    const unknown = await fetch(`${h.baseUrl}/v1/no/such/${Date.now()}`, { headers: { authorization: `Bearer ${h.key}` } });
    expect(unknown.status).toBe(404);
    const after = await until('all three counted', async () => {
      const now = await scrape(h);
      const d = deltas(before, now);
      return d[seriesKey('tollgate_requests_total', { format: 'openai', model: MODEL, route: ROUTES.openai, status: '200' })] === 1 &&
        d[seriesKey('tollgate_requests_total', { format: 'openai', model: 'unknown', route: 'other', status: '404' })] === 1
        ? now
        : undefined;
    });
    expect(deltas(before, after)).toEqual(
      expected([
        ...requestLine('openai', '200'),
        ...meteredCall(MODEL, simRequest(h, requestId), await usageRecord(h, requestId), { ttft: false }),
        ['requests_total', { route: '/v1/messages', format: 'anthropic', model: 'unknown', status: '401' }, 1],
        ['request_duration_seconds_count', { route: '/v1/messages', format: 'anthropic', model: 'unknown' }, 1],
        ['requests_total', { route: 'other', format: 'openai', model: 'unknown', status: '404' }, 1],
        ['request_duration_seconds_count', { route: 'other', format: 'openai', model: 'unknown' }, 1],
      ]),
    );
    expect(requestLogLine(h, noKey.headers.get('x-request-id') as string)).toMatchObject({ route: '/v1/messages', status: 401 });
    expect(requestLogLine(h, unknown.headers.get('x-request-id') as string)).toMatchObject({ route: 'unmatched', status: 404 });
  });
});

describe.each(['memory', 'redis'] as const)('the reaper of a gateway with the %s ledger', (ledger) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ ledger, config: { reaperIntervalMs: 50 } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('returns the holds of requests no pod settled, counting them and the micro-USD they released', async () => {
    // What a pod killed mid-request leaves: holds reserved and never settled.
    const amounts = [1_234, 56_789];
    const before = await scrape(h);
    for (const [i, amount] of amounts.entries()) {
      const r = await h.backend.ledger.reserve({ requestId: `req_orphan${i}`, accountId: h.accountId, keyId: h.keyId, amount, holdTtlMs: 1 });
      expect(r.admitted).toBe(true);
    }
    const after = await until('both holds returned', async () => {
      const now = await scrape(h);
      return deltas(before, now)['tollgate_reaper_returned_holds_total'] === amounts.length ? now : undefined;
    });
    expect(deltas(before, after)).toEqual(
      expected([
        ['reaper_returned_holds_total', {}, 2],
        ['reaper_returned_micro_usd_total', {}, 1_234 + 56_789],
      ]),
    );
    expect((await h.backend.ledger.balance(h.accountId)).held).toBe(0);
  });
});

describe('a reaper pass that fails', () => {
  let h: Harness;
  let redis: Redis;
  beforeAll(async () => {
    h = await startHarness({ ledger: 'redis', config: { reaperIntervalMs: 50 } });
    redis = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await redis?.quit();
    await h?.close();
  });

  it('is counted in tollgate_reaper_errors_total and logged as a warning, once per pass; passes after recovery are not', async () => {
    const index = `${h.redisNamespace}:reap-slots`;
    const before = await scrape(h);
    // A real Redis error on every pass (WRONGTYPE on the reaper's index), without touching the server
    // other tests share.
    await redis.set(index, 'not a sorted set');
    let failing: Exposition;
    try {
      failing = await until('three failed passes', async () => {
        const now = await scrape(h);
        return (deltas(before, now)['tollgate_reaper_errors_total'] ?? 0) >= 3 ? now : undefined;
      });
    } finally {
      await redis.del(index);
    }
    expect(Object.keys(deltas(before, failing))).toEqual(['tollgate_reaper_errors_total']);
    const warnings = h.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === 'reaper_failed');
    expect(warnings.length).toBeGreaterThanOrEqual(3);
    for (const w of warnings) {
      expect(w.level).toBe(40);
      expect(w.error).toMatch(/^ReplyError: WRONGTYPE /);
    }
    // Recovered: a hold left behind is returned again, and the error count stops.
    const recovered = await scrape(h);
    expect((await h.backend.ledger.reserve({ requestId: 'req_orphan', accountId: h.accountId, keyId: h.keyId, amount: 700, holdTtlMs: 1 })).admitted).toBe(true);
    const after = await until('the hold returned', async () => {
      const now = await scrape(h);
      return deltas(recovered, now)['tollgate_reaper_returned_holds_total'] === 1 ? now : undefined;
    });
    await new Promise((r) => setTimeout(r, 300));
    const later = await scrape(h);
    // A pass that had already started before the key was removed may still fail once.
    expect(deltas(recovered, later)['tollgate_reaper_errors_total'] ?? 0).toBeLessThanOrEqual(1);
    expect(deltas(after, later)['tollgate_reaper_errors_total']).toBeUndefined();
  });
});

describe('the exposition parser', () => {
  it('reads label escapes, histograms and types', () => {
    const e = parseExposition(
      [
        '# HELP a_total x',
        '# TYPE a_total counter',
        'a_total{b="x\\"y\\\\z\\n",c="1"} 3',
        '# TYPE h histogram',
        'h_bucket{le="+Inf"} 2',
        'h_count 2',
        'h_sum 0.5',
        'g 7 1700000000000',
      ].join('\n'),
    );
    expect(e.samples.get(seriesKey('a_total', { c: '1', b: 'x"y\\z\n' }))).toBe(3);
    expect(e.samples.get('h_count')).toBe(2);
    expect(e.samples.get('g')).toBe(7);
    expect(countingSeries(e, 'h_count')).toBe(true);
    expect(countingSeries(e, 'h_sum')).toBe(false);
    expect(countingSeries(e, seriesKey('a_total', { c: '1' }))).toBe(true);
  });
});
