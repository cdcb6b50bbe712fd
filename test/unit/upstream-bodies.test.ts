// The footprint measured on the upstream body itself: every string in any field is covered, image
// payloads are counted as images only where an upstream reads an image, and the largest of a model's
// upstream bodies is the one reserved for.
import fc from 'fast-check';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { inputTokenBound, TOKENS_PER_IMAGE_ALLOWANCE } from '../../src/reserve/worst-case.js';
import type { CatalogModel, CatalogUpstream } from '../../src/catalog/snapshot.js';
import { buildUpstreamBodies, measureUpstreamBody } from '../../src/reserve/upstream-bodies.js';
import { serialised } from '../../src/translate/pair.js';
import type { JsonObject } from '../../src/wire/json-shape.js';
import { objectStreamPdf } from '../helpers/pdf-fixtures.js';

function model(upstreams: CatalogUpstream[] = []): CatalogModel {
  return {
    id: 'm', displayName: 'M', kind: 'Abliterated', contextWindow: 10_000_000, contextDisplay: '10M',
    pricing: { input: 1_000_000, output: 1_000_000, display: { input: '', output: '' } },
    supportsTools: true, supportsVision: true, supportsReasoning: true, abliterated: true,
    defaultMaxOutputTokens: 1000, aliases: [], created: 0, upstreams, source: 'test',
  };
}

const measure = (request: JsonObject, format: 'openai' | 'anthropic' = 'openai') => measureUpstreamBody(request, JSON.stringify(request), format, undefined);

/** Every string value and key in a JSON value: what a model could be shown of it. */
function strings(v: unknown, out: string[] = []): string[] {
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) for (const x of v) strings(x, out);
  else if (typeof v === 'object' && v !== null) for (const [k, x] of Object.entries(v)) strings(x, out.concat(k));
  return out;
}

describe('measureUpstreamBody', () => {
  it('covers the tokens of every string in any field, known or not (o200k, random unicode)', () => {
    const field = fc.string({ unit: 'binary', maxLength: 40 });
    fc.assert(
      fc.property(fc.dictionary(field, fc.oneof(fc.string({ unit: 'binary', maxLength: 300 }), fc.array(fc.string({ unit: 'binary', maxLength: 100 }), { maxLength: 4 }))), fc.string({ unit: 'binary', maxLength: 200 }), (extra, text) => {
        const request: JsonObject = { model: 'x', messages: [{ role: 'user', content: text, ...extra }], ...extra };
        const tokens = strings(request).reduce((n, s) => n + encode(s, { disallowedSpecial: new Set() }).length, 0);
        expect(tokens).toBeLessThanOrEqual(inputTokenBound(measure(request), model()));
      }),
      { numRuns: 300 },
    );
  });

  it('counts image payloads as images where the upstream reads them, and as text anywhere else', () => {
    const data = 'A'.repeat(100_000);
    const openai = measure({ model: 'x', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } }, { type: 'text', text: 'what is it' }] }] });
    expect(openai.images).toBe(1);
    expect(openai.textBytes).toBeLessThan(200);
    const anthropic = measure(
      { model: 'x', messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data } }] }] }] },
      'anthropic',
    );
    expect(anthropic.images).toBe(1);
    expect(anthropic.textBytes).toBeLessThan(300);
    // The same shape inside a tool argument is text to the model: all of it is counted.
    const smuggled = measure({ model: 'x', messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: { type: 'image_url', image_url: { url: data } } } }] }] });
    expect(smuggled.images).toBe(0);
    expect(smuggled.textBytes).toBeGreaterThan(100_000);
    expect(inputTokenBound(openai, model())).toBeGreaterThanOrEqual(TOKENS_PER_IMAGE_ALLOWANCE);
  });
});

describe('PDF documents (issue 37, item 6)', () => {
  const blank = objectStreamPdf(200).toString('base64');

  it('Gemini: a PDF of blank pages is reserved by its pages (560 tokens a page), not by its few bytes', () => {
    const request = { contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'application/pdf', data: blank } }, { text: 'summarise' }] }] };
    const fp = measureUpstreamBody(request, JSON.stringify(request), 'gemini', undefined);
    expect(blank.length).toBeLessThan(3000);
    expect(inputTokenBound(fp, model())).toBeGreaterThanOrEqual(200 * 560);
    // Its payload is not also counted as text: Gemini bills the pages, not the bytes.
    expect(fp.textBytes).toBeLessThan(200);
    // Pages that cannot be read are taken at Gemini's most, 1,000 a document.
    const unreadable = { contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'application/pdf', data: Buffer.from('%PDF-1.7 encrypted /Encrypt').toString('base64') } }] }] };
    expect(inputTokenBound(measureUpstreamBody(unreadable, JSON.stringify(unreadable), 'gemini', undefined), model())).toBeGreaterThanOrEqual(1000 * 560);
  });

  it('Anthropic and OpenAI: a page image each (1,600 tokens at most) besides the bytes that bound its text', () => {
    const anthropic = measure({ model: 'x', messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: blank } }] }] }, 'anthropic');
    expect(inputTokenBound(anthropic, model())).toBeGreaterThanOrEqual(200 * 1600 + blank.length);
    const openai = measure({ model: 'x', messages: [{ role: 'user', content: [{ type: 'file', file: { filename: 'a.pdf', file_data: `data:application/pdf;base64,${blank}` } }] }] });
    expect(inputTokenBound(openai, model())).toBeGreaterThanOrEqual(200 * 1600 + blank.length);
    // A PDF by URL is not in the body: its pages are taken at Anthropic's most (600).
    const byUrl = measure({ model: 'x', messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } }] }] }, 'anthropic');
    expect(inputTokenBound(byUrl, model())).toBeGreaterThanOrEqual(600 * 1600);
  });

  it("Anthropic: its tool-use prompt and its client tools' definitions, which are not in the body, are reserved", () => {
    const plain = measure({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }, 'anthropic');
    const tools = measure({ model: 'x', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 }] }, 'anthropic');
    expect(inputTokenBound(tools, model()) - inputTokenBound(plain, model())).toBeGreaterThanOrEqual(346 + 735 + 499);
  });
});

describe('the context window', () => {
  it('bounds a body past the window at the window (the upstream refuses a longer prompt), and one within it at its pages', () => {
    const u = { name: 'g', format: 'gemini', upstreamModel: 'g' } as unknown as CatalogUpstream;
    const small = { ...model([u]), contextWindow: 100_000 };
    const pdf = objectStreamPdf(200).toString('base64');
    const build = () => serialised({ contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'application/pdf', data: pdf } }] }] });
    expect(inputTokenBound(buildUpstreamBodies(small, 10, build).footprint, small)).toBe(100_000);
    const roomy = { ...small, contextWindow: 1_000_000 };
    expect(inputTokenBound(buildUpstreamBodies(roomy, 10, build).footprint, roomy)).toBeGreaterThanOrEqual(200 * 560);
  });
});

describe('buildUpstreamBodies', () => {
  const upstream = (name: string, format: 'openai' | 'anthropic'): CatalogUpstream =>
    ({ name, format, upstreamModel: `${name}-model` }) as unknown as CatalogUpstream;

  it('reserves for the largest body, builds each once for the reserved limit, and defers a body that cannot be built', () => {
    const a = upstream('a', 'openai');
    const b = upstream('b', 'anthropic');
    const c = upstream('c', 'openai');
    let builds = 0;
    const bodies = buildUpstreamBodies(model([a, b, c]), 50, (u, limit) => {
      builds++;
      if (u === c) throw new Error('cannot express');
      return serialised({ model: u.upstreamModel, max_tokens: limit, messages: [{ role: 'user', content: u === b ? 'y'.repeat(5000) : 'hi' }] });
    });
    expect(builds).toBe(3);
    expect(bodies.footprint.textBytes).toBeGreaterThan(5000);
    expect(JSON.parse(bodies.body(a, 50).toString())).toMatchObject({ max_tokens: 50 });
    expect(builds).toBe(3);
    expect(() => bodies.body(c, 50)).toThrow('cannot express');
  });

  it('throws the build error at once when no upstream can take the request', () => {
    expect(() =>
      buildUpstreamBodies(model([upstream('a', 'openai')]), 5, () => {
        throw new Error('no format can carry this');
      }),
    ).toThrow('no format can carry this');
  });
});
