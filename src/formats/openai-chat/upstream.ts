// An OpenAI-format upstream: its base URL already ends in /v1 (https://api.openai.com/v1), the key is
// a Bearer token, no version header is needed, and usage arrives in a stream only when asked for.
import { chatBodyShape, FAMILIES_IMAGE_BILLING } from '../chat-images.js';
import { MAX_IMAGE_TOKENS } from '../../wire/image-tokens.js';
import { nestedErrorMessage, type UpstreamFormat } from '../types.js';
import { collectOpenAIChoice } from './generated.js';
import { encodeOpenAIRequest } from './request.js';
import { decodeOpenAIResponse } from './response.js';
import { OpenAIStreamDecoder } from './stream-decoder.js';

export const openaiChatUpstream: UpstreamFormat = {
  chatPath: (basePath) => `${basePath}/chat/completions`,
  modelsPath: (basePath) => `${basePath}/models`,
  defaultCredentialsHeader: 'authorization',
  credentialQueryParameter: undefined,
  protocolHeaders: () => ({}),
  // {"error": {"message", "type", "param", "code"}}
  errorMessage: nestedErrorMessage,
  encodeRequest(req, ctx) {
    const body = encodeOpenAIRequest({ ...req, model: ctx.upstreamModel }, { supportsReasoning: ctx.supportsReasoning });
    // Usage arrives only when asked for; billing needs it.
    if (req.stream) body.stream_options = { include_usage: true };
    // Exactly one output limit, under the field the encoder chose.
    if (ctx.outputLimit === undefined) return body;
    if (body.max_completion_tokens !== undefined) {
      body.max_completion_tokens = ctx.outputLimit;
      delete body.max_tokens;
    } else {
      body.max_tokens = ctx.outputLimit;
    }
    return body;
  },
  decodeResponse: decodeOpenAIResponse,
  streamDecoder: () => new OpenAIStreamDecoder(),
  collectGenerated(reply, into) {
    if (Array.isArray(reply.choices)) for (const c of reply.choices) collectOpenAIChoice(c, into);
  },
  // OpenAI reads a PDF as its extracted text and an image of each page (at most 100 pages a request);
  // other servers of this format read it no dearer.
  pdf: { tokensPerPage: MAX_IMAGE_TOKENS, maxPages: 100, textBilled: true },
  image: FAMILIES_IMAGE_BILLING,
  bodyShape(request) {
    return chatBodyShape(request, 0, this.pdf, this.image);
  },
};
