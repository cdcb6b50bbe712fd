// Feeds what the exchange reports into Prometheus metrics and the request's trace.
import type { GatewayMetrics, UpstreamErrorClass } from '../telemetry/metrics.js';
import type { Tracing } from '../telemetry/tracing.js';
import { inputContent, outputContent, replyContent } from '../telemetry/genai-content.js';
import type { ExchangeObserver, UpstreamCallObservation } from './observer.js';
import type { UpstreamFailure } from '../upstream/upstream-request.js';

function errorClass(f: UpstreamFailure): UpstreamErrorClass {
  if (f.kind === 'timeout') return 'timeout';
  if (f.kind === 'connect' || f.kind === 'aborted') return 'connect';
  return (f.upstreamStatus ?? 500) >= 500 ? '5xx' : '4xx';
}

export function telemetryObserver(metrics: GatewayMetrics, tracing: Tracing): ExchangeObserver {
  return {
    async timeLedger(op, fn) {
      const t0 = performance.now();
      try {
        const result = await fn();
        metrics.ledgerCall(op, performance.now() - t0);
        return result;
      } catch (err) {
        metrics.ledgerCall(op, performance.now() - t0, true);
        throw err;
      }
    },
    reservation(ctx, outcome) {
      const result = outcome === 'admitted' ? ({ admitted: true } as const) : ({ admitted: false, reason: outcome } as const);
      metrics.reservation(result);
      ctx.state.span?.setReservation(result);
    },
    upstreamStarted(ctx, model, upstream, host, port, maxTokens, stream): UpstreamCallObservation {
      // The same on every attempt; set here because only the exchange knows the output limit it reserved.
      ctx.state.span?.setRequest({ maxTokens, stream });
      const span = ctx.state.span
        ? tracing.startUpstreamSpan(ctx.state.span, {
            model: model.id,
            upstream: upstream.name,
            upstreamModel: upstream.upstreamModel,
            serverAddress: host,
            serverPort: port,
            operation: 'chat',
            provider: upstream.format,
            maxTokens,
            stream,
          })
        : undefined;
      // Content only when asked for: with it off the client's body is not even read.
      if (span !== undefined && tracing.contentEnabled) span.recordContent(inputContent(ctx.state.format, ctx.state.body));
      const t0 = performance.now();
      let streaming = false;
      return {
        injectTraceHeaders(headers) {
          span?.injectHeaders(headers);
        },
        failed(failure) {
          // Timed like a finished call, so the duration histogram's count is the number of calls.
          metrics.upstreamFinished(model.id, upstream.name, performance.now() - t0);
          if (failure.kind !== 'aborted') metrics.upstreamError(model.id, upstream.name, errorClass(failure));
          span?.end({ type: errorClass(failure), message: failure.message });
        },
        finished(outcome) {
          if (streaming) metrics.streamClosed();
          const ttft = outcome.firstTokenAt === undefined ? undefined : outcome.firstTokenAt - t0;
          metrics.upstreamFinished(model.id, upstream.name, performance.now() - t0, ttft);
          // A reply the drain bound ended is no fault of the upstream's (status shutdown_cut); one the
          // request deadline ended is the upstream's slowness.
          const upstreamCut = outcome.status === 'upstream_failed';
          if (upstreamCut) metrics.upstreamError(model.id, upstream.name, 'stream_cut');
          if (outcome.status === 'timed_out') metrics.upstreamError(model.id, upstream.name, 'timeout');
          if (span) {
            span.recordResponse({
              // What the upstream said answered; its catalog name when it did not say.
              responseModel: outcome.responseModel ?? upstream.upstreamModel,
              ...(outcome.usage
                ? {
                    inputTokens: outcome.usage.input,
                    outputTokens: outcome.usage.output,
                    cachedInputTokens: outcome.usage.cachedInput,
                    cacheCreationInputTokens: (outcome.usage.cacheWrite5m ?? 0) + (outcome.usage.cacheWrite1h ?? 0),
                    reasoningTokens: outcome.usage.reasoning,
                  }
                : {}),
              ...(outcome.finishReason ? { finishReasons: [outcome.finishReason] } : {}),
              ...(ttft === undefined ? {} : { timeToFirstTokenMs: ttft }),
            });
            if (tracing.contentEnabled) {
              // A whole reply is read back from the body the client gets, parts and all; a stream from its pieces.
              const reply = streaming ? undefined : replyContent(ctx.state.format, ctx.body);
              span.recordContent({ output: reply ?? outputContent(outcome) });
            }
            span.end(outcome.status === 'shutdown_cut' ? { type: 'shutdown_cut' } : outcome.status === 'timed_out' ? { type: 'timeout' } : upstreamCut ? { type: 'stream_cut' } : undefined);
          }
        },
        relayStarted(stream) {
          streaming = stream;
          if (stream) metrics.streamOpened();
        },
      };
    },
    settled(ctx, model, _upstream, usage, charged) {
      metrics.tokens(model.id, usage);
      metrics.cost(model.id, charged);
      ctx.state.span?.setCost(charged);
    },
  };
}
