// A Gemini upstream bills an image by 768 px tiles of 258 tokens (Gemini 2.x) or a fixed 1,120 (Gemini 3
// at its default media resolution), so a large image costs it more than the 1,600 tokens the other
// formats' bound stops at. The reservation of a body sent to Gemini must cover that, and an image whose
// size cannot be read there (no bound exists) is refused with a 400, not reserved short.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { upstreamFormat } from '../../src/formats/index.js';
import { GEMINI_3_DEFAULT_IMAGE_TOKENS, GEMINI_TILE_TOKENS, geminiImageTokens, geminiTiles } from '../../src/formats/gemini/image-billing.js';
import { TranslationError } from '../../src/representation/index.js';
import { measureUpstreamBody } from '../../src/reserve/upstream-bodies.js';
import { geminiImageTokens as simulatorGeminiImageTokens } from '../../src/simulator/input-tokens.js';
import { MAX_IMAGE_TOKENS } from '../../src/wire/image-tokens.js';
import { pngBase64 } from '../helpers/png.js';

const geminiBody = (data: string) => ({ contents: [{ role: 'user', parts: [{ text: 'What is this?' }, { inlineData: { mimeType: 'image/png', data } }] }] });

function measureGemini(data: string) {
  const request = geminiBody(data);
  return measureUpstreamBody(request, JSON.stringify(request), 'gemini', 100);
}

describe("Gemini's image bound", () => {
  it('a 3840 × 2160 image is 15 tiles, 3,870 tokens; a small one one tile, and never below Gemini 3\'s 1,120', () => {
    expect(geminiTiles({ width: 3840, height: 2160 })).toBe(15);
    expect(geminiImageTokens({ width: 3840, height: 2160 })).toBeGreaterThanOrEqual(3870);
    expect(geminiTiles({ width: 384, height: 384 })).toBe(1);
    expect(geminiTiles({ width: 200, height: 100 }) * GEMINI_TILE_TOKENS).toBe(258);
    expect(geminiImageTokens({ width: 200, height: 100 })).toBe(GEMINI_3_DEFAULT_IMAGE_TOKENS);
  });

  it('covers what Gemini 2.x counts (the simulator\'s independent count) for any size', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8000 }), fc.integer({ min: 1, max: 8000 }), (width, height) => {
        const tiles = width <= 384 && height <= 384 ? 1 : Math.ceil(width / 768) * Math.ceil(height / 768);
        expect(geminiImageTokens({ width, height })).toBeGreaterThanOrEqual(tiles * 258);
        expect(geminiImageTokens({ width, height })).toBeGreaterThanOrEqual(GEMINI_3_DEFAULT_IMAGE_TOKENS);
      }),
    );
  });

  it('a Gemini body with a 4K image is reserved at least its real cost, above the 1,600 the other formats stop at', () => {
    const data = pngBase64(3840, 2160);
    const fp = measureGemini(data);
    expect(simulatorGeminiImageTokens(data)).toBe(3870);
    expect(fp.imageTokens).toBeGreaterThanOrEqual(3870);
    expect(fp.imageTokens).toBeGreaterThan(MAX_IMAGE_TOKENS);
  });

  it('the same image in an OpenAI- or Anthropic-format body keeps those formats\' bound', () => {
    const data = pngBase64(3840, 2160);
    const chat = { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } }] }] };
    const messages = { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data } }] }] };
    expect(measureUpstreamBody(chat, JSON.stringify(chat), 'openai', 100).imageTokens).toBe(MAX_IMAGE_TOKENS);
    expect(measureUpstreamBody(messages, JSON.stringify(messages), 'anthropic', 100).imageTokens).toBe(MAX_IMAGE_TOKENS);
  });

  it('every upstream format declares its image bound, and only Gemini has none for an unreadable size', () => {
    expect(upstreamFormat('openai').image.unknownSizeTokens).toBe(MAX_IMAGE_TOKENS);
    expect(upstreamFormat('anthropic').image.unknownSizeTokens).toBe(MAX_IMAGE_TOKENS);
    expect(upstreamFormat('gemini').image.unknownSizeTokens).toBeUndefined();
  });

  it('an image whose size cannot be read is refused for Gemini with a 400 naming why, not reserved short', () => {
    const garbage = Buffer.from('not an image at all, just bytes').toString('base64');
    let err: unknown;
    try {
      measureGemini(garbage);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TranslationError);
    expect(err).toMatchObject({ status: 400 });
    expect((err as Error).message).toMatch(/width and height could not be read/);
  });
});
