import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { DISABLED_TRACING, initTracing, serverOf, tracingRequested } from '../../src/telemetry/tracing.js';
import type { Tracing } from '../../src/telemetry/tracing.js';

let tracing: Tracing | undefined;
afterEach(async () => {
  await tracing?.shutdown();
  tracing = undefined;
  vi.unstubAllEnvs();
});

function start(env: Record<string, string> = {}): { tracing: Tracing; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  tracing = initTracing({ env, spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { tracing, exporter };
}

const byName = (spans: ReadableSpan[], prefix: string): ReadableSpan => {
  const s = spans.find((x) => x.name.startsWith(prefix));
  if (!s) throw new Error(`no span ${prefix} in ${spans.map((x) => x.name).join(', ')}`);
  return s;
};

const run = promisify(execFile);

describe('tracing switch', () => {
  it('is off by default and on by TOLLGATE_TRACING or OTEL variables', () => {
    expect(tracingRequested({})).toBe(false);
    expect(tracingRequested({ TOLLGATE_TRACING: 'on' })).toBe(true);
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', TOLLGATE_TRACING: 'off' })).toBe(false);
    expect(tracingRequested({ TOLLGATE_TRACING: 'on', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    expect(initTracing({ env: {} })).toBe(DISABLED_TRACING);
  });

  it('when off, the OpenTelemetry SDK is never loaded (a gateway with tracing off does not carry it)', async () => {
    const script = [
      "const { createRequire } = await import('node:module');",
      "await import('./src/gateway.ts');",
      "const { initTracing } = await import('./src/telemetry/tracing.ts');",
      'const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes(\'sdk-node\'));',
      'initTracing({ env: {} });',
      'const off = loaded();',
      "initTracing({ env: { TOLLGATE_TRACING: 'on', OTEL_TRACES_EXPORTER: 'none' }, spanProcessors: [] });",
      'console.log(JSON.stringify({ off, on: loaded() }));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: join(import.meta.dirname, '..', '..') });
    expect(JSON.parse(stdout.trim().split('\n').pop() ?? '{}')).toEqual({ off: false, on: true });
  });

  it('when off, hands out shared no-op handles (no allocation per request)', () => {
    const t = initTracing({ env: {} });
    const a = t.startRequestSpan({ route: '/v1/chat/completions', requestId: 'r1' });
    const b = t.startRequestSpan({ route: '/v1/messages', requestId: 'r2' });
    expect(a).toBe(b);
    expect(a.recording).toBe(false);
    const u1 = t.startUpstreamSpan(a, { model: 'm', upstream: 'u', serverAddress: 'h', provider: 'openai' });
    const u2 = t.startUpstreamSpan(b, { model: 'm', upstream: 'u', serverAddress: 'h', provider: 'openai' });
    expect(u1).toBe(u2);
    const headers: Record<string, string> = {};
    u1.injectHeaders(headers);
    expect(headers).toEqual({});
    a.end(200);
  });

  it('serverOf derives server.address and server.port from a base URL', () => {
    expect(serverOf('https://api.example.com/v1')).toEqual({ serverAddress: 'api.example.com', serverPort: 443 });
    expect(serverOf('http://127.0.0.1:8000/v1')).toEqual({ serverAddress: '127.0.0.1', serverPort: 8000 });
  });
});

describe('spans', () => {
  it('builds server span -> client span with GenAI attributes and propagates trace context upstream', async () => {
    const { tracing: t, exporter } = start();
    expect(t.enabled).toBe(true);
    const req = t.startRequestSpan({ route: '/v1/chat/completions', requestId: 'req-1', format: 'openai' });
    req.setRequest({ model: 'big-model', maxTokens: 512, stream: true });
    req.setReservation({ admitted: true });
    const up = t.startUpstreamSpan(req, {
      model: 'big-model',
      upstream: 'vllm-a',
      upstreamModel: 'org/big-model-awq',
      serverAddress: '127.0.0.1',
      serverPort: 8000,
      provider: 'openai',
      maxTokens: 512,
      stream: true,
    });
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    up.injectHeaders(headers);
    up.recordResponse({
      responseModel: 'org/big-model-awq',
      responseId: 'chatcmpl-1',
      inputTokens: 120,
      outputTokens: 34,
      cachedInputTokens: 100,
      reasoningTokens: 7,
      finishReasons: ['stop'],
      timeToFirstTokenMs: 250,
    });
    up.recordContent({ input: [{ role: 'user', content: 'secret prompt' }], output: 'secret answer' });
    up.end();
    req.setCost(1234);
    req.end(200);
    await t.forceFlush();

    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(2);
    const server = byName(spans, 'POST /v1/chat/completions');
    const client = byName(spans, 'chat org/big-model-awq');
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(client.kind).toBe(SpanKind.CLIENT);
    expect(client.spanContext().traceId).toBe(server.spanContext().traceId);
    expect(client.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    expect(server.parentSpanContext).toBeUndefined();
    expect(req.traceId).toBe(server.spanContext().traceId);

    expect(server.attributes).toMatchObject({
      'http.route': '/v1/chat/completions',
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'tollgate.request_id': 'req-1',
      'tollgate.format': 'openai',
      'tollgate.reservation': 'admitted',
      'tollgate.cost_micro_usd': 1234,
      'gen_ai.request.model': 'big-model',
      'gen_ai.request.max_tokens': 512,
    });
    expect(client.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.system': 'openai',
      'gen_ai.request.model': 'org/big-model-awq',
      'gen_ai.request.max_tokens': 512,
      'gen_ai.response.model': 'org/big-model-awq',
      'gen_ai.response.id': 'chatcmpl-1',
      'gen_ai.usage.input_tokens': 120,
      'gen_ai.usage.output_tokens': 34,
      'gen_ai.usage.cache_read.input_tokens': 100,
      'gen_ai.usage.reasoning.output_tokens': 7,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.response.time_to_first_chunk': 0.25,
      'server.address': '127.0.0.1',
      'server.port': 8000,
      'tollgate.model': 'big-model',
      'tollgate.upstream': 'vllm-a',
    });
    // Content is off by default: no prompt or completion text anywhere in the spans.
    expect(client.attributes['gen_ai.input.messages']).toBeUndefined();
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain('secret');

    // The upstream receives the client span's context, W3C format.
    const c = client.spanContext();
    expect(headers.traceparent).toBe(`00-${c.traceId}-${c.spanId}-01`);
    expect(headers['content-type']).toBe('application/json');
  });

  it("continues the client's trace from an incoming traceparent", async () => {
    const { tracing: t, exporter } = start();
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parentSpanId = '00f067aa0ba902b7';
    const req = t.startRequestSpan({
      route: '/v1/messages',
      requestId: 'req-2',
      method: 'POST',
      incomingHeaders: { traceparent: `00-${traceId}-${parentSpanId}-01`, host: 'gw' },
    });
    const up = t.startUpstreamSpan(req, { model: 'm', upstream: 'u', serverAddress: 'h', provider: 'anthropic' });
    up.end({ type: 'timeout', message: 'no first byte within 30000 ms' });
    req.end(504);
    await t.forceFlush();
    const spans = exporter.getFinishedSpans();
    const server = byName(spans, 'POST /v1/messages');
    const client = byName(spans, 'chat m');
    expect(server.spanContext().traceId).toBe(traceId);
    expect(server.parentSpanContext?.spanId).toBe(parentSpanId);
    expect(server.parentSpanContext?.isRemote).toBe(true);
    expect(client.spanContext().traceId).toBe(traceId);
    expect(client.status.code).toBe(SpanStatusCode.ERROR);
    expect(client.attributes['error.type']).toBe('timeout');
    expect(server.status.code).toBe(SpanStatusCode.ERROR);
    expect(server.attributes['error.type']).toBe('504');
  });

  it('a 4xx is not a server-span error; a refusal is recorded with its reason; end is idempotent', async () => {
    const { tracing: t, exporter } = start();
    const req = t.startRequestSpan({ route: '/v1/chat/completions', requestId: 'req-3' });
    req.setReservation({ admitted: false, reason: 'insufficient_balance' });
    req.end(402);
    req.end(500);
    await t.forceFlush();
    const [span] = exporter.getFinishedSpans();
    expect(exporter.getFinishedSpans()).toHaveLength(1);
    expect(span!.status.code).toBe(SpanStatusCode.UNSET);
    expect(span!.attributes['http.response.status_code']).toBe(402);
    expect(span!.attributes['tollgate.reservation']).toBe('refused:insufficient_balance');
  });

  it('records prompt and completion only when TOLLGATE_TRACE_CONTENT=on', async () => {
    const { tracing: t, exporter } = start({ TOLLGATE_TRACE_CONTENT: 'on' });
    expect(t.contentEnabled).toBe(true);
    const req = t.startRequestSpan({ route: '/v1/chat/completions', requestId: 'req-4' });
    const up = t.startUpstreamSpan(req, { model: 'm', upstream: 'u', serverAddress: 'h', provider: 'openai' });
    up.recordContent({ system: [{ type: 'text', content: 'be kind' }], input: [{ role: 'user', content: 'hello' }], output: [{ role: 'assistant', content: 'hi' }] });
    up.end();
    req.end(200);
    await t.forceFlush();
    const client = byName(exporter.getFinishedSpans(), 'chat m');
    expect(JSON.parse(client.attributes['gen_ai.system_instructions'] as string)).toEqual([{ type: 'text', content: 'be kind' }]);
    expect(JSON.parse(client.attributes['gen_ai.input.messages'] as string)).toEqual([{ role: 'user', content: 'hello' }]);
    expect(client.attributes['gen_ai.output.messages']).toContain('"hi"');
  });

  it('a server span started before routing is named by its method, then by the route template setRoute gives', async () => {
    const { tracing: t, exporter } = start();
    const routed = t.startRequestSpan({ requestId: 'req-6', method: 'GET' });
    routed.setRoute('/v1/models/:id');
    routed.end(200);
    const unknown = t.startRequestSpan({ requestId: 'req-7', method: 'POST' });
    unknown.setRoute('unmatched');
    unknown.end(404);
    const never = t.startRequestSpan({ requestId: 'req-8', method: 'DELETE' });
    never.end(500);
    await t.forceFlush();
    const spans = exporter.getFinishedSpans().map((s) => [s.name, s.attributes['http.route'], s.attributes['tollgate.request_id']]);
    expect(spans).toEqual([
      ['GET /v1/models/:id', '/v1/models/:id', 'req-6'],
      ['POST unmatched', 'unmatched', 'req-7'],
      ['DELETE', undefined, 'req-8'],
    ]);
  });

  it('honours OTEL_TRACES_SAMPLER', async () => {
    vi.stubEnv('OTEL_TRACES_SAMPLER', 'always_off');
    const { tracing: t, exporter } = start();
    const req = t.startRequestSpan({ route: '/v1/chat/completions', requestId: 'req-5' });
    const headers: Record<string, string> = {};
    t.startUpstreamSpan(req, { model: 'm', upstream: 'u', serverAddress: 'h', provider: 'openai' }).injectHeaders(headers);
    req.end(200);
    await t.forceFlush();
    expect(exporter.getFinishedSpans()).toHaveLength(0);
    // Not sampled, yet the trace context still goes upstream, flagged unsampled.
    expect(headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
  });

  it('a request the sampler drops records nothing and builds no upstream spans, yet passes its trace on', async () => {
    // The default sampler is parent-based: a client that did not sample decides for the whole trace.
    const { tracing: t, exporter } = start();
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const req = t.startRequestSpan({ route: '/v1/chat/completions', requestId: 'req-6', incomingHeaders: { traceparent: `00-${traceId}-b7ad6b7169203331-00` } });
    expect(req.recording).toBe(false);
    expect(req.traceId).toBe(traceId);
    const up = t.startUpstreamSpan(req, { model: 'm', upstream: 'u', serverAddress: 'h', provider: 'openai' });
    expect(up.recording).toBe(false);
    const headers: Record<string, string> = {};
    up.injectHeaders(headers);
    up.recordResponse({ inputTokens: 1, outputTokens: 2 });
    up.end();
    req.setCost(5);
    req.end(200);
    await t.forceFlush();
    expect(exporter.getFinishedSpans()).toHaveLength(0);
    expect(headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
  });
});
