// The cross-format pairs' engine: the client's request decoded into the internal representation
// (src/translate/internal) and encoded for the upstream's format; the reply, whole or streamed, decoded from
// the upstream's format and encoded for the client's. Same-format pairs never come here.
import { upstreamFormat } from '../upstream/formats/index.js';
import { collectAnthropicContent } from '../relay/anthropic-relay.js';
import { collectOpenAIChoice } from '../relay/openai-relay.js';
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';
import type { WireFormat } from '../wire/format.js';
import { isObject, type JsonObject } from '../wire/json-shape.js';
import {
  createStreamTranslator,
  encodeRequest,
  StreamTranslator,
  TranslationError,
  translateRequest,
  translateResponse,
  type InternalRequest,
  type NormalizedUsage,
  type TranslationContext,
} from './internal/index.js';
import type { ClientFormat } from '../wire/format.js';
import { decodeAnthropicResponse } from './internal/anthropic-response.js';
import { decodeOpenAIResponse } from './internal/openai-response.js';
import { AnthropicStreamDecoder } from './internal/anthropic-stream-decoder.js';
import { OpenAIStreamDecoder } from './internal/openai-stream-decoder.js';
import { encodeResponsesResponse, ResponsesStreamEncoder, type ResponseResult, type ResponsesEncodeContext } from './internal/responses-response.js';
import { GatewayError } from '../http/gateway-error.js';
import { ClientEventStream, SHUTDOWN_CUT_MESSAGE } from '../relay/client-stream.js';
import { emptyOutcome, unredacted, type Relay, type RelayOutcome } from '../relay/relay.js';
import { pumpUpstreamEvents } from '../relay/upstream-events.js';
import { serialised, type FormatPair } from './pair.js';
import { billableUsage } from './internal/usage.js';

export interface CrossFormatRequest {
  clientFormat: ClientFormat;
  upstreamFormat: WireFormat;
  /** The client's body (chat completions, messages); the Responses API gives `internal` instead. */
  body?: JsonObject;
  /** The request already decoded (the Responses API, whose prior items were resolved first). */
  internal?: InternalRequest;
  /** A Responses API client: how its replies are encoded, and what to do with the final response. */
  responses?: { ctx: ResponsesEncodeContext; onFinal(result: ResponseResult): Promise<void> };
  stream: boolean;
  includeUsage: boolean;
  model: CatalogModel;
  requestId: string;
  /** Our count of the prompt, for Anthropic message_start before the upstream reports usage. */
  estimateInputTokens: () => Promise<number>;
}

export function viaInternal(req: CrossFormatRequest): FormatPair {
  const contextFor = (upstream: CatalogUpstream): TranslationContext => ({
    upstreamModel: upstream.upstreamModel,
    clientModel: req.model.id,
    supportsReasoning: req.model.supportsReasoning,
    defaultMaxOutputTokens: req.model.defaultMaxOutputTokens,
    requestId: req.requestId,
  });
  const request = (upstream: CatalogUpstream, outputLimit: number): JsonObject => {
    let translated: Record<string, unknown>;
    try {
      translated =
        req.internal !== undefined
          ? encodeRequest(req.internal, upstream.format, contextFor(upstream))
          : translateRequest(req.body, req.clientFormat as WireFormat, upstream.format, contextFor(upstream));
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
    request: (upstream, outputLimit) => serialised(request(upstream, outputLimit)),
    // The client speaks another format: its own protocol headers are not this upstream's.
    headers: () => upstreamFormat(req.upstreamFormat).protocolHeaders(),
    relay(upstream): Relay {
      const ctxBase = contextFor(upstream);
      if (req.responses !== undefined) return responsesRelay(req, upstream, req.responses);
      if (!req.stream) {
        return async ({ ctx, response }) => {
          const { out, json } = await upstreamReply(response);
          const translated = translateResponse(json, upstream.format, req.clientFormat as WireFormat, ctxBase);
          billFrom(out, translated.usage, json, upstream);
          out.finishReason = translated.finishReason;
          if (isObject(translated.body) && req.clientFormat === 'openai') translated.body.id = `chatcmpl-${req.requestId}`;
          ctx.status = 200;
          ctx.type = 'application/json';
          ctx.body = translated.body;
          return out;
        };
      }
      return async (args) => {
        const inputTokenEstimate = req.clientFormat === 'anthropic' ? await req.estimateInputTokens() : 0;
        const translator = createStreamTranslator(upstream.format, req.clientFormat as WireFormat, { ...ctxBase, includeUsage: req.includeUsage, inputTokenEstimate });
        return pumpTranslated(translator, '', args);
      };
    },
  };
}

/** An upstream's non-stream reply, parsed, with the model it reports. */
async function upstreamReply(response: Parameters<Relay>[0]['response']): Promise<{ out: RelayOutcome; json: unknown }> {
  const out = emptyOutcome('completed');
  const json: unknown = JSON.parse(await response.body.text());
  if (isObject(json) && typeof json.model === 'string') out.responseModel = json.model;
  return { out, json };
}

/** The usage to bill, or, without a billable report, what the upstream generated (the exchange estimates from it). */
function billFrom(out: RelayOutcome, usage: NormalizedUsage, json: unknown, upstream: CatalogUpstream): void {
  out.usage = billableUsage(usage);
  if (out.usage !== undefined || !isObject(json)) return;
  if (upstream.format === 'anthropic') collectAnthropicContent(json, out);
  else if (Array.isArray(json.choices)) for (const c of json.choices) collectOpenAIChoice(c, out);
}

/** A translated stream from the upstream to the client, with the bookkeeping billing needs. */
async function pumpTranslated(
  translator: StreamTranslator,
  opening: string,
  { ctx, response, cancellation, redact = unredacted }: Parameters<Relay>[0],
  /** Runs after the final events are built and before they are written (a response is stored first). */
  beforeEnd: () => Promise<void> = async () => undefined,
): Promise<RelayOutcome> {
    const out = emptyOutcome('completed');
    const client = new ClientEventStream(ctx.res, cancellation.writeTimeoutMs, cancellation.keepAliveMs);
    ctx.respond = false;
    client.start();
    let pending = opening;
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
    const ending = translator.finish();
    await beforeEnd();
    client.end(pending + ending);
    // Only a complete stream's usage is final; a cut one is billed from what was generated.
    if (translator.usageReported) out.usage = billableUsage(translator.usage);
    return out;
}

/** The Responses API's client: replies built by its encoders, the final response handed to onFinal. */
function responsesRelay(req: CrossFormatRequest, upstream: CatalogUpstream, responses: NonNullable<CrossFormatRequest['responses']>): Relay {
  if (!req.stream) {
    return async ({ ctx, response }) => {
      const { out, json } = await upstreamReply(response);
      const r = upstream.format === 'anthropic' ? decodeAnthropicResponse(json) : decodeOpenAIResponse(json);
      billFrom(out, r.usage, json, upstream);
      const result = encodeResponsesResponse(r, responses.ctx);
      out.finishReason = String(result.body.status);
      // Stored before the client has it, so an immediate follow-up (previous_response_id) finds it.
      await responses.onFinal(result);
      ctx.status = 200;
      ctx.type = 'application/json';
      ctx.body = result.body;
      return out;
    };
  }
  return async (args) => {
    const encoder = new ResponsesStreamEncoder(responses.ctx);
    const decoder = upstream.format === 'anthropic' ? new AnthropicStreamDecoder() : new OpenAIStreamDecoder();
    const translator = new StreamTranslator(decoder, encoder, (r) => r);
    // response.created goes out at once, before the upstream's first byte, so clients see progress.
    return pumpTranslated(translator, encoder.begin(), args, async () => {
      if (encoder.final !== undefined) await responses.onFinal(encoder.final);
    });
  };
}
