// Vision tokens of one image, from its decoded dimensions. An upstream turns an image into tokens by
// its size, not its bytes: Anthropic scales it to fit 1568 px on the long edge (about 1.15 megapixels)
// and counts width × height / 750; OpenAI-style tiling fits it in 2048 px, brings the short side to 768
// and counts 85 + 170 per 512 px tile; other OpenAI-compatible vision models (Qwen, GLM) count patches
// of about 28 × 28 px. Since an OpenAI- or Anthropic-format upstream may be any of these families, the
// bound for those formats is the largest of the formulas, never more than the 1,600 tokens the largest
// tiling of those models reaches (a Gemini upstream tiles past that: its own bound is in
// formats/gemini/image-billing.ts, and each format declares which it uses). An image whose size cannot be read (a remote URL, a format we do not parse, a
// corrupt header) is taken at that maximum, so the reservation stays a true upper bound.
//
// The header is read with `image-size` (PNG, JPEG, GIF, WebP and more) from the start of the decoded
// payload; JPEG can put its size after large metadata, so a short prefix that does not answer is
// followed by the whole payload.
import { imageSize } from 'image-size';

/** The most vision tokens one image can cost at an OpenAI- or Anthropic-format upstream. */
export const MAX_IMAGE_TOKENS = 1600;
/** OpenAI's detail "low": one 512 px tile's worth, whatever the size. */
const LOW_DETAIL_TOKENS = 85;
/** Base64 characters of the payload read first (about 384 KiB of image). */
const PREFIX_CHARS = 512 * 1024;

export interface ImageSize {
  width: number;
  height: number;
}

/** An image as a request carries it: base64 data (with or without a data: URL prefix) or a remote URL. */
export type ImagePayload = { data: string } | { url: string };

function sizeOf(bytes: Uint8Array): ImageSize | undefined {
  try {
    const s = imageSize(bytes);
    if (typeof s.width === 'number' && typeof s.height === 'number' && s.width > 0 && s.height > 0) return { width: s.width, height: s.height };
  } catch {
    // Not an image format it knows, or a header cut short.
  }
  return undefined;
}

/** The width and height in an image's header; undefined when it cannot be read from the request alone. */
export function imageDimensions(payload: ImagePayload): ImageSize | undefined {
  let base64: string;
  if ('data' in payload) base64 = payload.data;
  else {
    const m = /^data:[^;,]*;base64,/i.exec(payload.url);
    if (m === null) return undefined;
    base64 = payload.url.slice(m[0].length);
  }
  const prefix = base64.length > PREFIX_CHARS ? base64.slice(0, PREFIX_CHARS - (PREFIX_CHARS % 4)) : base64;
  const found = sizeOf(Buffer.from(prefix, 'base64'));
  if (found !== undefined || prefix.length === base64.length) return found;
  return sizeOf(Buffer.from(base64, 'base64'));
}

/** Anthropic: fit 1568 px on the long edge and about 1.15 megapixels, then one token per 750 px. */
function anthropicTokens({ width, height }: ImageSize): number {
  const scale = Math.min(1, 1568 / Math.max(width, height), Math.sqrt(1_150_000 / (width * height)));
  return Math.ceil((Math.ceil(width * scale) * Math.ceil(height * scale)) / 750);
}

/** OpenAI-style tiles: fit 2048 px, short side to 768, 85 + 170 per 512 px tile. */
function tileTokens({ width, height }: ImageSize): number {
  let w = width;
  let h = height;
  const fit = Math.min(1, 2048 / Math.max(w, h));
  w *= fit;
  h *= fit;
  const short = Math.min(1, 768 / Math.min(w, h));
  w *= short;
  h *= short;
  return 85 + 170 * Math.ceil(w / 512) * Math.ceil(h / 512);
}

/** Patch-based models: one token per 28 × 28 px patch. */
function patchTokens({ width, height }: ImageSize): number {
  return Math.ceil(width / 28) * Math.ceil(height / 28);
}

/**
 * The tokens one image is reserved at: the largest of the families' formulas for its size, at most
 * MAX_IMAGE_TOKENS; MAX_IMAGE_TOKENS when its size is unknown. OpenAI's `detail: "low"` does not lower
 * it: that is a hint not every upstream family honours.
 */
export function imageTokenBound(size: ImageSize | undefined): number {
  if (size === undefined) return MAX_IMAGE_TOKENS;
  return Math.min(MAX_IMAGE_TOKENS, Math.max(anthropicTokens(size), tileTokens(size), patchTokens(size)));
}

/** The bound for an image as carried in a request. */
export function imagePayloadTokens(payload: ImagePayload): number {
  return imageTokenBound(imageDimensions(payload));
}

/**
 * What an upstream of `family` counts for one image, for count_tokens and for the estimate when it
 * reported no usage: Anthropic's pixels/750, OpenAI's tiles (85 at detail "low"). An image whose size is
 * unknown counts 85, one tile, as before sizes were read: an estimate, unlike the reservation, need
 * not be an upper bound.
 */
export function imageTokenEstimate(payload: ImagePayload, family: 'anthropic' | 'openai', detail?: unknown): number {
  if (family === 'openai' && detail === 'low') return LOW_DETAIL_TOKENS;
  const size = imageDimensions(payload);
  if (size === undefined) return LOW_DETAIL_TOKENS;
  return Math.min(MAX_IMAGE_TOKENS, family === 'anthropic' ? anthropicTokens(size) : tileTokens(size));
}
