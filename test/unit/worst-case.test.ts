import fc from 'fast-check';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../src/catalog/snapshot.js';
import { costMicros } from '../../src/billing/money.js';
import {
  largestAffordableMaxTokens,
  TOKENS_PER_IMAGE_ALLOWANCE,
  TOKENS_PER_MESSAGE_ALLOWANCE,
  TOKENS_PER_REQUEST_ALLOWANCE,
  worstCase,
} from '../../src/reserve/worst-case.js';

function model(p: { input: number; output: number; reasoning?: number; cacheRead?: number; cacheWrite5m?: number; cacheWrite1h?: number }, contextWindow = 1_000_000, defaultMaxOutputTokens = 8192): CatalogModel {
  return {
    id: 'm', displayName: 'M', kind: 'Abliterated', contextWindow, contextDisplay: '1M',
    pricing: { ...p, display: { input: '', output: '' } },
    supportsTools: true, supportsVision: true, supportsReasoning: true, abliterated: true,
    defaultMaxOutputTokens, aliases: [], created: 0, upstreams: [], source: 'test',
  };
}

describe('worstCase', () => {
  it('bounds input by bytes plus allowances and output by the limit', () => {
    const m = model({ input: 3_000_000, output: 15_000_000 });
    const wc = worstCase({ textBytes: 1000, messages: 3, images: 1, maxOutputTokens: 200 }, m);
    expect(wc.inputTokenBound).toBe(1000 + 3 * TOKENS_PER_MESSAGE_ALLOWANCE + TOKENS_PER_IMAGE_ALLOWANCE + TOKENS_PER_REQUEST_ALLOWANCE);
    expect(wc.outputTokens).toBe(200);
    expect(wc.amount).toBe(Math.ceil((wc.inputTokenBound * 3 + 200 * 15)));
  });

  it('uses the default output limit and caps input and output by the context window (the upstream refuses longer prompts)', () => {
    const m = model({ input: 1_000_000, output: 1_000_000 }, 512_000, 4096);
    expect(worstCase({ textBytes: 10, messages: 1, images: 0, maxOutputTokens: undefined }, m).outputTokens).toBe(4096);
    const big = worstCase({ textBytes: 10_000_000, messages: 1, images: 0, maxOutputTokens: 9_000_000 }, m);
    expect(big.inputTokenBound).toBe(512_000);
    expect(big.outputTokens).toBe(512_000);
  });

  it('counts the tokens an upstream bills beyond the text (PDF pages, its tool prompt)', () => {
    const m = model({ input: 1_000_000, output: 1_000_000 });
    const plain = worstCase({ textBytes: 100, messages: 1, images: 0, maxOutputTokens: 1 }, m);
    const withPages = worstCase({ textBytes: 100, messages: 1, images: 0, addedTokens: 5_600, maxOutputTokens: 1 }, m);
    expect(withPages.inputTokenBound - plain.inputTokenBound).toBe(5_600);
  });

  it('prices output at the dearer of output and reasoning, rounding up', () => {
    const m = model({ input: 1, output: 10, reasoning: 30 });
    const wc = worstCase({ textBytes: 0, messages: 0, images: 0, maxOutputTokens: 1 }, m);
    // (16*1 + 1*30) / 1e6 -> rounds up to 1 µUSD.
    expect(wc.amount).toBe(1);
  });

  it('prices input at the dearest input-side price: a prompt may be written to a cache above the input price', () => {
    const fp = { textBytes: 984, messages: 0, images: 0, maxOutputTokens: 0 };
    // 1,000 input tokens bound; $3 input, $3.75 5-minute write, $6 1-hour write.
    expect(worstCase(fp, model({ input: 3_000_000, output: 1, cacheWrite5m: 3_750_000 })).amount).toBe(3_750);
    expect(worstCase(fp, model({ input: 3_000_000, output: 1, cacheRead: 300_000, cacheWrite5m: 3_750_000, cacheWrite1h: 6_000_000 })).amount).toBe(6_000);
    // A mispriced catalog (cache reads above input) still bounds; cheaper classes never lower the bound.
    expect(worstCase(fp, model({ input: 3_000_000, output: 1, cacheRead: 4_000_000 })).amount).toBe(4_000);
    expect(worstCase(fp, model({ input: 3_000_000, output: 1, cacheRead: 300_000 })).amount).toBe(3_000);
    // The affordable output limit leaves room for the dearest input too: 6,000 µUSD covers the input alone.
    const dear = model({ input: 3_000_000, output: 1_000_000, cacheWrite1h: 6_000_000 });
    expect(largestAffordableMaxTokens(6_000, 1_000, dear)).toBe(0);
    expect(largestAffordableMaxTokens(6_001, 1_000, dear)).toBe(1);
  });

  it('bounds the real cost of any split of the prompt into cache classes', () => {
    const m = model({ input: 3_000_000, output: 15_000_000, cacheRead: 300_000, cacheWrite5m: 3_750_000, cacheWrite1h: 6_000_000 });
    fc.assert(
      fc.property(fc.nat(5_000), fc.nat(5_000), fc.nat(5_000), fc.nat(5_000), fc.nat(500), (uncached, read, w5, w1, out) => {
        const input = uncached + read + w5 + w1;
        const wc = worstCase({ textBytes: input, messages: 0, images: 0, maxOutputTokens: out }, m);
        const actual = costMicros({ input, output: out, cachedInput: read, cacheWrite5m: w5, cacheWrite1h: w1, reasoning: 0 }, m.pricing);
        expect(actual).toBeLessThanOrEqual(wc.amount);
      }),
    );
  });

  it('is a true upper bound of the real cost for random text (o200k tokenizer)', () => {
    const enc = { encode: (s: string): number[] => encode(s, { disallowedSpecial: new Set() }) };
    const m = model({ input: 2_500_000, output: 10_000_000 });
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'binary', maxLength: 200 }), { minLength: 1, maxLength: 5 }), fc.nat(500), (msgs, out) => {
        const textBytes = msgs.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
        const tokens = msgs.reduce((n, s) => n + enc.encode(s).length, 0);
        const wc = worstCase({ textBytes, messages: msgs.length, images: 0, maxOutputTokens: out }, m);
        expect(tokens).toBeLessThanOrEqual(wc.inputTokenBound);
        const actual = costMicros({ input: tokens, output: out, cachedInput: 0, reasoning: 0 }, m.pricing);
        expect(actual).toBeLessThanOrEqual(wc.amount);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses negative counts', () => {
    expect(() => worstCase({ textBytes: -1, messages: 0, images: 0, maxOutputTokens: 1 }, model({ input: 1, output: 1 }))).toThrow(RangeError);
  });
});

describe('largestAffordableMaxTokens', () => {
  it('is the largest output limit whose worst case fits, for random inputs', () => {
    fc.assert(
      fc.property(fc.nat(10_000_000), fc.nat(200_000), fc.integer({ min: 1, max: 50_000_000 }), fc.integer({ min: 1, max: 80_000_000 }), (available, inBound, pin, pout) => {
        const m = model({ input: pin, output: pout }, 1_000_000);
        const n = largestAffordableMaxTokens(available, inBound, m);
        const cost = (o: number): number =>
          worstCase({ textBytes: inBound - TOKENS_PER_REQUEST_ALLOWANCE, messages: 0, images: 0, maxOutputTokens: o }, m).amount;
        if (inBound < TOKENS_PER_REQUEST_ALLOWANCE) return;
        if (n === 0) {
          expect(cost(0) > available || cost(1) > available).toBe(true);
        } else {
          expect(cost(n)).toBeLessThanOrEqual(available);
          if (n < m.contextWindow) expect(cost(n + 1)).toBeGreaterThan(available);
        }
      }),
    );
  });

  it('is 0 when not even the input fits and the context window when output is free', () => {
    expect(largestAffordableMaxTokens(1, 2_000_000, model({ input: 1_000_000, output: 1 }))).toBe(0);
    expect(largestAffordableMaxTokens(100, 10, model({ input: 1, output: 0 }, 4096))).toBe(4096);
  });
});
