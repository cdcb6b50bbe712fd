// The cross-format pairs' engine: the client's request decoded into the internal representation
// (src/translate/representation) and encoded for the upstream's format; the reply, whole or streamed,
// decoded from the upstream's format and encoded for the client's, each by its format's codecs
// (src/formats). Same-format pairs never come here.
import { clientFormat, upstreamFormat, type ClientFormatName, type UpstreamFormatName } from '../formats/index.js';
import { encodeResponsesResponse, ResponsesStreamEncoder, type ResponseResult, type ResponsesEncodeContext } from '../formats/openai-responses/index.js';
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';
import { GatewayError } from '../request/gateway-error.js';
import { ClientEventStream, SHUTDOWN_CUT_MESSAGE } from '../relay/client-stream.js';
import { emptyOutcome, unredacted, type Relay, type RelayOutcome } from '../relay/relay.js';
import { pumpUpstreamEvents } from '../relay/upstream-events.js';
import { billableUsage } from '../relay/billable-usage.js';
import { isRecord, TranslationError, type InternalRequest, type JsonObject, type NormalizedUsage } from './representation/index.js';
import { StreamTranslator } from './representation/stream-translator.js';
import { serialised, type FormatPair } from './pair.js';
import { createStreamTranslator, encodeRequest, translateResponse, type TranslationContext } from './translation.js';

/** A Responses API client: how its replies are encoded, and what to do with the final response. */
interface ResponsesClient {
  ctx: ResponsesEncodeContext;
  onFinal(result: ResponseResult): Promise<void>;
}

/**
 * The client: one of the client format table with its body, or the Responses API with its request
 * already decoded (its prior items were resolved first).
 */
type CrossFormatClient = { client: ClientFormatName; body: JsonObject } | { client: ResponsesClient; internal: InternalRequest };

export type CrossFormatRequest = CrossFormatClient & {
  upstreamFormat: UpstreamFormatName;
  stream: boolean;
  includeUsage: boolean;
  model: CatalogModel;
  requestId: string;
  /** Our count of the prompt, for Anthropic message_start before the upstream reports usage. */
  estimateInputTokens: () => Promise<number>;
};

export function viaInternal(req: CrossFormatRequest): FormatPair {
  const contextFor = (upstream: CatalogUpstream): TranslationContext => ({
    upstreamModel: upstream.upstreamModel,
    clientModel: req.model.id,
    supportsReasoning: req.model.supportsReasoning,
    defaultMaxOutputTokens: req.model.defaultMaxOutputTokens,
    requestId: req.requestId,
  });
  // Decoded once, for every upstream the exchange may try.
  let decoded: InternalRequest | undefined;
  const request = (upstream: CatalogUpstream, outputLimit: number): JsonObject => {
    try {
      decoded ??= 'internal' in req ? req.internal : clientFormat(req.client).decodeRequest(req.body);
      // The upstream gets exactly the output limit the reservation covers (the client's, capped by the
      // context window, or the model's default), so it can never generate past what was held.
      return encodeRequest(decoded, upstream.format, contextFor(upstream), outputLimit);
    } catch (err) {
      if (err instanceof TranslationError) throw new GatewayError(err.status, err.message, { code: 'invalid_request', ...(err.param ? { param: err.param } : {}) });
      throw err;
    }
  };
  return {
    request: (upstream, outputLimit) => serialised(request(upstream, outputLimit)),
    // The client speaks another format: its own protocol headers are not this upstream's.
    headers: () => upstreamFormat(req.upstreamFormat).protocolHeaders(),
    relay(upstream): Relay {
      const ctxBase = contextFor(upstream);
      const client = req.client;
      if (typeof client !== 'string') return responsesRelay(req, upstream, client);
      if (!req.stream) {
        return async ({ ctx, response }) => {
          const { out, json } = await upstreamReply(response);
          const translated = translateResponse(json, upstream.format, client, ctxBase);
          billFrom(out, translated.usage, json, upstream);
          out.finishReason = translated.finishReason;
          const id = clientFormat(client).replyId(req.requestId);
          if (id !== undefined) translated.body.id = id;
          ctx.status = 200;
          ctx.type = 'application/json';
          ctx.body = translated.body;
          return out;
        };
      }
      return async (args) => {
        const inputTokenEstimate = clientFormat(client).opensWithInputTokens ? await req.estimateInputTokens() : 0;
        const translator = createStreamTranslator(upstream.format, client, { ...ctxBase, includeUsage: req.includeUsage, inputTokenEstimate });
        return pumpTranslated(translator, '', args);
      };
    },
  };
}

/** An upstream's non-stream reply, parsed, with the model it reports. */
async function upstreamReply(response: Parameters<Relay>[0]['response']): Promise<{ out: RelayOutcome; json: unknown }> {
  const out = emptyOutcome('completed');
  const json: unknown = JSON.parse(await response.body.text());
  if (isRecord(json) && typeof json.model === 'string') out.responseModel = json.model;
  return { out, json };
}

/** The usage to bill, or, without a billable report, what the upstream generated (the exchange estimates from it). */
function billFrom(out: RelayOutcome, usage: NormalizedUsage, json: unknown, upstream: CatalogUpstream): void {
  out.usage = billableUsage(usage);
  if (out.usage !== undefined || !isRecord(json)) return;
  upstreamFormat(upstream.format).collectGenerated(json, out);
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
function responsesRelay(req: CrossFormatRequest, upstream: CatalogUpstream, responses: ResponsesClient): Relay {
  if (!req.stream) {
    return async ({ ctx, response }) => {
      const { out, json } = await upstreamReply(response);
      const r = upstreamFormat(upstream.format).decodeResponse(json);
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
    const translator = new StreamTranslator(upstreamFormat(upstream.format).streamDecoder(), encoder, (r) => r);
    // response.created goes out at once, before the upstream's first byte, so clients see progress.
    return pumpTranslated(translator, encoder.begin(), args, async () => {
      if (encoder.final !== undefined) await responses.onFinal(encoder.final);
    });
  };
}
