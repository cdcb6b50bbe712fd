/**
 * Cross-format translation: a client format's codecs and an upstream format's, joined through the
 * internal representation and looked up in the format tables (src/formats). Same-format traffic is a
 * pass-through and never comes here. Everything is pure: no I/O, no clocks except `created` timestamps.
 */
import { clientFormat, upstreamFormat, type ClientFormatName, type UpstreamFormatName } from '../formats/index.js';
import { effectiveFinish, type InternalRequest, type JsonObject, type NormalizedUsage } from '../representation/index.js';
import { StreamTranslator } from '../representation/stream-translator.js';

export { TranslationError, type SseEvent } from '../representation/index.js';

export interface TranslationContext {
  /** Model name sent to the upstream. */
  upstreamModel: string;
  /** Model name the client asked for; echoed back in responses. */
  clientModel: string;
  supportsReasoning: boolean;
  /** Output cap when the client sent none (Anthropic upstreams require max_tokens). */
  defaultMaxOutputTokens: number;
  requestId: string;
  /** The client asked for the model's reasoning (ClientFormat.showsReasoning); default: it is sent. */
  showReasoning?: boolean;
}

export interface StreamTranslationContext extends TranslationContext {
  /** OpenAI clients: whether they asked for `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Input tokens to put in Anthropic's message_start before the upstream reports real usage. */
  inputTokenEstimate: number;
  /** The charge of the final usage in USD, for the final usage event (undefined: none is reported). */
  costUsd?: ((usage: NormalizedUsage) => number | undefined) | undefined;
}

/** The internal request in the upstream's format; with `outputLimit`, that is its only output limit. */
export function encodeRequest(req: InternalRequest, to: UpstreamFormatName, ctx: TranslationContext, outputLimit?: number): JsonObject {
  return upstreamFormat(to).encodeRequest(req, {
    upstreamModel: ctx.upstreamModel,
    supportsReasoning: ctx.supportsReasoning,
    defaultMaxOutputTokens: ctx.defaultMaxOutputTokens,
    outputLimit,
  });
}

/**
 * Client request body (`from`) -> upstream request body (`to`). Throws TranslationError (status,
 * message, param) for requests the target cannot express (n>1 to Anthropic, audio input, …).
 */
export function translateRequest(body: unknown, from: ClientFormatName, to: UpstreamFormatName, ctx: TranslationContext, outputLimit?: number): JsonObject {
  return encodeRequest(clientFormat(from).decodeRequest(body), to, ctx, outputLimit);
}

export interface TranslatedResponse {
  body: JsonObject;
  usage: NormalizedUsage;
  /** In the client's vocabulary (`end_turn`/`tool_use`… or `stop`/`tool_calls`…). */
  finishReason: string;
}

/** Upstream non-stream response (`from`) -> client response (`to`). */
export function translateResponse(json: unknown, from: UpstreamFormatName, to: ClientFormatName, ctx: TranslationContext): TranslatedResponse {
  const decodedReply = upstreamFormat(from).decodeResponse(json);
  // Reasoning the client did not ask for is left out of the reply (its tokens are still in `usage`).
  const r = ctx.showReasoning === false ? { ...decodedReply, content: decodedReply.content.filter((p) => p.type !== 'thinking') } : decodedReply;
  const client = clientFormat(to);
  const finish = effectiveFinish(r.finishReason, r.content.some((p) => p.type === 'tool_call'));
  return { body: client.encodeResponse(r, { clientModel: ctx.clientModel, requestId: ctx.requestId }), usage: r.usage, finishReason: client.finishReason(finish) };
}

/** A translator for one streamed response: feed it parsed upstream SSE events, write what it returns. */
export function createStreamTranslator(from: UpstreamFormatName, to: ClientFormatName, ctx: StreamTranslationContext): StreamTranslator {
  const client = clientFormat(to);
  // The encoder reads usage the translator has seen so far (Anthropic's message_start).
  const holder: { translator?: StreamTranslator } = {};
  const encoder = client.streamEncoder({
    clientModel: ctx.clientModel,
    requestId: ctx.requestId,
    includeUsage: ctx.includeUsage,
    inputTokenEstimate: ctx.inputTokenEstimate,
    currentUsage: () => (holder.translator?.usageReported ? holder.translator.usage : undefined),
  });
  holder.translator = new StreamTranslator(upstreamFormat(from).streamDecoder(), encoder, client.finishReason, ctx.showReasoning === false, ctx.costUsd);
  return holder.translator;
}
