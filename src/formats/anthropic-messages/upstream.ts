// An Anthropic-format upstream: its base URL is the bare origin (https://api.anthropic.com), the key
// goes in x-api-key, and every call names an API version; a client speaking Anthropic keeps its own
// version and beta flags, anyone else gets the version the translators are written against.
import { chatBodyShape } from '../chat-images.js';
import { nestedErrorMessage, type UpstreamFormat } from '../types.js';
import { collectAnthropicContent } from './generated.js';
import { encodeAnthropicRequest } from './request.js';
import { decodeAnthropicResponse } from './response.js';
import { AnthropicStreamDecoder } from './stream-decoder.js';

export const ANTHROPIC_VERSION = '2023-06-01';

export const anthropicMessagesUpstream: UpstreamFormat = {
  chatPath: (basePath) => `${basePath}/v1/messages`,
  modelsPath: (basePath) => `${basePath}/v1/models`,
  defaultCredentialsHeader: 'x-api-key',
  credentialQueryParameter: undefined,
  protocolHeaders: (client) => {
    const beta = client?.['anthropic-beta'];
    return { 'anthropic-version': client?.['anthropic-version'] ?? ANTHROPIC_VERSION, ...(beta === undefined ? {} : { 'anthropic-beta': beta }) };
  },
  // {"type": "error", "error": {"type", "message"}}
  errorMessage: nestedErrorMessage,
  encodeRequest(req, ctx) {
    const body = encodeAnthropicRequest({ ...req, model: ctx.upstreamModel }, { supportsReasoning: ctx.supportsReasoning, defaultMaxOutputTokens: ctx.defaultMaxOutputTokens });
    if (ctx.outputLimit !== undefined) body.max_tokens = ctx.outputLimit;
    return body;
  },
  decodeResponse: decodeAnthropicResponse,
  streamDecoder: () => new AnthropicStreamDecoder(),
  collectGenerated: collectAnthropicContent,
  // A top-level system prompt counts as one more message.
  bodyShape: (request) => chatBodyShape(request, request.system !== undefined && request.system !== null ? 1 : 0),
};
