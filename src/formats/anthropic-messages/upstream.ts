// An Anthropic-format upstream: its base URL is the bare origin (https://api.anthropic.com), the key
// goes in x-api-key, and every call names an API version; a client speaking Anthropic keeps its own
// version and beta flags, anyone else gets the version the translators are written against.
import { chatBodyShape, FAMILIES_IMAGE_BILLING } from '../chat-images.js';
import { MAX_IMAGE_TOKENS } from '../../wire/image-tokens.js';
import { isRecord } from '../../representation/index.js';
import { nestedErrorMessage, type UpstreamFormat } from '../types.js';
import { collectAnthropicContent } from './generated.js';
import { encodeAnthropicRequest } from './request.js';
import { decodeAnthropicResponse } from './response.js';
import { AnthropicStreamDecoder } from './stream-decoder.js';

export const ANTHROPIC_VERSION = '2023-06-01';

/**
 * Prompt tokens Anthropic adds to a request with tools, not in its body: its tool-use system prompt (346
 * at most, Claude 4 with tool_choice auto), and for each tool it defines itself, that definition (bash
 * 245, text editor 700, computer use 735 and its 499-token system prompt). The memory tool's is not
 * documented: taken at the text editor's.
 */
const TOOL_USE_PROMPT_TOKENS = 346;
const CLIENT_TOOL_PROMPT_TOKENS: Readonly<Record<string, number>> = { bash: 245, text_editor: 700, computer: 735 + 499, memory: 700 };

function toolPromptTokens(tools: unknown): number {
  if (!Array.isArray(tools) || tools.length === 0) return 0;
  let tokens = TOOL_USE_PROMPT_TOKENS;
  for (const t of tools) {
    const kind = isRecord(t) && typeof t.type === 'string' ? /^([a-z_]+)_\d+$/.exec(t.type)?.[1] : undefined;
    tokens += kind === undefined ? 0 : (CLIENT_TOOL_PROMPT_TOKENS[kind] ?? 0);
  }
  return tokens;
}

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
    // Encoded at the limit sent, so the thinking budget derived from it stays below max_tokens (Anthropic
    // refuses it otherwise) when a cost ceiling or the context window lowers the client's limit.
    const limited = ctx.outputLimit === undefined ? req : { ...req, maxOutputTokens: ctx.outputLimit };
    return encodeAnthropicRequest({ ...limited, model: ctx.upstreamModel }, { supportsReasoning: ctx.supportsReasoning, defaultMaxOutputTokens: ctx.defaultMaxOutputTokens });
  },
  decodeResponse: decodeAnthropicResponse,
  streamDecoder: () => new AnthropicStreamDecoder(),
  collectGenerated: collectAnthropicContent,
  // A PDF is its extracted text and an image of each page; at most 600 pages a request (1M-context models).
  pdf: { tokensPerPage: MAX_IMAGE_TOKENS, maxPages: 600, textBilled: true },
  image: FAMILIES_IMAGE_BILLING,
  bodyShape(request) {
    // A top-level system prompt counts as one more message.
    const shape = chatBodyShape(request, request.system !== undefined && request.system !== null ? 1 : 0, this.pdf, this.image);
    return { ...shape, addedTokens: toolPromptTokens(request.tools) };
  },
};
