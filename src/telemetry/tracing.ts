// OpenTelemetry tracing of the gateway: a server span per client request and a client span per
// upstream call, with the GenAI semantic conventions (gen_ai.*), W3C trace context taken from the
// client and passed on to the upstream.
//
// Off by default. On when TOLLGATE_TRACING=on, or when OTEL_TRACES_EXPORTER (other than `none`) or an
// OTLP endpoint variable is set; TOLLGATE_TRACING=off or OTEL_SDK_DISABLED=true force it off. Exporter,
// endpoint, protocol, headers, sampler and resource come from the standard OTEL_* variables, read by
// @opentelemetry/sdk-node. When off, every call returns a shared no-op handle: no span, no allocation.
//
// Contexts are passed explicitly (the request handle carries its context) instead of relying on an
// async context manager, so the gateway's span tree does not depend on how its promises are chained.
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context as contextApi,
  defaultTextMapGetter,
  defaultTextMapSetter,
  propagation,
  trace,
} from '@opentelemetry/api';
import type { Attributes, AttributeValue, Context, Span, TextMapPropagator, Tracer } from '@opentelemetry/api';
import type * as Core from '@opentelemetry/core';
import { createRequire } from 'node:module';
import type * as SdkNode from '@opentelemetry/sdk-node';
import type { NodeSDK } from '@opentelemetry/sdk-node';
import type { Sampler, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ClientFormatName } from '../formats/index.js';
import type { Micros } from '../catalog/snapshot.js';
import type { RefusalReason } from '../billing/ledger.js';
import { boundField, MAX_REQUEST_FIELD_CHARS } from './logger.js';

export type Env = Readonly<Record<string, string | undefined>>;

/** Attribute names (GenAI semantic conventions, plus ours under `tollgate.`). */
export const ATTR = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  /** Deprecated in favour of gen_ai.provider.name; still read by many backends, so both are set. */
  system: 'gen_ai.system',
  requestModel: 'gen_ai.request.model',
  requestMaxTokens: 'gen_ai.request.max_tokens',
  requestStream: 'gen_ai.request.stream',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  responseFinishReasons: 'gen_ai.response.finish_reasons',
  responseTimeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  usageInputTokens: 'gen_ai.usage.input_tokens',
  usageOutputTokens: 'gen_ai.usage.output_tokens',
  usageCacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  usageCacheCreationInputTokens: 'gen_ai.usage.cache_creation.input_tokens',
  usageReasoningOutputTokens: 'gen_ai.usage.reasoning.output_tokens',
  systemInstructions: 'gen_ai.system_instructions',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  errorType: 'error.type',
  httpMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpStatus: 'http.response.status_code',
  requestId: 'tollgate.request_id',
  format: 'tollgate.format',
  model: 'tollgate.model',
  upstream: 'tollgate.upstream',
  costMicroUsd: 'tollgate.cost_micro_usd',
  reservation: 'tollgate.reservation',
} as const;

export type IncomingHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface RequestSpanInfo {
  /**
   * Route template, e.g. `/v1/chat/completions` (never the raw URL), when known at the start; else the
   * span is named by the method alone until `setRoute`.
   */
  route?: string;
  requestId: string;
  /** The client's headers; a W3C `traceparent` there becomes the parent of the request span. */
  incomingHeaders?: IncomingHeaders;
  method?: string;
  format?: ClientFormatName;
}

export interface RequestDetails {
  /** The model id the client asked for. */
  model?: string;
  maxTokens?: number;
  stream?: boolean;
}

export interface SpanError {
  /** Low-cardinality class, e.g. `timeout`, `5xx`, `stream_cut`, `insufficient_balance`. */
  type: string;
  /** Must never carry a secret. */
  message?: string;
}

export interface RequestSpan {
  readonly recording: boolean;
  /** The span's context, parent of the upstream spans (ROOT_CONTEXT when tracing is off). */
  readonly context: Context;
  /** Trace id for log correlation; undefined when tracing is off. */
  readonly traceId: string | undefined;
  setAttributes(attributes: Attributes): void;
  setRequest(details: RequestDetails): void;
  setReservation(result: { admitted: true } | { admitted: false; reason: RefusalReason }): void;
  setCost(micros: Micros): void;
  /** The route template the request matched (or `unmatched`): names the span `<method> <route>`. */
  setRoute(route: string): void;
  /** Ends the span with the HTTP status sent; 5xx (or an error) marks it failed. Later calls are ignored. */
  end(status: number, error?: SpanError): void;
}

export interface UpstreamSpanInfo {
  /** Catalog model id. */
  model: string;
  /** Upstream name within the model. */
  upstream: string;
  /** The model name sent upstream (gen_ai.request.model); defaults to `model`. */
  upstreamModel?: string;
  serverAddress: string;
  serverPort?: number;
  operation?: 'chat';
  /** gen_ai.provider.name, e.g. `openai`, `anthropic`, or the serving software (`vllm`). */
  provider: string;
  maxTokens?: number;
  stream?: boolean;
}

export interface UpstreamResponse {
  responseModel?: string;
  responseId?: string;
  inputTokens?: number;
  outputTokens?: number;
  cachedInputTokens?: number;
  /** Prompt tokens written to a cache, whatever its lifetime. */
  cacheCreationInputTokens?: number;
  reasoningTokens?: number;
  finishReasons?: readonly string[];
  timeToFirstTokenMs?: number;
}

export interface UpstreamSpan {
  readonly recording: boolean;
  /** Writes `traceparent` (and `tracestate`) for this span into the upstream request's headers. */
  injectHeaders(headers: Record<string, string>): void;
  recordResponse(response: UpstreamResponse): void;
  /**
   * Prompt and completion (gen_ai.system_instructions, gen_ai.input.messages, gen_ai.output.messages,
   * as JSON), only when TOLLGATE_TRACE_CONTENT=on (else ignored). Check `tracing.contentEnabled`
   * before building them.
   */
  recordContent(content: GenAIContent): void;
  end(error?: SpanError | Error): void;
}

/** Content in the GenAI conventions' message shapes (see genai-content.ts). */
export interface GenAIContent {
  system?: unknown;
  input?: unknown;
  output?: unknown;
}

export interface Tracing {
  readonly enabled: boolean;
  readonly contentEnabled: boolean;
  startRequestSpan(info: RequestSpanInfo): RequestSpan;
  startUpstreamSpan(parent: RequestSpan, info: UpstreamSpanInfo): UpstreamSpan;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** Variables deciding whether tracing is on (default process.env). The SDK itself reads process.env. */
  env?: Env;
  /** Span processors to use instead of the OTEL_* exporters (tests pass an in-memory exporter). Turns tracing on. */
  spanProcessors?: SpanProcessor[];
  /** Sampler instead of OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG. */
  sampler?: Sampler;
  /** service.name when OTEL_SERVICE_NAME is not set. */
  serviceName?: string;
}

const isOn = (v: string | undefined): boolean => v !== undefined && /^(on|true|1|yes)$/i.test(v.trim());
const isOff = (v: string | undefined): boolean => v !== undefined && /^(off|false|0|no)$/i.test(v.trim());

/** Whether the environment asks for tracing (see the file comment). */
export function tracingRequested(env: Env): boolean {
  if (isOn(env.OTEL_SDK_DISABLED) || isOff(env.TOLLGATE_TRACING)) return false;
  if (isOn(env.TOLLGATE_TRACING)) return true;
  const exporters = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporters && exporters !== 'none') return true;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/** server.address and server.port of an upstream base URL; compute once per catalog snapshot. */
export function serverOf(baseUrl: string): { serverAddress: string; serverPort: number } {
  const url = new URL(baseUrl);
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  return { serverAddress: url.hostname, serverPort: port };
}

const NOOP_REQUEST_SPAN: RequestSpan = Object.freeze({
  recording: false,
  context: ROOT_CONTEXT,
  traceId: undefined,
  setAttributes() {},
  setRequest() {},
  setReservation() {},
  setCost() {},
  setRoute() {},
  end() {},
});

const NOOP_UPSTREAM_SPAN: UpstreamSpan = Object.freeze({
  recording: false,
  injectHeaders() {},
  recordResponse() {},
  recordContent() {},
  end() {},
});

/** Tracing that records nothing; what `initTracing` returns when tracing is off. */
export const DISABLED_TRACING: Tracing = Object.freeze({
  enabled: false,
  contentEnabled: false,
  startRequestSpan: () => NOOP_REQUEST_SPAN,
  startUpstreamSpan: () => NOOP_UPSTREAM_SPAN,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});

/**
 * W3C trace context in and out of headers, set by initTracing when tracing is on (only live spans use
 * it): @opentelemetry/core, about 2 MB of heap, is then loaded with the SDK, never with tracing off.
 */
let w3c: TextMapPropagator;

class LiveRequestSpan implements RequestSpan {
  readonly recording = true;
  readonly context: Context;
  private ended = false;

  constructor(
    readonly span: Span,
    parent: Context,
    private readonly method: string,
  ) {
    this.context = trace.setSpan(parent, span);
  }

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  setAttributes(attributes: Attributes): void {
    this.span.setAttributes(attributes);
  }

  setRequest(details: RequestDetails): void {
    // Bounded: the client's model name may be anything (a megabyte of it was sent in testing).
    if (details.model !== undefined) this.span.setAttribute(ATTR.requestModel, boundField(details.model, MAX_REQUEST_FIELD_CHARS));
    if (details.maxTokens !== undefined) this.span.setAttribute(ATTR.requestMaxTokens, details.maxTokens);
    if (details.stream !== undefined) this.span.setAttribute(ATTR.requestStream, details.stream);
  }

  setReservation(result: { admitted: true } | { admitted: false; reason: RefusalReason }): void {
    this.span.setAttribute(ATTR.reservation, result.admitted ? 'admitted' : `refused:${result.reason}`);
  }

  setCost(micros: Micros): void {
    this.span.setAttribute(ATTR.costMicroUsd, micros);
  }

  setRoute(route: string): void {
    this.span.setAttribute(ATTR.httpRoute, route);
    this.span.updateName(`${this.method} ${route}`);
  }

  end(status: number, error?: SpanError): void {
    if (this.ended) return;
    this.ended = true;
    this.span.setAttribute(ATTR.httpStatus, status);
    if (status >= 500 || error !== undefined) this.span.setAttribute(ATTR.errorType, error?.type ?? String(status));
    // Server spans: a 4xx (a refusal, a bad request) is the client's doing and not a span error, even
    // with its error.type (HTTP semantic conventions); an error under a 2xx/3xx already sent is.
    if (status >= 500 || (error !== undefined && status < 400)) {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: error?.message });
    }
    this.span.end();
  }
}

/**
 * A request the sampler dropped: nothing is recorded, but its context still carries the (unsampled)
 * trace to the upstream, so a collector downstream sees the same decision. Its upstream calls get an
 * `UnsampledUpstreamSpan` instead of SDK spans of their own: with a sampler of 0 the per-request cost
 * is one sampling decision, not two spans, their attributes and wrappers.
 */
class UnsampledRequestSpan implements RequestSpan {
  readonly recording = false;
  readonly context: Context;

  constructor(private readonly span: Span, parent: Context) {
    this.context = trace.setSpan(parent, span);
  }

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  setAttributes(): void {}
  setRequest(): void {}
  setReservation(): void {}
  setCost(): void {}
  setRoute(): void {}
  end(): void {}
}

class UnsampledUpstreamSpan implements UpstreamSpan {
  readonly recording = false;

  constructor(private readonly parent: Context) {}

  injectHeaders(headers: Record<string, string>): void {
    w3c.inject(this.parent, headers, defaultTextMapSetter);
  }

  recordResponse(): void {}
  recordContent(): void {}
  end(): void {}
}

class LiveUpstreamSpan implements UpstreamSpan {
  readonly recording = true;
  private ended = false;

  constructor(
    private readonly span: Span,
    private readonly contentEnabled: boolean,
  ) {}

  injectHeaders(headers: Record<string, string>): void {
    w3c.inject(trace.setSpan(ROOT_CONTEXT, this.span), headers, defaultTextMapSetter);
  }

  recordResponse(r: UpstreamResponse): void {
    const s = this.span;
    if (r.responseModel !== undefined) s.setAttribute(ATTR.responseModel, r.responseModel);
    if (r.responseId !== undefined) s.setAttribute(ATTR.responseId, r.responseId);
    if (r.inputTokens !== undefined) s.setAttribute(ATTR.usageInputTokens, r.inputTokens);
    if (r.outputTokens !== undefined) s.setAttribute(ATTR.usageOutputTokens, r.outputTokens);
    if (r.cachedInputTokens !== undefined) s.setAttribute(ATTR.usageCacheReadInputTokens, r.cachedInputTokens);
    if (r.cacheCreationInputTokens !== undefined) s.setAttribute(ATTR.usageCacheCreationInputTokens, r.cacheCreationInputTokens);
    if (r.reasoningTokens !== undefined) s.setAttribute(ATTR.usageReasoningOutputTokens, r.reasoningTokens);
    if (r.finishReasons !== undefined) s.setAttribute(ATTR.responseFinishReasons, r.finishReasons as AttributeValue);
    if (r.timeToFirstTokenMs !== undefined) s.setAttribute(ATTR.responseTimeToFirstChunk, r.timeToFirstTokenMs / 1000);
  }

  recordContent(content: GenAIContent): void {
    if (!this.contentEnabled) return;
    if (content.system !== undefined) this.span.setAttribute(ATTR.systemInstructions, JSON.stringify(content.system));
    if (content.input !== undefined) this.span.setAttribute(ATTR.inputMessages, JSON.stringify(content.input));
    if (content.output !== undefined) this.span.setAttribute(ATTR.outputMessages, JSON.stringify(content.output));
  }

  end(error?: SpanError | Error): void {
    if (this.ended) return;
    this.ended = true;
    if (error !== undefined) {
      const type = error instanceof Error ? error.name : error.type;
      this.span.setAttribute(ATTR.errorType, type);
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    }
    this.span.end();
  }
}

class LiveTracing implements Tracing {
  readonly enabled = true;
  private readonly tracer: Tracer;

  constructor(
    private readonly sdk: NodeSDK,
    readonly contentEnabled: boolean,
  ) {
    this.tracer = trace.getTracer('tollgate');
  }

  startRequestSpan(info: RequestSpanInfo): RequestSpan {
    const parent = info.incomingHeaders
      ? w3c.extract(ROOT_CONTEXT, info.incomingHeaders, defaultTextMapGetter)
      : ROOT_CONTEXT;
    const method = info.method ?? 'POST';
    const attributes: Attributes = {
      [ATTR.httpMethod]: method,
      [ATTR.requestId]: info.requestId,
    };
    if (info.route !== undefined) attributes[ATTR.httpRoute] = info.route;
    if (info.format !== undefined) attributes[ATTR.format] = info.format;
    // HTTP conventions: `<method> <route>`, or the method alone while the route is not known.
    const name = info.route === undefined ? method : `${method} ${info.route}`;
    const span = this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    return span.isRecording() ? new LiveRequestSpan(span, parent, method) : new UnsampledRequestSpan(span, parent);
  }

  startUpstreamSpan(parent: RequestSpan, info: UpstreamSpanInfo): UpstreamSpan {
    // Under a dropped request nothing is recorded (parent-based and ratio samplers decide the same way
    // for the whole trace); the upstream still gets the trace context.
    if (!parent.recording) return new UnsampledUpstreamSpan(parent.context);
    const operation = info.operation ?? 'chat';
    const requestModel = info.upstreamModel ?? info.model;
    const attributes: Attributes = {
      [ATTR.operationName]: operation,
      [ATTR.providerName]: info.provider,
      [ATTR.system]: info.provider,
      [ATTR.requestModel]: requestModel,
      [ATTR.serverAddress]: info.serverAddress,
      [ATTR.model]: info.model,
      [ATTR.upstream]: info.upstream,
    };
    if (info.serverPort !== undefined) attributes[ATTR.serverPort] = info.serverPort;
    if (info.maxTokens !== undefined) attributes[ATTR.requestMaxTokens] = info.maxTokens;
    if (info.stream !== undefined) attributes[ATTR.requestStream] = info.stream;
    const span = this.tracer.startSpan(
      `${operation} ${requestModel}`,
      { kind: SpanKind.CLIENT, attributes },
      parent.context,
    );
    return new LiveUpstreamSpan(span, this.contentEnabled);
  }

  async forceFlush(): Promise<void> {
    const provider = trace.getTracerProvider() as { getDelegate?: () => unknown };
    const delegate = provider.getDelegate?.() as { forceFlush?: () => Promise<void> } | undefined;
    await delegate?.forceFlush?.();
  }

  async shutdown(): Promise<void> {
    await this.sdk.shutdown();
    // Unregister the globals so a later initTracing (tests, a restart in-process) can register again.
    trace.disable();
    propagation.disable();
    contextApi.disable();
  }
}

/**
 * Starts tracing when the environment (or `spanProcessors`) asks for it; else returns DISABLED_TRACING.
 * Call once at startup and `shutdown()` on exit (it flushes spans still queued).
 */
// The OpenTelemetry SDK (tens of megabytes of modules) is loaded only when tracing is on: a gateway with
// tracing off never has it in memory. Loaded synchronously (its CommonJS build), so initTracing stays sync.
const loadSdk = (): typeof SdkNode => createRequire(import.meta.url)('@opentelemetry/sdk-node') as typeof SdkNode;

export function initTracing(options: TracingOptions = {}): Tracing {
  const env = options.env ?? process.env;
  if (!options.spanProcessors && !tracingRequested(env)) return DISABLED_TRACING;
  const { NodeSDK: Sdk } = loadSdk();
  w3c ??= new (createRequire(import.meta.url)('@opentelemetry/core') as typeof Core).W3CTraceContextPropagator();
  const sdk = new Sdk({
    serviceName: env.OTEL_SERVICE_NAME ? undefined : (options.serviceName ?? 'tollgate-gateway'),
    ...(options.spanProcessors ? { spanProcessors: options.spanProcessors } : {}),
    ...(options.sampler ? { sampler: options.sampler } : {}),
    // No global context manager: the gateway hands span contexts down explicitly (a request span to its
    // upstream spans), so nothing reads the active context. The default AsyncLocalStorage manager turns
    // on async hooks for every promise in the process, which cost ~18% of requests/s even with a
    // sampler of 0 (the benchmark's tracing rows). `null` is sdk-node's documented "do not register".
    contextManager: null as unknown as undefined,
    // Traces only: no log or metric pipelines (metrics go to Prometheus), no auto-instrumentation.
    logRecordProcessors: [],
    metricReaders: [],
    instrumentations: [],
  });
  sdk.start();
  return new LiveTracing(sdk, isOn(env.TOLLGATE_TRACE_CONTENT));
}
