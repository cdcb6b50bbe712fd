// Where chat completions and messages bodies carry images and PDFs, as the worst case counts them. One
// reader for both formats on purpose: a same-format body is the client's own, and an image or a PDF in
// either shape is counted wherever it sits in a message, so a body can never hide one from the reservation.
import { isRecord, TranslationError, type JsonObject } from '../representation/index.js';
import { imageDimensions, imageTokenBound, MAX_IMAGE_TOKENS, type ImagePayload } from '../wire/image-tokens.js';
import { jsonBytes } from '../wire/json-shape.js';
import { base64PdfPageCount } from '../wire/pdf-pages.js';
import type { BodyShape, DocumentFootprint, ImageBilling, ImageFootprint, PdfBilling } from './types.js';

/**
 * OpenAI- and Anthropic-format upstreams: the largest of the families' formulas (Anthropic, OpenAI
 * tiles, patches), never above 1,600; an image whose size cannot be read at that most.
 */
export const FAMILIES_IMAGE_BILLING: ImageBilling = { tokens: imageTokenBound, unknownSizeTokens: MAX_IMAGE_TOKENS };

/**
 * The tokens one image is reserved at by `billing`, from its decoded size. An image whose size cannot be
 * read where the format has no bound for one is refused (a 400 in the client's format, as a request
 * its upstream cannot take): reserving less could bill past the key's cap, and nothing bounds more.
 */
export function imageReservationTokens(payload: ImagePayload | undefined, billing: ImageBilling): number {
  const size = payload === undefined ? undefined : imageDimensions(payload);
  if (size !== undefined) return billing.tokens(size);
  if (billing.unknownSizeTokens !== undefined) return billing.unknownSizeTokens;
  throw new TranslationError(
    400,
    "messages: an image's width and height could not be read from its data (send PNG, JPEG, WebP, GIF or HEIC); this model's upstream bills an image by its size, so the request cannot be reserved for",
    'messages',
  );
}

/**
 * A PDF as `pdf` bills it: its pages (the format's most when they cannot be read from `data`, or it is
 * not in the body at all) at the format's tokens a page; its payload's bytes stay counted as text when
 * the format bills its text too.
 */
export function pdfFootprint(data: string | undefined, pdf: PdfBilling): DocumentFootprint {
  const pages = data === undefined ? undefined : base64PdfPageCount(data);
  return { tokens: (pages ?? pdf.maxPages) * pdf.tokensPerPage, payloadBytes: pdf.textBilled || data === undefined ? 0 : jsonBytes(data) };
}

const isPdfDataUrl = (url: string): boolean => /^data:application\/pdf[;,]/i.test(url);

interface Found {
  images: ImageFootprint[];
  documents: DocumentFootprint[];
}

/** An image or PDF where the upstream reads one: OpenAI image_url and file parts, Anthropic image and document blocks. */
function collect(part: unknown, found: Found, pdf: PdfBilling, image: ImageBilling): void {
  if (!isRecord(part)) return;
  if (part.type === 'image_url' && isRecord(part.image_url) && typeof part.image_url.url === 'string') {
    found.images.push({ tokens: imageReservationTokens({ url: part.image_url.url }, image), payloadBytes: jsonBytes(part.image_url.url) });
  } else if (part.type === 'image' && isRecord(part.source)) {
    const s = part.source;
    const payload = typeof s.data === 'string' ? s.data : typeof s.url === 'string' ? s.url : undefined;
    // An image by file id is not in the body at all: one whose size is unknown.
    found.images.push({
      tokens: imageReservationTokens(typeof s.data === 'string' ? { data: s.data } : typeof s.url === 'string' ? { url: s.url } : undefined, image),
      payloadBytes: payload === undefined ? 0 : jsonBytes(payload),
    });
  } else if (part.type === 'file' && isRecord(part.file) && typeof part.file.file_data === 'string' && isPdfDataUrl(part.file.file_data)) {
    found.documents.push(pdfFootprint(part.file.file_data, pdf));
  } else if (part.type === 'document' && isRecord(part.source)) {
    const s = part.source;
    // A base64 PDF is read; a PDF by URL or file id is not in the body: taken at the most pages.
    if (s.type === 'base64' && typeof s.data === 'string' && (s.media_type === undefined || s.media_type === 'application/pdf')) found.documents.push(pdfFootprint(s.data, pdf));
    else if (s.type === 'url' || s.type === 'file') found.documents.push(pdfFootprint(undefined, pdf));
  } else if (part.type === 'tool_result' && Array.isArray(part.content)) {
    // Anthropic tool results may return images and documents.
    for (const inner of part.content) collect(inner, found, pdf, image);
  }
}

/** Messages (plus `systemMessages`), images and PDFs of a `messages`-array body. */
export function chatBodyShape(request: JsonObject, systemMessages: number, pdf: PdfBilling, image: ImageBilling): BodyShape {
  const found: Found = { images: [], documents: [] };
  const messages = Array.isArray(request.messages) ? request.messages : [];
  for (const m of messages) {
    if (isRecord(m) && Array.isArray(m.content)) for (const part of m.content) collect(part, found, pdf, image);
  }
  return { messages: messages.length + systemMessages, images: found.images, documents: found.documents, addedTokens: 0 };
}
