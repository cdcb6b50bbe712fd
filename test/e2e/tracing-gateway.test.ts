// OpenTelemetry traces of a real gateway (issue 5 acceptance): requests in both wire formats, to both
// upstream formats, over loopback with the official clients and the simulator as upstream. Spans are
// captured by an in-memory exporter, and in a second part exported over OTLP/HTTP to a receiver on
// loopback. Checked: the span tree (server span, one client span per upstream call, a retry on
// another upstream), the gen_ai.* attributes against the simulator's own usage, our attributes against
// the response headers and the ledger, the W3C traceparent the simulator received, a client's incoming
// traceparent continued, and that no prompt or completion text is recorded by default.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { UsageRecord } from '../../src/billing/ledger.js';
import type { SimulatedRequest } from '../../src/simulator/server.js';
import { initTracing, type Tracing } from '../../src/telemetry/tracing.js';
import type { ClientFormatName } from '../../src/formats/index.js';
import { startHarness, upstreamFor, type Harness } from '../helpers/gateway-harness.js';
import { startOtlpReceiver, type OtlpBody, type OtlpReceiver, type OtlpSpan, type OtlpValue } from '../helpers/otlp-receiver.js';
import { readUntilContent, until } from './e2e-support.js';

const MODEL = 'outlaw-1-xploded';
const UPSTREAM_MODEL = `sim-${MODEL}`;
// The name the upstream's replies give (as a hosted API names the dated snapshot that served an alias).
const REPORTED_MODEL = `${UPSTREAM_MODEL}-2026-01-15`;
// Distinctive, so finding it anywhere in a span means the prompt leaked into the trace.
const PROMPT = 'Describe the quartz-veined river stone of Ysolde, please.';
const ROUTES: Record<ClientFormatName, string> = { openai: '/v1/chat/completions', anthropic: '/v1/messages' };
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN_ID = '00f067aa0ba902b7';

async function usageRecord(h: Harness, requestId: string): Promise<UsageRecord> {
  return until(`usage record of ${requestId}`, async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 1000 })).find((r) => r.requestId === requestId));
}

function upstreamCalls(h: Harness, requestId: string): SimulatedRequest[] {
  return h.simulator.requests.filter((r) => r.headers['x-request-id'] === requestId);
}

interface Reply {
  requestId: string;
  status: number;
  /** The generated text the client received. */
  text: string;
}

/**
 * One request with the official client of `format`; `traceparent` is sent as the client's own trace
 * context. The Anthropic SDK traces its calls with the OpenTelemetry API, which in this process is the
 * gateway's own provider: it then starts a span of its own and sends that as `traceparent` (replacing
 * ours), so it runs with its tracing off unless `sdkTracing` asks for it.
 */
async function send(
  h: Harness,
  format: ClientFormatName,
  opts: { stream: boolean; traceparent?: string; sdkTracing?: boolean; key?: string; maxTokens?: number },
): Promise<Reply> {
  const headers = opts.traceparent ? { traceparent: opts.traceparent } : {};
  const maxTokens = opts.maxTokens ?? 300;
  const messages = [{ role: 'user' as const, content: PROMPT }];
  try {
    if (format === 'openai') {
      const client = new OpenAI({ apiKey: opts.key ?? h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
      if (opts.stream) {
        const { data, response } = await client.chat.completions.create({ model: MODEL, max_tokens: maxTokens, messages, stream: true }, { headers }).withResponse();
        let text = '';
        for await (const c of data) text += c.choices[0]?.delta.content ?? '';
        return { requestId: response.headers.get('x-request-id') ?? '', status: response.status, text };
      }
      const { data, response } = await client.chat.completions.create({ model: MODEL, max_tokens: maxTokens, messages }, { headers }).withResponse();
      return { requestId: response.headers.get('x-request-id') ?? '', status: response.status, text: data.choices[0]?.message.content ?? '' };
    }
    const client = new Anthropic({ apiKey: opts.key ?? h.key, baseURL: h.baseUrl, maxRetries: 0, ...(opts.sdkTracing ? {} : { openTelemetry: false }) });
    if (opts.stream) {
      const { data, response } = await client.messages.create({ model: MODEL, max_tokens: maxTokens, messages, stream: true }, { headers }).withResponse();
      let text = '';
      for await (const e of data) if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      return { requestId: response.headers.get('x-request-id') ?? '', status: response.status, text };
    }
    const { data, response } = await client.messages.create({ model: MODEL, max_tokens: maxTokens, messages }, { headers }).withResponse();
    const text = data.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    return { requestId: response.headers.get('x-request-id') ?? '', status: response.status, text };
  } catch (err) {
    const e = err as { status?: number; headers?: Headers };
    if (typeof e.status !== 'number' || !(e.headers instanceof Headers)) throw err;
    return { requestId: e.headers.get('x-request-id') ?? '', status: e.status, text: '' };
  }
}

/** The W3C traceparent the simulator received on one upstream call, split. */
function receivedTraceparent(sim: SimulatedRequest): { traceId: string; spanId: string; flags: string } {
  const header = sim.headers.traceparent;
  expect(typeof header, 'traceparent sent upstream').toBe('string');
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(header as string);
  expect(m, `traceparent ${String(header)}`).not.toBeNull();
  return { traceId: m![1]!, spanId: m![2]!, flags: m![3]! };
}

describe('spans of real requests, captured in memory', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing;
  const harnesses = new Map<ClientFormatName, Harness>();
  let fallback: Harness;

  beforeAll(async () => {
    tracing = initTracing({ env: {}, spanProcessors: [new SimpleSpanProcessor(exporter)] });
    for (const upstreamFormat of ['openai', 'anthropic'] as const) {
      harnesses.set(upstreamFormat, await startHarness({ ledger: 'redis', upstreamFormat, tracing, simulator: { reportedModels: { [UPSTREAM_MODEL]: REPORTED_MODEL } } }));
    }
    // Two upstreams for the model, so a failed call is retried on the other one.
    fallback = await startHarness({
      ledger: 'redis',
      tracing,
      models: (models, sim) =>
        models.map((m) => (m.id === MODEL ? { ...m, upstreams: [upstreamFor('openai', sim, UPSTREAM_MODEL, 'primary'), upstreamFor('openai', sim, UPSTREAM_MODEL, 'backup')] } : m)),
    });
  });
  afterAll(async () => {
    for (const h of [...harnesses.values(), fallback]) await h?.close();
    await tracing?.shutdown();
  });

  const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
  /** The server span of a request (it ends after settlement, possibly after the client saw the reply). */
  const serverSpan = (requestId: string): Promise<ReadableSpan> =>
    until(`server span of ${requestId}`, () => spans().find((s) => s.kind === SpanKind.SERVER && s.attributes['tollgate.request_id'] === requestId));
  const childrenOf = (parent: ReadableSpan): ReadableSpan[] =>
    spans().filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId && s.spanContext().traceId === parent.spanContext().traceId);
  /** Nothing the client wrote or was answered appears in any attribute of the gateway's spans. */
  const expectNoContent = (traceId: string, reply: Reply): void => {
    const inTrace = spans().filter((s) => s.spanContext().traceId === traceId && s.instrumentationScope.name === 'tollgate');
    expect(inTrace.length).toBeGreaterThan(0);
    const attributes = JSON.stringify(inTrace.map((s) => [s.name, s.attributes, s.events]));
    expect(attributes).not.toContain('quartz-veined');
    expect(attributes).not.toContain('Ysolde');
    const words = reply.text.split(/\s+/).filter((w) => w.length >= 6);
    for (const w of words) expect(attributes, `completion text "${w}" in the trace`).not.toContain(w);
  };

  // [client format, upstream format, stream, the client's trace context, finish reason on the client span]
  // The client's context is none, a traceparent header set by hand, or the Anthropic SDK's own call span.
  type Parent = 'none' | 'header' | 'sdk';
  const cases: Array<[ClientFormatName, ClientFormatName, boolean, Parent, string]> = [
    ['openai', 'openai', false, 'header', 'stop'],
    ['openai', 'openai', true, 'none', 'stop'],
    ['openai', 'anthropic', true, 'none', 'stop'],
    ['anthropic', 'anthropic', true, 'header', 'end_turn'],
    ['anthropic', 'openai', false, 'sdk', 'end_turn'],
    ['anthropic', 'anthropic', false, 'none', 'end_turn'],
  ];

  it.each(cases)('%s client, %s upstream, stream %s, client trace context: %s', async (format, upstreamFormat, stream, parent, finishReason) => {
    const h = harnesses.get(upstreamFormat)!;
    const reply = await send(h, format, {
      stream,
      ...(parent === 'header' ? { traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01` } : {}),
      sdkTracing: parent === 'sdk',
    });
    expect(reply.status).toBe(200);
    expect(reply.text.length).toBeGreaterThan(0);
    const server = await serverSpan(reply.requestId);
    const record = await usageRecord(h, reply.requestId);
    const [sim, ...more] = upstreamCalls(h, reply.requestId);
    expect(more).toHaveLength(0);

    // The tree: the client's trace continued (or a new one), the server span, one client span.
    const traceId = server.spanContext().traceId;
    if (parent === 'header') {
      expect(traceId).toBe(CLIENT_TRACE_ID);
      expect(server.parentSpanContext?.spanId).toBe(CLIENT_SPAN_ID);
      expect(server.parentSpanContext?.isRemote).toBe(true);
    } else if (parent === 'sdk') {
      // The SDK's call span, exported by the same provider: the client's and the gateway's spans form one trace.
      const sdkSpan = await until('the SDK call span', () => spans().find((s) => s.spanContext().spanId === server.parentSpanContext?.spanId));
      expect(sdkSpan.kind).toBe(SpanKind.CLIENT);
      expect(sdkSpan.instrumentationScope.name).not.toBe('tollgate');
      expect(sdkSpan.spanContext().traceId).toBe(traceId);
      expect(server.parentSpanContext?.isRemote).toBe(true);
    } else {
      expect(traceId).not.toBe(CLIENT_TRACE_ID);
      expect(server.parentSpanContext).toBeUndefined();
    }
    const children = childrenOf(server);
    expect(children).toHaveLength(1);
    const client = children[0]!;
    expect(client.kind).toBe(SpanKind.CLIENT);
    expect(client.name).toBe(`chat ${UPSTREAM_MODEL}`);
    expect(server.name).toBe(`POST ${ROUTES[format]}`);
    expect(server.status.code).toBe(SpanStatusCode.UNSET);
    expect(client.status.code).toBe(SpanStatusCode.UNSET);

    // What the upstream received is the client span's context.
    expect(receivedTraceparent(sim!)).toEqual({ traceId, spanId: client.spanContext().spanId, flags: '01' });

    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': ROUTES[format],
      'http.response.status_code': 200,
      'tollgate.request_id': reply.requestId,
      'tollgate.format': format,
      'tollgate.reservation': 'admitted',
      'tollgate.cost_micro_usd': record.cost,
      'gen_ai.request.model': MODEL,
      'gen_ai.request.max_tokens': 300,
      'gen_ai.request.stream': stream,
    });
    expect(record.cost).toBeGreaterThan(0);
    expect(client.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': upstreamFormat,
      'gen_ai.system': upstreamFormat,
      'gen_ai.request.model': UPSTREAM_MODEL,
      'gen_ai.request.max_tokens': 300,
      'gen_ai.request.stream': stream,
      // What the upstream's reply named, not the catalog id nor the name the gateway asked for.
      'gen_ai.response.model': REPORTED_MODEL,
      'gen_ai.usage.input_tokens': sim!.inputTokens,
      'gen_ai.usage.output_tokens': sim!.outputTokensSent,
      'gen_ai.response.finish_reasons': [finishReason],
      'server.address': '127.0.0.1',
      'server.port': h.simulator.port,
      'tollgate.model': MODEL,
      'tollgate.upstream': 'sim',
    });
    expect(sim!.inputTokens).toBeGreaterThan(0);
    expect(sim!.outputTokensSent).toBeGreaterThan(0);
    expect(record.usage).toMatchObject({ input: sim!.inputTokens, output: sim!.outputTokensSent });
    // A stream times its first token; a whole JSON body has none to time.
    if (stream) expect(client.attributes['gen_ai.response.time_to_first_chunk']).toBeGreaterThan(0);
    else expect(client.attributes['gen_ai.response.time_to_first_chunk']).toBeUndefined();
    expect(client.attributes['error.type']).toBeUndefined();
    expectNoContent(traceId, reply);
  });

  it('a failed upstream call retried on the other upstream: two client spans, each with its own traceparent upstream', async () => {
    fallback.simulator.injectFault({ status: 503, match: { model: UPSTREAM_MODEL } });
    const reply = await send(fallback, 'openai', { stream: false });
    expect(reply.status).toBe(200);
    const server = await serverSpan(reply.requestId);
    const calls = upstreamCalls(fallback, reply.requestId);
    expect(calls.map((c) => c.status)).toEqual([503, 200]);
    const children = childrenOf(server);
    expect(children).toHaveLength(2);
    const failed = children.find((s) => s.status.code === SpanStatusCode.ERROR);
    const served = children.find((s) => s.status.code !== SpanStatusCode.ERROR);
    expect(failed).toBeDefined();
    expect(served).toBeDefined();
    // One span per upstream tried, matched to the calls by the span id each carried.
    expect(new Set(children.map((s) => s.attributes['tollgate.upstream']))).toEqual(new Set(['primary', 'backup']));
    const traceId = server.spanContext().traceId;
    expect(receivedTraceparent(calls[0]!)).toEqual({ traceId, spanId: failed!.spanContext().spanId, flags: '01' });
    expect(receivedTraceparent(calls[1]!)).toEqual({ traceId, spanId: served!.spanContext().spanId, flags: '01' });
    expect(failed!.attributes['error.type']).toBe('5xx');
    expect(failed!.attributes['gen_ai.usage.output_tokens']).toBeUndefined();
    expect(served!.attributes).toMatchObject({
      'gen_ai.response.model': UPSTREAM_MODEL,
      'gen_ai.usage.input_tokens': calls[1]!.inputTokens,
      'gen_ai.usage.output_tokens': calls[1]!.outputTokensSent,
    });
    expect(server.status.code).toBe(SpanStatusCode.UNSET);
    expect(server.attributes['tollgate.cost_micro_usd']).toBe((await usageRecord(fallback, reply.requestId)).cost);
    expectNoContent(traceId, reply);
  });

  it.each(['openai', 'anthropic'] as const)('%s client: an upstream 5xx fails both spans; a 402 refusal has no client span', async (format) => {
    const h = harnesses.get('openai')!;
    h.simulator.injectFault({ status: 500, match: { model: UPSTREAM_MODEL } });
    const failedReply = await send(h, format, { stream: false });
    expect(failedReply.status).toBe(502);
    const failedServer = await serverSpan(failedReply.requestId);
    expect(failedServer.status.code).toBe(SpanStatusCode.ERROR);
    expect(failedServer.attributes).toMatchObject({ 'http.response.status_code': 502, 'error.type': 'upstream_error', 'tollgate.reservation': 'admitted' });
    const [client, ...more] = childrenOf(failedServer);
    expect(more).toHaveLength(0);
    expect(client!.status.code).toBe(SpanStatusCode.ERROR);
    expect(client!.attributes['error.type']).toBe('5xx');
    const [sim] = upstreamCalls(h, failedReply.requestId);
    expect(receivedTraceparent(sim!).spanId).toBe(client!.spanContext().spanId);

    const capped = await h.backend.accounts.createKey(h.accountId, { name: 'capped', lifetimeCap: 1_000 });
    const refused = await send(h, format, { stream: false, key: capped.secret, maxTokens: 20_000 });
    expect(refused.status).toBe(402);
    const refusedServer = await serverSpan(refused.requestId);
    expect(refusedServer.attributes).toMatchObject({ 'http.response.status_code': 402, 'tollgate.reservation': 'refused:key_lifetime_cap_reached', 'gen_ai.request.model': MODEL });
    // A refusal is the client's limit, not a failure of the gateway.
    expect(refusedServer.status.code).toBe(SpanStatusCode.UNSET);
    expect(childrenOf(refusedServer)).toHaveLength(0);
    expect(upstreamCalls(h, refused.requestId)).toHaveLength(0);
    expectNoContent(refusedServer.spanContext().traceId, refused);
  });

  it('server spans are named by route template, never by the raw path: unknown paths are all "unmatched"', async () => {
    const h = harnesses.get('openai')!;
    const auth = { authorization: `Bearer ${h.key}` };
    // The OpenAI SDK with a base URL without /v1 posts to /chat/completions.
    const client = new OpenAI({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const { response } = await client.chat.completions.create({ model: MODEL, max_tokens: 300, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    const noKey = await fetch(`${h.baseUrl}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: '{}' });
    const model = await fetch(`${h.baseUrl}/v1/models/${MODEL}`, { headers: auth });
    const health = await fetch(`${h.baseUrl}/healthz`);
    const unknown = await fetch(`${h.baseUrl}/v1/no/such/${Date.now()}`, { headers: auth });
    const other = await fetch(`${h.baseUrl}/${Date.now()}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' });
    const requests: Array<[Headers, number, string, string]> = [
      [response.headers, 200, 'POST /v1/chat/completions', '/v1/chat/completions'],
      // Refused before routing: the route it was meant for.
      [noKey.headers, 401, 'POST /v1/messages', '/v1/messages'],
      [model.headers, 200, 'GET /v1/models/:id', '/v1/models/:id'],
      [health.headers, 200, 'GET /healthz', '/healthz'],
      [unknown.headers, 404, 'GET unmatched', 'unmatched'],
      [other.headers, 404, 'POST unmatched', 'unmatched'],
    ];
    expect([response.status, noKey.status, model.status, health.status, unknown.status, other.status]).toEqual(requests.map((r) => r[1]));
    for (const [headers, status, name, route] of requests) {
      const span = await serverSpan(headers.get('x-request-id') as string);
      expect({ name: span.name, route: span.attributes['http.route'], status: span.attributes['http.response.status_code'] }).toEqual({ name, route, status });
    }
  });

  it('a megabyte model name is bounded in the span attribute (404 model_not_found)', async () => {
    const h = harnesses.get('openai')!;
    const huge = 'q'.repeat(1024 * 1024);
    const res = await fetch(`${h.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: huge, messages: [{ role: 'user', content: 'hi' }] }) });
    expect(res.status).toBe(404);
    const span = await serverSpan(res.headers.get('x-request-id') as string);
    const model = span.attributes['gen_ai.request.model'] as string;
    expect(model.startsWith('qqqq')).toBe(true);
    expect(model.length).toBeLessThan(400);
  });

  it('a stream the client cuts: the server span records 499, not the 200 the stream began with', async () => {
    const h = harnesses.get('openai')!;
    // Tokens every 150 ms, so the client hangs up mid-stream with none on the wire.
    h.simulator.injectFault({ tokenDelayMs: 150, match: { model: UPSTREAM_MODEL } });
    const abort = new AbortController();
    const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 300, stream: true, sim_reply_tokens: 200, messages: [{ role: 'user', content: PROMPT }] }),
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id') as string;
    await readUntilContent(res, 3);
    abort.abort();
    const server = await serverSpan(requestId);
    expect(server.attributes['http.response.status_code']).toBe(499);
    // The client's doing, not a failure of the gateway.
    expect(server.status.code).toBe(SpanStatusCode.UNSET);
    const [client, ...more] = childrenOf(server);
    expect(more).toHaveLength(0);
    expect(client!.attributes['error.type']).toBeUndefined();
    expect(server.attributes['tollgate.cost_micro_usd']).toBe((await usageRecord(h, requestId)).cost);
  });
});

// --- Prompt and completion, recorded only when TOLLGATE_TRACE_CONTENT=on ---------------------------

describe('prompt and completion on the client span with TOLLGATE_TRACE_CONTENT=on', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing;
  const harnesses = new Map<ClientFormatName, Harness>();
  const SYSTEM = 'You answer in one sentence about stones.';
  const FOLLOW_UP = 'And what colour is it?';

  beforeAll(async () => {
    tracing = initTracing({ env: { TOLLGATE_TRACE_CONTENT: 'on' }, spanProcessors: [new SimpleSpanProcessor(exporter)] });
    expect(tracing.contentEnabled).toBe(true);
    for (const upstreamFormat of ['openai', 'anthropic'] as const) harnesses.set(upstreamFormat, await startHarness({ upstreamFormat, tracing }));
  });
  afterAll(async () => {
    for (const h of harnesses.values()) await h.close();
    await tracing?.shutdown();
  });

  const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
  const serverSpan = (requestId: string): Promise<ReadableSpan> =>
    until(`server span of ${requestId}`, () => spans().find((s) => s.kind === SpanKind.SERVER && s.attributes['tollgate.request_id'] === requestId));
  const json = (v: unknown): unknown => (typeof v === 'string' ? JSON.parse(v) : v);

  // A conversation with a tool round trip, in each client format, and what the conventions make of it.
  const openaiMessages = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: PROMPT },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"quartz"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'granite with quartz veins' },
    { role: 'user', content: [{ type: 'text', text: FOLLOW_UP }] },
  ];
  const openaiExpected = [
    { role: 'system', parts: [{ type: 'text', content: SYSTEM }] },
    { role: 'user', parts: [{ type: 'text', content: PROMPT }] },
    { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'lookup', arguments: { q: 'quartz' } }] },
    { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: 'granite with quartz veins' }] },
    { role: 'user', parts: [{ type: 'text', content: FOLLOW_UP }] },
  ];
  const anthropicMessages = [
    { role: 'user', content: PROMPT },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'quartz' } }] },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_1', content: 'granite with quartz veins' },
        { type: 'text', text: FOLLOW_UP },
      ],
    },
  ];
  const anthropicExpected = [
    { role: 'user', parts: [{ type: 'text', content: PROMPT }] },
    { role: 'assistant', parts: [{ type: 'tool_call', id: 'toolu_1', name: 'lookup', arguments: { q: 'quartz' } }] },
    {
      role: 'user',
      parts: [
        { type: 'tool_call_response', id: 'toolu_1', response: 'granite with quartz veins' },
        { type: 'text', content: FOLLOW_UP },
      ],
    },
  ];
  const tools = {
    openai: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
    anthropic: [{ name: 'lookup', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }],
  };

  const cases: Array<[ClientFormatName, ClientFormatName, boolean, string]> = [
    ['openai', 'openai', false, 'stop'],
    // Same-format stream chunks go out as text, ids rewritten in place; the trace still gets their text.
    ['openai', 'openai', true, 'stop'],
    ['openai', 'anthropic', true, 'stop'],
    ['anthropic', 'anthropic', true, 'end_turn'],
    ['anthropic', 'openai', false, 'end_turn'],
  ];

  it.each(cases)('%s client, %s upstream, stream %s: the messages as the client sent them, and the text it received', async (format, upstreamFormat, stream, finishReason) => {
    const h = harnesses.get(upstreamFormat)!;
    const body =
      format === 'openai'
        ? { model: MODEL, max_tokens: 300, stream, messages: openaiMessages, tools: tools.openai, tool_choice: 'none' }
        : { model: MODEL, max_tokens: 300, stream, system: SYSTEM, messages: anthropicMessages, tools: tools.anthropic, tool_choice: { type: 'none' } };
    const auth: Record<string, string> = format === 'openai' ? { authorization: `Bearer ${h.key}` } : { 'x-api-key': h.key, 'anthropic-version': '2023-06-01' };
    const res = await fetch(`${h.baseUrl}${ROUTES[format]}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const raw = await res.text();
    expect(res.status, raw).toBe(200);
    // The text the client received, from its stream or its JSON reply.
    let text = '';
    if (stream) {
      for (const line of raw.split('\n')) {
        if (!line.startsWith('data: {')) continue;
        const event = JSON.parse(line.slice(6)) as { choices?: { delta?: { content?: string } }[]; delta?: { text?: string } };
        text += (format === 'openai' ? event.choices?.[0]?.delta?.content : event.delta?.text) ?? '';
      }
    } else {
      const reply = JSON.parse(raw) as { choices?: { message: { content: string } }[]; content?: { text?: string }[] };
      text = format === 'openai' ? (reply.choices?.[0]?.message.content ?? '') : (reply.content ?? []).map((b) => b.text ?? '').join('');
    }
    expect(text.length).toBeGreaterThan(0);

    const server = await serverSpan(res.headers.get('x-request-id') as string);
    const client = spans().find((s) => s.parentSpanContext?.spanId === server.spanContext().spanId);
    expect(client).toBeDefined();
    const a = client!.attributes;
    expect(json(a['gen_ai.input.messages'])).toEqual(format === 'openai' ? openaiExpected : anthropicExpected);
    // Anthropic's separate system prompt goes to gen_ai.system_instructions; OpenAI's stays a message.
    if (format === 'anthropic') expect(json(a['gen_ai.system_instructions'])).toEqual([{ type: 'text', content: SYSTEM }]);
    else expect(a['gen_ai.system_instructions']).toBeUndefined();
    expect(json(a['gen_ai.output.messages'])).toEqual([{ role: 'assistant', parts: [{ type: 'text', content: text }], finish_reason: finishReason }]);
    // On the inference span only: the server span carries no text.
    expect(JSON.stringify(server.attributes)).not.toContain('quartz');
  });

  it('a reasoning reply: the reasoning and the answer as separate parts', async () => {
    const h = harnesses.get('openai')!;
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    const { data, response } = await client.chat.completions.create({ model: 'glm-5.3-xploded', max_tokens: 400, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    const message = data.choices[0]!.message as { content: string | null; reasoning_content?: string };
    expect(message.reasoning_content?.length).toBeGreaterThan(0);
    const server = await serverSpan(response.headers.get('x-request-id') as string);
    const span = spans().find((s) => s.parentSpanContext?.spanId === server.spanContext().spanId);
    expect(json(span!.attributes['gen_ai.output.messages'])).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'reasoning', content: message.reasoning_content },
          { type: 'text', content: message.content },
        ],
        finish_reason: data.choices[0]!.finish_reason,
      },
    ]);
  });
});

// --- OTLP/HTTP export of a real request to a receiver on loopback ---------------------------------

function plain(v: OtlpValue | undefined): unknown {
  if (v === undefined) return undefined;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(plain);
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.stringValue ?? v.doubleValue ?? v.boolValue;
}

function attributesOf(span: OtlpSpan): Record<string, unknown> {
  return Object.fromEntries(span.attributes.map((a) => [a.key, plain(a.value)]));
}

describe('spans of a real request, exported over OTLP/HTTP', () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await receiver.close();
  });

  it('the server and client spans of a gateway request reach the collector, tree and attributes intact', async () => {
    // The standard variables, read by the SDK: what an operator sets in the chart.
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', `http://127.0.0.1:${receiver.port}`);
    vi.stubEnv('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'http/json');
    vi.stubEnv('OTEL_SERVICE_NAME', 'tollgate-e2e');
    const tracing = initTracing();
    expect(tracing.enabled).toBe(true);
    const h = await startHarness({ ledger: 'redis', upstreamFormat: 'anthropic', tracing });
    let reply: Reply;
    let record: UsageRecord;
    try {
      reply = await send(h, 'openai', { stream: true, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01` });
      expect(reply.status).toBe(200);
      record = await usageRecord(h, reply.requestId);
      // The server span ends just after settlement; the batch processor exports it at shutdown.
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      await h.close();
      await tracing.shutdown();
    }

    const bodies = receiver.received;
    expect(bodies.length).toBeGreaterThan(0);
    const spans: OtlpSpan[] = [];
    const services = new Set<unknown>();
    for (const b of bodies) {
      expect(b.url).toBe('/v1/traces');
      expect(b.headers['content-type']).toMatch(/^application\/json/);
      for (const rs of (JSON.parse(b.body) as OtlpBody).resourceSpans) {
        services.add(plain(rs.resource.attributes.find((a) => a.key === 'service.name')?.value));
        for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      }
    }
    expect([...services]).toEqual(['tollgate-e2e']);
    const server = spans.find((s) => attributesOf(s)['tollgate.request_id'] === reply.requestId);
    expect(server, 'server span exported').toBeDefined();
    const client = spans.find((s) => s.parentSpanId === server!.spanId);
    expect(client, 'client span exported').toBeDefined();
    expect(spans.filter((s) => s.traceId === CLIENT_TRACE_ID)).toHaveLength(2);
    expect(server!).toMatchObject({ name: 'POST /v1/chat/completions', traceId: CLIENT_TRACE_ID, parentSpanId: CLIENT_SPAN_ID, kind: 2 });
    expect(client!).toMatchObject({ name: `chat ${UPSTREAM_MODEL}`, traceId: CLIENT_TRACE_ID, kind: 3 });

    const [sim] = upstreamCalls(h, reply.requestId);
    expect(receivedTraceparent(sim!)).toEqual({ traceId: CLIENT_TRACE_ID, spanId: client!.spanId, flags: '01' });
    expect(attributesOf(server!)).toMatchObject({
      'tollgate.request_id': reply.requestId,
      'tollgate.reservation': 'admitted',
      'tollgate.cost_micro_usd': record.cost,
      'http.response.status_code': 200,
    });
    expect(attributesOf(client!)).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': UPSTREAM_MODEL,
      'gen_ai.request.max_tokens': 300,
      'gen_ai.response.model': UPSTREAM_MODEL,
      'gen_ai.usage.input_tokens': sim!.inputTokens,
      'gen_ai.usage.output_tokens': sim!.outputTokensSent,
      'gen_ai.response.finish_reasons': ['stop'],
      'server.address': '127.0.0.1',
      'server.port': h.simulator.port,
    });
    const exported = bodies.map((b) => b.body).join('\n');
    expect(exported).not.toContain('quartz-veined');
  });
});
