// Where chat completions and messages bodies carry images, as the worst case counts them. One reader
// for both formats on purpose: a same-format body is the client's own, and an image in either shape
// is counted wherever it sits in a message, so a body can never hide one from the reservation.
import { isRecord, type JsonObject } from '../translate/representation/index.js';
import { imagePayloadTokens, MAX_IMAGE_TOKENS } from '../wire/image-tokens.js';
import { jsonBytes } from '../wire/json-shape.js';
import type { BodyShape, ImageFootprint } from './types.js';

/** An image where the upstream reads one: an OpenAI image_url part, an Anthropic image block. */
function collectImage(part: unknown, images: ImageFootprint[]): void {
  if (!isRecord(part)) return;
  if (part.type === 'image_url' && isRecord(part.image_url) && typeof part.image_url.url === 'string') {
    images.push({ tokens: imagePayloadTokens({ url: part.image_url.url }), payloadBytes: jsonBytes(part.image_url.url) });
  } else if (part.type === 'image' && isRecord(part.source)) {
    const payload = typeof part.source.data === 'string' ? part.source.data : typeof part.source.url === 'string' ? part.source.url : undefined;
    images.push({
      tokens: typeof part.source.data === 'string' ? imagePayloadTokens({ data: part.source.data }) : MAX_IMAGE_TOKENS,
      payloadBytes: payload === undefined ? 0 : jsonBytes(payload),
    });
  } else if (part.type === 'tool_result' && Array.isArray(part.content)) {
    // Anthropic tool results may return images.
    for (const inner of part.content) collectImage(inner, images);
  }
}

/** Messages (plus `systemMessages`) and images of a `messages`-array body. */
export function chatBodyShape(request: JsonObject, systemMessages: number): BodyShape {
  const images: ImageFootprint[] = [];
  const messages = Array.isArray(request.messages) ? request.messages : [];
  for (const m of messages) {
    if (isRecord(m) && Array.isArray(m.content)) for (const part of m.content) collectImage(part, images);
  }
  return { messages: messages.length + systemMessages, images };
}
