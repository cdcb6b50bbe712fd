// Messages as clients speak them: its errors, and its codecs for a reply translated from another
// upstream format. A stream opens with message_start, which reports input tokens before any upstream
// has: our count of the prompt until the upstream's own arrives.
import type { ClientFormat } from '../types.js';
import { anthropicErrorBody } from './error-body.js';
import { finishToAnthropic } from './finish.js';
import { decodeAnthropicRequest } from './request.js';
import { anthropicMessageId, encodeAnthropicResponse } from './response.js';
import { AnthropicStreamEncoder } from './stream-encoder.js';
import { anthropicRateLimitHeaders } from './rate-limit-headers.js';

export const anthropicMessagesClient: ClientFormat = {
  errorBody: anthropicErrorBody,
  // 529 overloaded_error: what the Anthropic SDKs raise as an overload and retry (docs/wire-formats.md B.5, C.10).
  overloadedStatus: 529,
  // Surfaced by the SDKs as the request id (docs/wire-formats.md B.1).
  requestIdHeader: 'request-id',
  rateLimitHeaders: anthropicRateLimitHeaders,
  decodeRequest: decodeAnthropicRequest,
  encodeResponse: encodeAnthropicResponse,
  // The message id is derived from the upstream's (msg_…).
  replyId: () => undefined,
  finishReason: finishToAnthropic,
  streamEncoder: (ctx) =>
    new AnthropicStreamEncoder({
      id: anthropicMessageId(ctx.requestId),
      model: ctx.clientModel,
      requestId: ctx.requestId,
      inputTokenEstimate: ctx.inputTokenEstimate,
      currentUsage: ctx.currentUsage,
    }),
  opensWithInputTokens: true,
  // Anthropic's API returns thinking blocks only when the request enables thinking, and common client
  // code reads content[0].text: without `thinking` enabled, no thinking block is sent.
  showsReasoning: (req) => req.reasoning?.mode === 'enabled',
};
