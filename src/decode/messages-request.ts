// Validates an Anthropic messages request enough to bill and route it, and measures its footprint.
// Unknown fields and block types pass through; their encoded size still counts toward the bound.
import { imageTokenEstimate } from '../wire/image-tokens.js';
import { TOKENS_PER_IMAGE } from '../wire/token-count.js';
import { invalidRequest } from './invalid-request.js';
import type { RequestFootprint } from '../reserve/worst-case.js';
import { isRecord, jsonBytes, utf8Bytes, type JsonObject } from '../wire/json-shape.js';
import type { PromptParts } from '../wire/token-count.js';

export interface DecodedMessagesRequest {
  body: JsonObject;
  model: string;
  stream: boolean;
  footprint: RequestFootprint;
  hasImages: boolean;
  prompt: PromptParts;
}

const ROLES = new Set(['user', 'assistant', 'system']);

interface Tally {
  textBytes: number;
  images: number;
  /** The images' tokens as an upstream that reports no usage would have counted them (the estimate). */
  imageTokens: number;
  texts: string[];
}

function text(tally: Tally, s: string): void {
  tally.textBytes += utf8Bytes(s);
  tally.texts.push(s);
}

function tallyBlocks(content: unknown, path: string, tally: Tally): void {
  if (typeof content === 'string') {
    text(tally, content);
    return;
  }
  if (!Array.isArray(content)) throw invalidRequest(`${path}: must be a string or an array of content blocks.`, path);
  content.forEach((block: unknown, i) => {
    const at = `${path}.${i}`;
    if (!isRecord(block) || typeof block.type !== 'string') throw invalidRequest(`${at}: each content block must be an object with a \`type\`.`, at);
    switch (block.type) {
      case 'text':
        if (typeof block.text !== 'string') throw invalidRequest(`${at}.text: Field required (a string).`, `${at}.text`);
        text(tally, block.text);
        return;
      case 'image': {
        const source = block.source;
        if (!isRecord(source) || (source.type === 'base64' && typeof source.data !== 'string') || (source.type === 'url' && typeof source.url !== 'string')) {
          throw invalidRequest(`${at}.source: an image needs a source {type: "base64", media_type, data} or {type: "url", url}.`, `${at}.source`);
        }
        tally.images += 1;
        tally.imageTokens += source.type === 'base64' && typeof source.data === 'string' ? imageTokenEstimate({ data: source.data }, 'anthropic') : TOKENS_PER_IMAGE;
        return;
      }
      case 'thinking':
        if (typeof block.thinking === 'string') text(tally, block.thinking);
        return;
      case 'tool_use':
        if (typeof block.id !== 'string' || typeof block.name !== 'string') throw invalidRequest(`${at}: tool_use blocks need an \`id\` and a \`name\`.`, at);
        tally.textBytes += utf8Bytes(block.name) + jsonBytes(block.input);
        tally.texts.push(block.name, JSON.stringify(block.input ?? {}));
        return;
      case 'tool_result':
        if (typeof block.tool_use_id !== 'string') throw invalidRequest(`${at}.tool_use_id: Field required.`, `${at}.tool_use_id`);
        if (block.content !== undefined) tallyBlocks(block.content, `${at}.content`, tally);
        return;
      case 'document': {
        // Plain-text and content documents are prompt text: count_tokens and the input estimate of a
        // cut stream must see them (a PDF's size is bounded by its encoded bytes below).
        const source = block.source;
        if (isRecord(source) && source.type === 'text' && typeof source.data === 'string') {
          text(tally, source.data);
          return;
        }
        if (isRecord(source) && source.type === 'content' && source.content !== undefined) {
          tallyBlocks(source.content, `${at}.source.content`, tally);
          return;
        }
        tally.textBytes += jsonBytes(block);
        return;
      }
      default:
        // documents, redacted thinking, server tool blocks: their encoded size bounds their tokens.
        tally.textBytes += jsonBytes(block);
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
  const tally: Tally = { textBytes: 0, images: 0, imageTokens: 0, texts: [] };
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
    tally.textBytes += jsonBytes(body.tools);
    for (const t of body.tools) tally.texts.push(JSON.stringify(t));
  }
  return {
    body,
    model: body.model,
    stream: body.stream === true,
    footprint: {
      textBytes: tally.textBytes,
      messages: messages.length + (body.system === undefined ? 0 : 1),
      images: tally.images,
      maxOutputTokens: typeof maxTokens === 'number' ? maxTokens : undefined,
    },
    hasImages: tally.images > 0,
    prompt: { texts: tally.texts, messages: messages.length, images: tally.images, imageTokens: tally.imageTokens },
  };
}
