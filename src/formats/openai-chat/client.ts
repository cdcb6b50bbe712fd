// Chat completions as clients speak it: its errors, and its codecs for a reply translated from
// another upstream format. A translated completion's id is ours (chatcmpl-<request id>), whatever the upstream's.
import type { ClientFormat } from '../types.js';
import { openaiErrorBody } from './error-body.js';
import { finishToOpenAI } from './finish.js';
import { decodeOpenAIRequest } from './request.js';
import { encodeOpenAIResponse, openAICompletionId } from './response.js';
import { OpenAIStreamEncoder } from './stream-encoder.js';
import { openaiRateLimitHeaders } from './rate-limit-headers.js';

export const openaiChatClient: ClientFormat = {
  errorBody: openaiErrorBody,
  // What the OpenAI SDKs raise as an overload and retry (docs/wire-formats.md A.7).
  overloadedStatus: 503,
  requestIdHeader: undefined,
  rateLimitHeaders: openaiRateLimitHeaders,
  decodeRequest: decodeOpenAIRequest,
  encodeResponse: encodeOpenAIResponse,
  replyId: (requestId) => `chatcmpl-${requestId}`,
  finishReason: finishToOpenAI,
  streamEncoder: (ctx) =>
    new OpenAIStreamEncoder({ id: openAICompletionId(ctx.requestId), model: ctx.clientModel, created: Math.floor(Date.now() / 1000), includeUsage: ctx.includeUsage }),
  opensWithInputTokens: false,
  // reasoning_content is sent as it comes: OpenAI-compatible clients read or ignore it.
  showsReasoning: () => true,
};
