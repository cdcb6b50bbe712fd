// The text of an Anthropic messages request, for counting its prompt tokens (count_tokens, and a
// request whose upstream reported no usage). Walked only when a count is asked for: the request's
// decoder checks the body, it does not gather this.
import { isRecord, type JsonObject } from '../json-shape.js';
import { imageTokenEstimate } from '../image-tokens.js';
import { TOKENS_PER_IMAGE, type PromptParts } from '../token-count.js';

function collectBlocks(content: unknown, parts: PromptParts): void {
  if (typeof content === 'string') {
    parts.texts.push(content);
    return;
  }
  if (!Array.isArray(content)) return;
  for (const block of content) {
    if (!isRecord(block)) continue;
    switch (block.type) {
      case 'text':
        if (typeof block.text === 'string') parts.texts.push(block.text);
        break;
      case 'image': {
        const source = isRecord(block.source) ? block.source : {};
        parts.images += 1;
        parts.imageTokens = (parts.imageTokens ?? 0) + (source.type === 'base64' && typeof source.data === 'string' ? imageTokenEstimate({ data: source.data }, 'anthropic') : TOKENS_PER_IMAGE);
        break;
      }
      case 'thinking':
        if (typeof block.thinking === 'string') parts.texts.push(block.thinking);
        break;
      case 'tool_use':
        if (typeof block.name === 'string') parts.texts.push(block.name, JSON.stringify(block.input ?? {}));
        break;
      case 'tool_result':
        collectBlocks(block.content, parts);
        break;
      case 'document': {
        // Plain-text and content documents are prompt text; a PDF is not counted here.
        const source = block.source;
        if (isRecord(source) && source.type === 'text' && typeof source.data === 'string') parts.texts.push(source.data);
        else if (isRecord(source) && source.type === 'content') collectBlocks(source.content, parts);
        break;
      }
    }
  }
}

export function anthropicPromptParts(body: JsonObject): PromptParts {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const parts: PromptParts = { texts: [], messages: messages.length, images: 0, imageTokens: 0 };
  if (body.system !== undefined && body.system !== null) collectBlocks(body.system, parts);
  for (const m of messages) if (isRecord(m)) collectBlocks(m.content, parts);
  if (Array.isArray(body.tools)) for (const t of body.tools) parts.texts.push(JSON.stringify(t));
  return parts;
}
