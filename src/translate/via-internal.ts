// The cross-format pairs' engine: the client's request decoded into the internal representation
// (src/representation) and encoded for the upstream's format; the reply, whole or streamed,
// decoded from the upstream's format and encoded for the client's, each by its format's codecs
// (src/formats). Same-format pairs never come here.
import { clientFormat, upstreamFormat, type ClientFormatName, type UpstreamFormatName } from '../formats/index.js';
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';
import type { Relay } from '../relay/relay.js';
import { isRecord, type InternalRequest, type JsonObject } from '../representation/index.js';
import { serialised, type FormatPair } from './pair.js';
import { billFrom, pumpTranslated, streamCost, upstreamReply } from './pump.js';
import { createStreamTranslator, encodeRequest, translateResponse, type TranslationContext } from './translation.js';

export interface CrossFormatRequest {
  /** The client's format and its body. */
  client: ClientFormatName;
  body: JsonObject;
  upstreamFormat: UpstreamFormatName;
  stream: boolean;
  includeUsage: boolean;
  model: CatalogModel;
  requestId: string;
  /** Our count of the prompt, for Anthropic message_start before the upstream reports usage. */
  estimateInputTokens: () => Promise<number>;
}

export function viaInternal(req: CrossFormatRequest): FormatPair {
  const contextFor = (upstream: CatalogUpstream): TranslationContext => translationContext(req.model, upstream, req.requestId);
  // Decoded once, for every upstream the exchange may try. A request the upstream's format cannot
  // express throws TranslationError, which the HTTP edge answers as the client's 400.
  let decoded: InternalRequest | undefined;
  const request = (upstream: CatalogUpstream, outputLimit: number): JsonObject => {
    decoded ??= clientFormat(req.client).decodeRequest(req.body);
    // The upstream gets exactly the output limit the reservation covers (the client's, capped by the
    // context window, or the model's default), so it can never generate past what was held.
    return encodeRequest(decoded, upstream.format, contextFor(upstream), outputLimit);
  };
  return {
    request: (upstream, outputLimit) => serialised(request(upstream, outputLimit)),
    // The client speaks another format: its own protocol headers are not this upstream's.
    headers: () => upstreamFormat(req.upstreamFormat).protocolHeaders(),
    relay(upstream): Relay {
      decoded ??= clientFormat(req.client).decodeRequest(req.body);
      const ctxBase = { ...contextFor(upstream), showReasoning: clientFormat(req.client).showsReasoning(decoded) };
      const client = req.client;
      if (!req.stream) {
        return async ({ ctx, response }) => {
          const { out, json } = await upstreamReply(response);
          const translated = translateResponse(json, upstream.format, client, ctxBase);
          billFrom(out, translated.usage, json, upstream);
          out.finishReason = translated.finishReason;
          const id = clientFormat(client).replyId(req.requestId);
          if (id !== undefined) translated.body.id = id;
          if (isRecord(translated.body.usage)) out.answerUsage = translated.body.usage;
          ctx.status = 200;
          ctx.type = 'application/json';
          ctx.body = translated.body;
          return out;
        };
      }
      return async (args) => {
        const inputTokenEstimate = clientFormat(client).opensWithInputTokens ? await req.estimateInputTokens() : 0;
        const translator = createStreamTranslator(upstream.format, client, { ...ctxBase, includeUsage: req.includeUsage, inputTokenEstimate, costUsd: streamCost(args) });
        return pumpTranslated(translator, '', args);
      };
    },
  };
}

/** What translating one request for one upstream needs to know. */
export function translationContext(model: CatalogModel, upstream: CatalogUpstream, requestId: string): TranslationContext {
  return {
    upstreamModel: upstream.upstreamModel,
    clientModel: model.id,
    supportsReasoning: model.supportsReasoning,
    defaultMaxOutputTokens: model.defaultMaxOutputTokens,
    requestId,
  };
}
