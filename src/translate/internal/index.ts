/**
 * Cross-format translation facade for the HTTP layer. Same-format traffic is a pass-through and
 * never comes here. Everything is pure: no I/O, no clocks except `created` timestamps.
 */
import type { WireFormat } from '../../wire/format.js';
import type { InternalRequest, InternalResponse, NormalizedUsage } from './internal.js';
import { decodeAnthropicRequest, encodeAnthropicRequest } from './anthropic-request.js';
import { decodeOpenAIRequest, encodeOpenAIRequest } from './openai-request.js';
import { anthropicMessageId, decodeAnthropicResponse, encodeAnthropicResponse } from './anthropic-response.js';
import { decodeOpenAIResponse, encodeOpenAIResponse, openAICompletionId } from './openai-response.js';
import { AnthropicStreamDecoder } from './anthropic-stream-decoder.js';
import { OpenAIStreamDecoder } from './openai-stream-decoder.js';
import { AnthropicStreamEncoder } from './anthropic-stream-encoder.js';
import { OpenAIStreamEncoder } from './openai-stream-encoder.js';
import { StreamTranslator } from './stream-translator.js';
import { effectiveFinish, finishToAnthropic, finishToOpenAI } from './stop-reason.js';

export { TranslationError } from './errors.js';
export { stripGatewayThinking } from './anthropic-request.js';
export { isAnthropicSignature } from './thinking-signature.js';
export { StreamTranslator } from './stream-translator.js';
export type { SseEvent } from './sse-event.js';
export type { FinishReason, InternalRequest, InternalResponse, NormalizedUsage, StreamErrorKind, StreamEvent } from './internal.js';
export { usageFromAnthropic, usageFromOpenAI, usageToAnthropic, usageToOpenAI } from './usage.js';

export interface TranslationContext {
  /** Model name sent to the upstream. */
  upstreamModel: string;
  /** Model name the client asked for; echoed back in responses. */
  clientModel: string;
  supportsReasoning: boolean;
  /** Output cap when the client sent none (Anthropic upstreams require max_tokens). */
  defaultMaxOutputTokens: number;
  requestId: string;
}

export interface StreamTranslationContext extends TranslationContext {
  /** OpenAI clients: whether they asked for `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Input tokens to put in Anthropic's message_start before the upstream reports real usage. */
  inputTokenEstimate: number;
}

export function decodeRequest(body: unknown, from: WireFormat): InternalRequest {
  return from === 'anthropic' ? decodeAnthropicRequest(body) : decodeOpenAIRequest(body);
}

export function encodeRequest(req: InternalRequest, to: WireFormat, ctx: TranslationContext): Record<string, unknown> {
  const internal: InternalRequest = { ...req, model: ctx.upstreamModel };
  if (to === 'anthropic') {
    return encodeAnthropicRequest(internal, { supportsReasoning: ctx.supportsReasoning, defaultMaxOutputTokens: ctx.defaultMaxOutputTokens });
  }
  const body = encodeOpenAIRequest(internal, { supportsReasoning: ctx.supportsReasoning });
  // Usage arrives only when asked for; billing needs it.
  if (internal.stream) body.stream_options = { include_usage: true };
  return body;
}

/**
 * Client request body (`from`) -> upstream request body (`to`). Throws TranslationError (status,
 * message, param) for requests the target cannot express (n>1 to Anthropic, audio input, …).
 */
export function translateRequest(body: unknown, from: WireFormat, to: WireFormat, ctx: TranslationContext): Record<string, unknown> {
  return encodeRequest(decodeRequest(body, from), to, ctx);
}

export interface TranslatedResponse {
  body: Record<string, unknown>;
  usage: NormalizedUsage;
  /** In the client's vocabulary (`end_turn`/`tool_use`… or `stop`/`tool_calls`…). */
  finishReason: string;
}

/** Upstream non-stream response (`from`) -> client response (`to`). */
export function translateResponse(json: unknown, from: WireFormat, to: WireFormat, ctx: TranslationContext): TranslatedResponse {
  const r: InternalResponse = from === 'anthropic' ? decodeAnthropicResponse(json) : decodeOpenAIResponse(json);
  const toolCalled = r.content.some((p) => p.type === 'tool_call');
  const finish = effectiveFinish(r.finishReason, toolCalled);
  const encodeCtx = { clientModel: ctx.clientModel, requestId: ctx.requestId };
  return to === 'anthropic'
    ? { body: encodeAnthropicResponse(r, encodeCtx), usage: r.usage, finishReason: finishToAnthropic(finish) }
    : { body: encodeOpenAIResponse(r, encodeCtx), usage: r.usage, finishReason: finishToOpenAI(finish) };
}

/** A translator for one streamed response: feed it parsed upstream SSE events, write what it returns. */
export function createStreamTranslator(from: WireFormat, to: WireFormat, ctx: StreamTranslationContext): StreamTranslator {
  const decoder = from === 'anthropic' ? new AnthropicStreamDecoder() : new OpenAIStreamDecoder();
  if (to === 'openai') {
    const encoder = new OpenAIStreamEncoder({
      id: openAICompletionId(ctx.requestId),
      model: ctx.clientModel,
      created: Math.floor(Date.now() / 1000),
      includeUsage: ctx.includeUsage,
    });
    return new StreamTranslator(decoder, encoder, finishToOpenAI);
  }
  // The encoder reads usage the translator has seen so far (for message_start).
  const holder: { translator?: StreamTranslator } = {};
  const encoder = new AnthropicStreamEncoder({
    id: anthropicMessageId(ctx.requestId),
    model: ctx.clientModel,
    requestId: ctx.requestId,
    inputTokenEstimate: ctx.inputTokenEstimate,
    currentUsage: () => (holder.translator?.usageReported ? holder.translator.usage : undefined),
  });
  holder.translator = new StreamTranslator(decoder, encoder, finishToAnthropic);
  return holder.translator;
}
