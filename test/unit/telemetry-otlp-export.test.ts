// Export through a real OTLP/HTTP receiver on loopback: proves that OTEL_EXPORTER_OTLP_ENDPOINT and
// the protocol variable are honoured and that spans leave the process with their GenAI attributes.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { initTracing } from '../../src/telemetry/tracing.js';
import { startOtlpReceiver, type OtlpAttribute, type OtlpBody, type OtlpReceiver, type OtlpSpan } from '../helpers/otlp-receiver.js';

let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  vi.unstubAllEnvs();
  await receiver?.close();
  receiver = undefined;
});

const attr = (attrs: OtlpAttribute[], key: string): unknown => {
  const v = attrs.find((a) => a.key === key)?.value;
  return v?.stringValue ?? v?.intValue ?? v?.arrayValue;
};

describe('OTLP/HTTP export', () => {
  it('sends the span tree as OTLP JSON to OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces', async () => {
    receiver = await startOtlpReceiver();
    const { port, received } = receiver;
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', `http://127.0.0.1:${port}`);
    vi.stubEnv('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'http/json');
    vi.stubEnv('OTEL_SERVICE_NAME', 'tollgate-test');
    vi.stubEnv('OTEL_EXPORTER_OTLP_HEADERS', 'x-collector-token=abc');
    const tracing = initTracing();
    expect(tracing.enabled).toBe(true);

    const req = tracing.startRequestSpan({ route: '/v1/chat/completions', requestId: 'req-otlp' });
    const up = tracing.startUpstreamSpan(req, {
      model: 'm1',
      upstream: 'sim',
      serverAddress: '127.0.0.1',
      serverPort: 9999,
      provider: 'openai',
    });
    const headers: Record<string, string> = {};
    up.injectHeaders(headers);
    up.recordResponse({ inputTokens: 11, outputTokens: 22, finishReasons: ['stop'] });
    up.end();
    req.end(200);
    await tracing.shutdown(); // flushes the batch processor

    expect(received.length).toBeGreaterThanOrEqual(1);
    const first = received[0]!;
    expect(first.method).toBe('POST');
    expect(first.url).toBe('/v1/traces');
    expect(first.headers['content-type']).toMatch(/^application\/json/);
    expect(first.headers['x-collector-token']).toBe('abc');

    const spans: OtlpSpan[] = [];
    let serviceName: unknown;
    for (const r of received) {
      const body = JSON.parse(r.body) as OtlpBody;
      for (const rs of body.resourceSpans) {
        serviceName = attr(rs.resource.attributes, 'service.name');
        for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      }
    }
    expect(serviceName).toBe('tollgate-test');
    const server_ = spans.find((s) => s.name === 'POST /v1/chat/completions');
    const client = spans.find((s) => s.name === 'chat m1');
    expect(server_).toBeDefined();
    expect(client).toBeDefined();
    expect(client!.traceId).toBe(server_!.traceId);
    expect(client!.parentSpanId).toBe(server_!.spanId);
    expect(headers.traceparent).toBe(`00-${client!.traceId}-${client!.spanId}-01`);
    expect(attr(client!.attributes, 'gen_ai.provider.name')).toBe('openai');
    expect(Number(attr(client!.attributes, 'gen_ai.usage.output_tokens'))).toBe(22);
    expect(attr(server_!.attributes, 'tollgate.request_id')).toBe('req-otlp');
  });
});
