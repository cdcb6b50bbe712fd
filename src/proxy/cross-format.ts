// Client and upstream speak different wire formats: the request, the reply and every stream event
// go through the translation layer (src/wire/translate), which uses one internal representation.
import { collectAnthropicContent } from './anthropic-pass-through.js';
import { collectOpenAIChoice } from './openai-pass-through.js';
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';
import type { TokenUsage } from '../billing/ledger.js';
import type { WireFormat } from '../wire/format.js';
import { isObject, type JsonObject } from '../wire/json-shape.js';
import {
  createStreamTranslator,
  TranslationError,
  translateRequest,
  translateResponse,
  type NormalizedUsage,
  type TranslationContext,
} from '../wire/translate/index.js';
import { GatewayError } from '../http/gateway-error.js';
import { ClientEventStream, SHUTDOWN_CUT_MESSAGE } from './client-stream.js';
import { emptyOutcome, unredacted, type Relay } from './relay.js';
import { pumpUpstreamEvents } from './upstream-events.js';

export interface CrossFormatRequest {
  clientFormat: WireFormat;
  body: JsonObject;
  stream: boolean;
  includeUsage: boolean;
  model: CatalogModel;
  requestId: string;
  /** anthropic-version / anthropic-beta as the client sent them. */
  clientHeaders: Record<string, string>;
  /** Our count of the prompt, for Anthropic message_start before the upstream reports usage. */
  estimateInputTokens: () => Promise<number>;
}

export interface CrossFormatPlan {
  /** The translated request for `upstream`, with exactly `outputLimit` as its output limit. */
  upstreamRequest(upstream: CatalogUpstream, outputLimit: number): JsonObject;
  upstreamBody(upstream: CatalogUpstream, outputLimit: number): string;
  upstreamHeaders(upstream: CatalogUpstream): Record<string, string>;
  relay(upstream: CatalogUpstream): Relay;
}

/** The usage to bill, or undefined for a report that cannot be billed by (the exchange estimates). */
export function billableUsage(u: NormalizedUsage): TokenUsage | undefined {
  return u.unbillable === true ? undefined : toTokenUsage(u);
}

export function toTokenUsage(u: NormalizedUsage): TokenUsage {
  return { input: u.input, output: u.output, cachedInput: Math.min(u.cachedInput, u.input), reasoning: Math.min(u.reasoning, u.output) };
}

const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

export function crossFormatPlan(req: CrossFormatRequest): CrossFormatPlan {
  const contextFor = (upstream: CatalogUpstream): TranslationContext => ({
    upstreamModel: upstream.upstreamModel,
    clientModel: req.model.id,
    supportsReasoning: req.model.supportsReasoning,
    defaultMaxOutputTokens: req.model.defaultMaxOutputTokens,
    requestId: req.requestId,
  });
  const upstreamRequest = (upstream: CatalogUpstream, outputLimit: number): JsonObject => {
    let translated: Record<string, unknown>;
    try {
      translated = translateRequest(req.body, req.clientFormat, upstream.format, contextFor(upstream));
    } catch (err) {
      if (err instanceof TranslationError) throw new GatewayError(err.status, err.message, { code: 'invalid_request', ...(err.param ? { param: err.param } : {}) });
      throw err;
    }
    // The upstream gets exactly the output limit the reservation covers (the client's, capped by the
    // context window, or the model's default), so it can never generate past what was held.
    if (upstream.format === 'openai' && translated.max_completion_tokens !== undefined) {
      translated.max_completion_tokens = outputLimit;
      delete translated.max_tokens;
    } else {
      translated.max_tokens = outputLimit;
    }
    return translated;
  };
  return {
    upstreamRequest,
    upstreamBody: (upstream, outputLimit) => JSON.stringify(upstreamRequest(upstream, outputLimit)),
    upstreamHeaders(upstream): Record<string, string> {
      if (upstream.format !== 'anthropic') return {};
      return { 'anthropic-version': req.clientHeaders['anthropic-version'] ?? DEFAULT_ANTHROPIC_VERSION };
    },
    relay(upstream): Relay {
      const ctxBase = contextFor(upstream);
      if (!req.stream) {
        return async ({ ctx, response }) => {
          const out = emptyOutcome('completed');
          const json: unknown = JSON.parse(await response.body.text());
          if (isObject(json) && typeof json.model === 'string') out.responseModel = json.model;
          const translated = translateResponse(json, upstream.format, req.clientFormat, ctxBase);
          out.usage = billableUsage(translated.usage);
          // Without usage to bill by, the charge is estimated from what the upstream generated.
          if (out.usage === undefined && isObject(json)) {
            if (upstream.format === 'anthropic') collectAnthropicContent(json, out);
            else if (Array.isArray(json.choices)) for (const c of json.choices) collectOpenAIChoice(c, out);
          }
          out.finishReason = translated.finishReason;
          if (isObject(translated.body) && req.clientFormat === 'openai') translated.body.id = `chatcmpl-${req.requestId}`;
          ctx.status = 200;
          ctx.type = 'application/json';
          ctx.body = translated.body;
          return out;
        };
      }
      return async ({ ctx, response, cancellation, redact = unredacted }) => {
        const out = emptyOutcome('completed');
        const inputTokenEstimate = req.clientFormat === 'anthropic' ? await req.estimateInputTokens() : 0;
        const translator = createStreamTranslator(upstream.format, req.clientFormat, { ...ctxBase, includeUsage: req.includeUsage, inputTokenEstimate });
        const client = new ClientEventStream(ctx.res, cancellation.writeTimeoutMs);
        ctx.respond = false;
        client.start();
        let pending = '';
        const cut = await pumpUpstreamEvents(response.body, client, {
          onEvent: (event) => {
            const text = translator.push({ ...(event.event === undefined ? {} : { event: event.event }), data: event.data });
            // Only an error event carries upstream text the gateway did not generate itself.
            pending += event.event === 'error' || event.data.includes('"error"') ? redact(text) : text;
          },
          drain: () => {
            const text = pending;
            pending = '';
            return text;
          },
          done: () => translator.state !== 'open',
          beforeWrite: () => {
            if (out.firstTokenAt === undefined && translator.emittedOutput) out.firstTokenAt = performance.now();
          },
        });
        out.generated = translator.generatedPieces();
        out.reasoningGenerated = translator.reasoningPieces();
        out.finishReason = translator.finishReason;
        if (translator.reportedInputTokens !== undefined) out.reportedInputTokens = translator.reportedInputTokens;
        if (translator.responseModel !== undefined) out.responseModel = translator.responseModel;
        if (cancellation.clientGone || !client.open) {
          out.status = 'client_cancelled';
          return out;
        }
        const truncated = translator.state === 'open' && translator.finishReason === undefined;
        if (translator.state === 'failed' || cut || truncated) {
          out.status = 'upstream_failed';
          const cutEvent = (): string =>
            cut && cancellation.cutByShutdown === true
              ? translator.fail(SHUTDOWN_CUT_MESSAGE, 'overloaded')
              : translator.fail('The upstream stream ended before the reply was complete; the output above is partial.', 'api_error');
          client.end(pending + (translator.state === 'failed' ? '' : cutEvent()));
          return out;
        }
        client.end(pending + translator.finish());
        // Only a complete stream's usage is final; a cut one is billed from what was generated.
        if (translator.usageReported) out.usage = billableUsage(translator.usage);
        return out;
      };
    },
  };
}
