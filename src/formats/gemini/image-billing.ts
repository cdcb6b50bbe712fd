// How Gemini bills an image, for the worst case. Sources: the Gemini API docs, "Understand and count
// tokens" and "Media resolution" (ai.google.dev/gemini-api/docs/tokens, .../media-resolution; the
// media_resolution counts as tabled in summaries of that page):
// - Gemini 2.x: an image no larger than 384 px on either side is 258 tokens; a larger one is cropped and
//   scaled as needed into 768 × 768 px tiles of 258 tokens each (3840 × 2160: 5 × 3 = 15 tiles, 3,870
//   tokens). "Cropped and scaled as needed" is read two ways in the wild: tiles of 768 px over the image
//   as sent, or tiles of a crop unit of two thirds of the short side (floor(min(w, h) / 1.5)), which
//   costs more for long, thin images. Both are counted, and the larger reserved.
// - Gemini 3: a fixed count per image by media_resolution: low 280, medium 560, high 1,120 (the default
//   for images), ultra high 2,240 (per part only). The gateway builds every Gemini body itself and never
//   sets media_resolution (request.ts), so an image there costs the default, 1,120.
// The catalog does not say which generation an upstream serves, so the larger of the two.
//
// No size bounds a tiled image's tokens without its size (the docs name no largest image, and a few KB
// of PNG can declare tens of thousands of pixels a side), so an image whose size cannot be read has no
// bound here: it is refused (chat-images.ts imageReservationTokens). Gemini takes PNG, JPEG, WebP and
// HEIC/HEIF, whose sizes the header reader knows, so only a corrupt image is refused, which Gemini
// would refuse too.
import type { ImageSize } from '../../wire/image-tokens.js';
import type { ImageBilling } from '../types.js';

/** Tokens of one tile, and of an image small enough not to be tiled. */
export const GEMINI_TILE_TOKENS = 258;
/** The largest side, in pixels, of an image counted as one tile. */
const UNTILED_MAX_PX = 384;
/** A tile's side in pixels. */
const TILE_PX = 768;
/** Gemini 3's tokens for an image at media resolution high, its default for images. */
export const GEMINI_3_DEFAULT_IMAGE_TOKENS = 1120;

/** Gemini 2.x's tiles for an image: the larger of the two readings of its tiling rule. */
export function geminiTiles({ width, height }: ImageSize): number {
  if (width <= UNTILED_MAX_PX && height <= UNTILED_MAX_PX) return 1;
  const fixed = Math.ceil(width / TILE_PX) * Math.ceil(height / TILE_PX);
  const cropUnit = Math.max(1, Math.floor(Math.min(width, height) / 1.5));
  const cropped = Math.ceil(width / cropUnit) * Math.ceil(height / cropUnit);
  return Math.max(fixed, cropped);
}

/** The most tokens an image of this size costs at a Gemini upstream of either generation. */
export function geminiImageTokens(size: ImageSize): number {
  return Math.max(geminiTiles(size) * GEMINI_TILE_TOKENS, GEMINI_3_DEFAULT_IMAGE_TOKENS);
}

export const GEMINI_IMAGE_BILLING: ImageBilling = { tokens: geminiImageTokens, unknownSizeTokens: undefined };
