// Validates an Anthropic messages request enough to route it. Unknown fields and block types pass
// through. The worst case is measured on the upstream bodies built from it (reserve/upstream-bodies.ts)
// and the prompt's text is gathered only when a count asks for it (wire/anthropic/prompt-parts.ts), so
// no pass here measures or copies the body's text.
import { invalidRequest } from './invalid-request.js';
import { isRecord, type JsonObject } from '../wire/json-shape.js';

export interface DecodedMessagesRequest {
  body: JsonObject;
  model: string;
  stream: boolean;
  /** The client's output limit (max_tokens), when it gave one. */
  maxOutputTokens: number | undefined;
  hasImages: boolean;
}

const ROLES = new Set(['user', 'assistant', 'system']);

interface Tally {
  images: number;
}

function tallyBlocks(content: unknown, path: string, tally: Tally): void {
  if (typeof content === 'string') return;
  if (!Array.isArray(content)) throw invalidRequest(`${path}: must be a string or an array of content blocks.`, path);
  content.forEach((block: unknown, i) => {
    const at = `${path}.${i}`;
    if (!isRecord(block) || typeof block.type !== 'string') throw invalidRequest(`${at}: each content block must be an object with a \`type\`.`, at);
    switch (block.type) {
      case 'text':
        if (typeof block.text !== 'string') throw invalidRequest(`${at}.text: Field required (a string).`, `${at}.text`);
        return;
      case 'image': {
        const source = block.source;
        if (!isRecord(source) || (source.type === 'base64' && typeof source.data !== 'string') || (source.type === 'url' && typeof source.url !== 'string')) {
          throw invalidRequest(`${at}.source: an image needs a source {type: "base64", media_type, data} or {type: "url", url}.`, `${at}.source`);
        }
        tally.images += 1;
        return;
      }
      case 'tool_use':
        if (typeof block.id !== 'string' || typeof block.name !== 'string') throw invalidRequest(`${at}: tool_use blocks need an \`id\` and a \`name\`.`, at);
        return;
      case 'tool_result':
        if (typeof block.tool_use_id !== 'string') throw invalidRequest(`${at}.tool_use_id: Field required.`, `${at}.tool_use_id`);
        if (block.content !== undefined) tallyBlocks(block.content, `${at}.content`, tally);
        return;
      case 'document': {
        const source = block.source;
        if (isRecord(source) && source.type === 'content' && source.content !== undefined) tallyBlocks(source.content, `${at}.source.content`, tally);
        return;
      }
      default:
      // thinking, redacted thinking, server tool blocks: passed through as they are.
    }
  });
}

export function decodeMessagesRequest(raw: unknown, opts: { requireMaxTokens: boolean }): DecodedMessagesRequest {
  if (!isRecord(raw)) throw invalidRequest('The request body must be a JSON object with `model`, `max_tokens` and `messages`.');
  const body = raw;
  if (typeof body.model !== 'string' || body.model === '') throw invalidRequest('model: Field required (a model id from GET /v1/models).', 'model');
  const maxTokens = body.max_tokens;
  if (maxTokens === undefined || maxTokens === null) {
    if (opts.requireMaxTokens) throw invalidRequest('max_tokens: Field required.', 'max_tokens');
  } else if (typeof maxTokens !== 'number' || !Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    throw invalidRequest(`max_tokens: must be a positive integer, got ${JSON.stringify(maxTokens)}.`, 'max_tokens');
  }
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw invalidRequest('messages: Field required (a non-empty array of {role, content}).', 'messages');
  if (body.stream !== undefined && typeof body.stream !== 'boolean') throw invalidRequest('stream: must be a boolean.', 'stream');
  const tally: Tally = { images: 0 };
  if (body.system !== undefined && body.system !== null) tallyBlocks(body.system, 'system', tally);
  messages.forEach((m: unknown, i) => {
    const at = `messages.${i}`;
    if (!isRecord(m)) throw invalidRequest(`${at}: must be an object with \`role\` and \`content\`.`, at);
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      throw invalidRequest(`${at}.role: must be "user" or "assistant" (or "system"), got ${JSON.stringify(m.role)}.`, `${at}.role`);
    }
    if (m.content === undefined || m.content === null) throw invalidRequest(`${at}.content: Field required.`, `${at}.content`);
    tallyBlocks(m.content, `${at}.content`, tally);
  });
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw invalidRequest('tools: must be an array of tool definitions.', 'tools');
  }
  return {
    body,
    model: body.model,
    stream: body.stream === true,
    maxOutputTokens: typeof maxTokens === 'number' ? maxTokens : undefined,
    hasImages: tally.images > 0,
  };
}
