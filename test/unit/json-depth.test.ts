// The nesting gauge the body reader runs on each chunk: brackets inside strings (escaped quotes
// included) never count, and a chunk boundary anywhere (even inside an escape) changes nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonDepthGauge } from '../../src/decode/json-body.js';

function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (typeof v === 'object' && v !== null) return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

function accepts(text: string, max: number, cuts: number[]): boolean {
  const bytes = Buffer.from(text, 'utf8');
  const gauge = new JsonDepthGauge(max);
  let from = 0;
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1)).sort((a, b) => a - b), bytes.length]) {
    if (!gauge.feed(bytes.subarray(from, Math.max(from, cut)))) return false;
    from = Math.max(from, cut);
  }
  return true;
}

describe('JsonDepthGauge', () => {
  it('accepts exactly the values nested at most max deep, wherever the chunks are cut', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 1, max: 8 }), fc.array(fc.nat(), { maxLength: 6 }), (value, max, cuts) => {
        expect(accepts(JSON.stringify(value), max, cuts)).toBe(depthOf(value) <= max);
      }),
      { numRuns: 500 },
    );
  });

  it('ignores brackets in strings, escaped quotes included', () => {
    const text = JSON.stringify({ a: '[[[[{{{{ \\" ]]]] "[[[[' });
    expect(accepts(text, 1, [])).toBe(true);
    for (let cut = 0; cut <= text.length; cut++) expect(accepts(text, 1, [cut])).toBe(true);
    expect(accepts('['.repeat(5000) + ']'.repeat(5000), 128, [100, 2000])).toBe(false);
  });
});
