// The text of an OpenAI chat request, for counting its prompt tokens when the upstream did not.
import { isRecord, type JsonObject } from '../json-shape.js';
import { imageTokenEstimate } from '../image-tokens.js';
import { TOKENS_PER_IMAGE, type PromptParts } from '../token-count.js';

export function openaiPromptParts(body: JsonObject): PromptParts {
  const parts: PromptParts = { texts: [], messages: 0, images: 0, imageTokens: 0 };
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const m of messages) {
    if (!isRecord(m)) continue;
    parts.messages += 1;
    const content = m.content;
    if (typeof content === 'string') parts.texts.push(content);
    else if (Array.isArray(content)) {
      for (const p of content) {
        if (!isRecord(p)) continue;
        if (p.type === 'text' && typeof p.text === 'string') parts.texts.push(p.text);
        else if (p.type === 'image_url') {
          parts.images += 1;
          const image = isRecord(p.image_url) ? p.image_url : {};
          parts.imageTokens = (parts.imageTokens ?? 0) + (typeof image.url === 'string' ? imageTokenEstimate({ url: image.url }, 'openai', image.detail) : TOKENS_PER_IMAGE);
        }
      }
    }
    if (Array.isArray(m.tool_calls)) {
      for (const c of m.tool_calls) {
        if (isRecord(c) && isRecord(c.function) && typeof c.function.arguments === 'string') parts.texts.push(c.function.arguments);
      }
    }
  }
  if (Array.isArray(body.tools)) for (const t of body.tools) parts.texts.push(JSON.stringify(t));
  return parts;
}
