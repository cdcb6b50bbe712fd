// Images are reserved from their decoded size (issue 29, item 6), not at a flat 1,600 tokens: the
// headers of real PNG, JPEG, GIF and WebP files made here are read, each family's formula applied and
// the largest taken, never above 1,600; an image whose size cannot be read is reserved at 1,600.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { measureUpstreamBody } from '../../src/reserve/upstream-bodies.js';
import { inputTokenBound } from '../../src/reserve/worst-case.js';
import { imageDimensions, imageTokenBound, imageTokenEstimate, MAX_IMAGE_TOKENS } from '../../src/wire/image-tokens.js';
import { openaiPromptParts } from '../../src/wire/openai/prompt-parts.js';
import { countPromptTokens } from '../../src/wire/token-count.js';
import type { CatalogModel } from '../../src/catalog/snapshot.js';
import { png } from '../helpers/png.js';

/** A JPEG's header (SOI, an APP1 of `metadataBytes` as large EXIF blocks are, then SOF0 with the size). */
function jpeg(width: number, height: number, metadataBytes = 16): Buffer {
  const parts: Buffer[] = [Buffer.from([0xff, 0xd8])];
  let left = metadataBytes;
  while (left > 0) {
    const n = Math.min(left, 65_000);
    const seg = Buffer.alloc(4 + n);
    seg.writeUInt16BE(0xffe1, 0);
    seg.writeUInt16BE(n + 2, 2);
    parts.push(seg);
    left -= n;
  }
  const sof = Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, 0, 0, 0, 0, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01]);
  sof.writeUInt16BE(height, 5);
  sof.writeUInt16BE(width, 7);
  parts.push(sof, Buffer.from([0xff, 0xd9]));
  return Buffer.concat(parts);
}

function gif(width: number, height: number): Buffer {
  const b = Buffer.alloc(13);
  b.write('GIF89a', 0, 'ascii');
  b.writeUInt16LE(width, 6);
  b.writeUInt16LE(height, 8);
  return Buffer.concat([b, Buffer.from([0x3b])]);
}

/** A WebP with a VP8X header (24-bit width-1 and height-1). */
function webp(width: number, height: number): Buffer {
  const vp8x = Buffer.alloc(10);
  vp8x.writeUIntLE(width - 1, 4, 3);
  vp8x.writeUIntLE(height - 1, 7, 3);
  const chunk = Buffer.concat([Buffer.from('VP8X', 'ascii'), Buffer.from([10, 0, 0, 0]), vp8x]);
  const riff = Buffer.alloc(12);
  riff.write('RIFF', 0, 'ascii');
  riff.writeUInt32LE(4 + chunk.length, 4);
  riff.write('WEBP', 8, 'ascii');
  return Buffer.concat([riff, chunk]);
}

const b64 = (b: Buffer): string => b.toString('base64');

const model = (): CatalogModel => ({
  id: 'm', displayName: 'M', kind: 'Abliterated', contextWindow: 10_000_000, contextDisplay: '10M',
  pricing: { input: 1_000_000, output: 1_000_000, display: { input: '', output: '' } },
  supportsTools: true, supportsVision: true, supportsReasoning: true, abliterated: true,
  defaultMaxOutputTokens: 1000, aliases: [], created: 0, upstreams: [], source: 'test',
});

describe('image dimensions from the headers', () => {
  it('reads PNG, JPEG, GIF and WebP, as base64 and as a data: URL', () => {
    expect(imageDimensions({ data: b64(png(640, 480)) })).toEqual({ width: 640, height: 480 });
    expect(imageDimensions({ url: `data:image/png;base64,${b64(png(33, 7))}` })).toEqual({ width: 33, height: 7 });
    expect(imageDimensions({ data: b64(jpeg(1920, 1080)) })).toEqual({ width: 1920, height: 1080 });
    expect(imageDimensions({ data: b64(gif(120, 90)) })).toEqual({ width: 120, height: 90 });
    expect(imageDimensions({ data: b64(webp(3000, 2000)) })).toEqual({ width: 3000, height: 2000 });
  });

  it('finds a JPEG size that comes after more metadata than the first read covers', () => {
    expect(imageDimensions({ data: b64(jpeg(800, 600, 600_000)) })).toEqual({ width: 800, height: 600 });
  });

  it('has no size for a remote URL, a corrupt payload or a format it does not read', () => {
    expect(imageDimensions({ url: 'https://example.com/cat.png' })).toBeUndefined();
    expect(imageDimensions({ data: 'bm90IGFuIGltYWdl' })).toBeUndefined();
    expect(imageDimensions({ data: b64(png(10, 10)).slice(0, 12) })).toBeUndefined();
  });
});

describe('the vision-token bound', () => {
  it('is the largest family formula for the size, and 1,600 for an unknown size', () => {
    // 64 x 64: Anthropic 6, patches 9, one OpenAI tile 255.
    expect(imageTokenBound({ width: 64, height: 64 })).toBe(255);
    // 1000 x 1000: Anthropic 1334, patches 1296, tiles 765.
    expect(imageTokenBound({ width: 1000, height: 1000 })).toBe(1334);
    expect(imageTokenBound({ width: 8000, height: 6000 })).toBe(MAX_IMAGE_TOKENS);
    expect(imageTokenBound(undefined)).toBe(MAX_IMAGE_TOKENS);
  });

  it('never exceeds 1,600 and never falls below any family formula (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20_000 }), fc.integer({ min: 1, max: 20_000 }), (width, height) => {
        const t = imageTokenBound({ width, height });
        expect(t).toBeLessThanOrEqual(MAX_IMAGE_TOKENS);
        expect(t).toBeGreaterThanOrEqual(Math.min(MAX_IMAGE_TOKENS, Math.ceil(width / 28) * Math.ceil(height / 28)));
        expect(t).toBeGreaterThanOrEqual(85);
      }),
    );
  });

  it('a small image is reserved at its size, not at 1,600; an unreadable one at 1,600', () => {
    const small = { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${b64(png(64, 64))}` } }] }] };
    const fpSmall = measureUpstreamBody(small, JSON.stringify(small), 'openai', 16);
    expect(fpSmall.imageTokens).toBe(255);
    expect(inputTokenBound(fpSmall, model())).toBeLessThan(MAX_IMAGE_TOKENS);
    const remote = { model: 'm', messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/x.png' } }] }] };
    expect(measureUpstreamBody(remote, JSON.stringify(remote), 'anthropic', 16).imageTokens).toBe(MAX_IMAGE_TOKENS);
  });

  it('the estimate (count_tokens, missing usage) counts the image by its size with its family\'s formula; 85 when unknown or low detail', async () => {
    const url = `data:image/png;base64,${b64(png(1000, 1000))}`;
    expect(imageTokenEstimate({ url }, 'anthropic')).toBe(1334);
    expect(imageTokenEstimate({ url }, 'openai')).toBe(765);
    expect(imageTokenEstimate({ url }, 'openai', 'low')).toBe(85);
    expect(imageTokenEstimate({ url: 'https://example.com/cat.png' }, 'anthropic')).toBe(85);
    const parts = openaiPromptParts({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }] });
    expect(parts.imageTokens).toBe(765);
    expect(await countPromptTokens(parts)).toBeGreaterThanOrEqual(765);
  });
});
