// Honest input-token counts. Per the gateway's reservation bound (UTF-8 bytes of text, tool definitions and
// tool arguments, +16 per message, +1,600 per image), every term here must stay at or below its counterpart:
// a token is at least one byte, 4 <= 16 per message, 85 <= 1,600 per image. A Gemini image is counted
// as Gemini 2.x counts it, by its size (geminiImageTokens), which the gateway's bound for that format must cover.
import { countTokens } from './tokenizer.js';
import { imageDimensions } from '../wire/image-tokens.js';
import { isRecord } from '../wire/json-shape.js';

export const TOKENS_PER_MESSAGE = 4;
export const TOKENS_PER_IMAGE = 85;

type Json = { [k: string]: unknown };
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function toolsTokens(tools: unknown): number {
  if (!Array.isArray(tools)) return 0;
  let n = 0;
  for (const t of tools) n += countTokens(JSON.stringify(t));
  return n;
}

/** OpenAI content: a string or text / refusal / image_url parts. */
function openaiContent(content: unknown): number {
  if (typeof content === 'string') return countTokens(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const part of content) {
    if (!isRecord(part)) continue;
    if (part.type === 'text') n += countTokens(str(part.text));
    else if (part.type === 'refusal') n += countTokens(str(part.refusal));
    else if (part.type === 'image_url') n += TOKENS_PER_IMAGE;
  }
  return n;
}

export function openaiInputTokens(body: Json): number {
  let n = toolsTokens(body.tools);
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages) {
    n += TOKENS_PER_MESSAGE;
    if (!isRecord(m)) continue;
    n += openaiContent(m.content);
    if (Array.isArray(m.tool_calls)) {
      for (const c of m.tool_calls) if (isRecord(c) && isRecord(c.function)) n += countTokens(str(c.function.arguments));
    }
  }
  return n;
}

/** Anthropic content: a string or blocks (text, image, tool_use, tool_result, thinking, text documents). */
function anthropicContent(content: unknown): number {
  if (typeof content === 'string') return countTokens(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const b of content) {
    if (!isRecord(b)) continue;
    switch (b.type) {
      case 'text':
        n += countTokens(str(b.text));
        break;
      case 'image':
        n += TOKENS_PER_IMAGE;
        break;
      case 'tool_use':
        n += countTokens(JSON.stringify(b.input ?? {}));
        break;
      case 'tool_result':
        n += anthropicContent(b.content);
        break;
      case 'thinking':
        n += countTokens(str(b.thinking));
        break;
      case 'document':
        if (isRecord(b.source) && b.source.type === 'text') n += countTokens(str(b.source.data));
        break;
    }
  }
  return n;
}

export function anthropicInputTokens(body: Json): number {
  let n = toolsTokens(body.tools) + anthropicContent(body.system);
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages) {
    n += TOKENS_PER_MESSAGE;
    if (isRecord(m)) n += anthropicContent(m.content);
  }
  return n;
}

/**
 * A Gemini image as Gemini 2.x counts it (the "token counting" docs): 258 tokens when neither side passes
 * 384 px, else 258 for each 768 × 768 px tile that covers it. Written apart from the gateway's bound on
 * purpose: that bound must cover this count, not share its code.
 */
export function geminiImageTokens(base64: string): number {
  const size = imageDimensions({ data: base64 });
  if (size === undefined || (size.width <= 384 && size.height <= 384)) return 258;
  return 258 * Math.ceil(size.width / 768) * Math.ceil(size.height / 768);
}

/** Gemini parts: text, inline images (by their size), function calls and responses (their JSON). */
function geminiParts(content: unknown): number {
  const parts = isRecord(content) && Array.isArray(content.parts) ? content.parts : [];
  let n = 0;
  for (const p of parts) {
    if (!isRecord(p)) continue;
    if (typeof p.text === 'string') n += countTokens(p.text);
    else if (isRecord(p.inlineData)) n += str(p.inlineData.mimeType).startsWith('image/') ? geminiImageTokens(str(p.inlineData.data)) : countTokens(str(p.inlineData.data));
    else if (isRecord(p.functionCall)) n += countTokens(JSON.stringify(p.functionCall.args ?? {}));
    else if (isRecord(p.functionResponse)) n += countTokens(JSON.stringify(p.functionResponse.response ?? {}));
  }
  return n;
}

export function geminiInputTokens(body: Json): number {
  let n = toolsTokens(body.tools) + geminiParts(body.systemInstruction);
  const contents = Array.isArray(body.contents) ? body.contents : [];
  for (const c of contents) n += TOKENS_PER_MESSAGE + geminiParts(c);
  return n;
}
