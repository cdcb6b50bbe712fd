import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ModelPricing } from '../../src/catalog/snapshot.js';
import { costMicros, formatUsd, formatUsdAmount } from '../../src/billing/money.js';
import { describeInvalidTopUp, feeCents, formatCents, MIN_TOP_UP_CENTS, parseUsdCents, quoteTopUp } from '../../src/top-ups/quote.js';

const pricing = (p: Partial<ModelPricing>): ModelPricing => ({
  input: 0,
  output: 0,
  display: { input: '0', output: '0' },
  ...p,
});

describe('costMicros', () => {
  it('prices input and output per million tokens, rounding up once', () => {
    // 1000 tokens at $3/M = 3000 µUSD; 500 at $15/M = 7500 µUSD.
    expect(costMicros({ input: 1000, output: 500, cachedInput: 0, reasoning: 0 }, pricing({ input: 3_000_000, output: 15_000_000 }))).toBe(10_500);
    // 1 token at $0.10/M = 0.1 µUSD -> 1 µUSD (rounded up at the end, not per part).
    expect(costMicros({ input: 1, output: 1, cachedInput: 0, reasoning: 0 }, pricing({ input: 100_000, output: 100_000 }))).toBe(1);
    expect(costMicros({ input: 0, output: 0, cachedInput: 0, reasoning: 0 }, pricing({ input: 5, output: 5 }))).toBe(0);
  });

  it('prices cached input and reasoning as subsets, each token once', () => {
    const p = pricing({ input: 2_000_000, output: 10_000_000, cacheRead: 500_000, reasoning: 20_000_000 });
    // 600 uncached*2 + 400 cached*0.5 + 100 plain out*10 + 200 reasoning*20 (µUSD per token / 1e6 ... in whole µUSD)
    expect(costMicros({ input: 1000, output: 300, cachedInput: 400, reasoning: 200 }, p)).toBe(1200 + 200 + 1000 + 4000);
    // Without cached/reasoning prices they cost input/output.
    const q = pricing({ input: 2_000_000, output: 10_000_000 });
    expect(costMicros({ input: 1000, output: 300, cachedInput: 400, reasoning: 200 }, q)).toBe(2000 + 3000);
  });

  it('prices cache reads and 5-minute and 1-hour cache writes each at their own price, each token once', () => {
    // Anthropic-like: $3 input, $0.30 read, $3.75 5-minute write, $6 1-hour write, $15 output.
    const p = pricing({ input: 3_000_000, output: 15_000_000, cacheRead: 300_000, cacheWrite5m: 3_750_000, cacheWrite1h: 6_000_000 });
    // 1,000 uncached*3 + 10,000 read*0.3 + 2,000 w5m*3.75 + 1,000 w1h*6 + 100 out*15 (µUSD).
    const usage = { input: 14_000, output: 100, cachedInput: 10_000, cacheWrite5m: 2_000, cacheWrite1h: 1_000, reasoning: 0 };
    expect(costMicros(usage, p)).toBe(3_000 + 3_000 + 7_500 + 6_000 + 1_500);
    // Without cache prices every class costs the input price: the plain input cost, never more or less.
    expect(costMicros(usage, pricing({ input: 3_000_000, output: 15_000_000 }))).toBe(42_000 + 1_500);
    // Parts above the whole are cut (read first, then 5-minute, then 1-hour writes): 14,000 tokens in all.
    const over = { ...usage, cachedInput: 12_000, cacheWrite5m: 5_000 };
    expect(costMicros(over, p)).toBe(3_600 + 7_500 + 1_500);
  });

  it('is exact where doubles are not (huge counts, odd prices)', () => {
    const p = pricing({ input: 999_999_999, output: 1 });
    // 9e6 tokens * 999,999,999 = 8,999,999,991,000,000 (> 2^53 as the intermediate) / 1e6 = 8,999,999,991 exactly.
    expect(costMicros({ input: 9_000_000, output: 0, cachedInput: 0, reasoning: 0 }, p)).toBe(8_999_999_991);
    expect(costMicros({ input: 9_000_001, output: 0, cachedInput: 0, reasoning: 0 }, p)).toBe(9_000_000_991);
  });

  it('agrees with a BigInt reference for random usage', () => {
    fc.assert(
      fc.property(
        fc.nat(2_000_000), fc.nat(2_000_000), fc.nat(2_000_000), fc.nat(2_000_000),
        fc.nat(100_000_000), fc.nat(100_000_000), fc.option(fc.nat(100_000_000), { nil: undefined }), fc.option(fc.nat(100_000_000), { nil: undefined }),
        fc.nat(2_000_000), fc.nat(2_000_000), fc.option(fc.nat(100_000_000), { nil: undefined }), fc.option(fc.nat(100_000_000), { nil: undefined }),
        (input, cachedRaw, output, reasoningRaw, pin, pout, pc, pr, w5Raw, w1Raw, pw5, pw1) => {
          const cached = cachedRaw % (input + 1);
          const w5 = w5Raw % (input - cached + 1);
          const w1 = w1Raw % (input - cached - w5 + 1);
          const reasoning = reasoningRaw % (output + 1);
          const p = pricing({ input: pin, output: pout, cacheRead: pc, cacheWrite5m: pw5, cacheWrite1h: pw1, reasoning: pr });
          const scaled =
            BigInt(input - cached - w5 - w1) * BigInt(pin) + BigInt(cached) * BigInt(pc ?? pin) +
            BigInt(w5) * BigInt(pw5 ?? pin) + BigInt(w1) * BigInt(pw1 ?? pin) +
            BigInt(output - reasoning) * BigInt(pout) + BigInt(reasoning) * BigInt(pr ?? pout);
          const expected = scaled / 1_000_000n + (scaled % 1_000_000n === 0n ? 0n : 1n);
          expect(costMicros({ input, output, cachedInput: cached, cacheWrite5m: w5, cacheWrite1h: w1, reasoning }, p)).toBe(Number(expected));
        },
      ),
    );
  });

  it('never throws: odd counts are cut or zeroed, absurd ones clamped (settlement must always be computable)', () => {
    const p = pricing({ input: 1_000_000, output: 2_000_000 });
    expect(costMicros({ input: -1, output: 0, cachedInput: 0, reasoning: 0 }, p)).toBe(0);
    expect(costMicros({ input: 1.5, output: 0, cachedInput: 0, reasoning: 0 }, p)).toBe(1);
    expect(costMicros({ input: Number.NaN, output: 2, cachedInput: 0, reasoning: 0 }, p)).toBe(4);
    // An upstream claiming 1e30 output tokens: the largest exact amount, never an exception (on
    // 7339c82 this threw and the request was never settled). Settlement charges at most the hold.
    expect(costMicros({ input: 10, output: 1e30, cachedInput: 0, reasoning: 0 }, p)).toBe(Number.MAX_SAFE_INTEGER);
    expect(costMicros({ input: Number.POSITIVE_INFINITY, output: 0, cachedInput: 0, reasoning: 0 }, p)).toBe(Number.MAX_SAFE_INTEGER);
  });
});

describe('formatUsdAmount', () => {
  it('writes cents always and further places only where they are not zero', () => {
    expect([500_000_000, 20, 0, 1_234_567, 1_230_000, 1_200_000, 10].map(formatUsdAmount)).toEqual(['500.00', '0.00002', '0.00', '1.234567', '1.23', '1.20', '0.00001']);
  });
});

describe('formatUsd', () => {
  it('formats micro-USD with six decimals exactly', () => {
    expect(formatUsd(1_234_567)).toBe('1.234567');
    expect(formatUsd(5)).toBe('0.000005');
    expect(formatUsd(0)).toBe('0.000000');
    expect(formatUsd(-2_500_000)).toBe('-2.500000');
    expect(formatUsd(9_007_199_254_740_991)).toBe('9007199254.740991');
  });
});

describe('top-up quotes (cents, as processors charge)', () => {
  it('adds 3.5% rounded up to the cent plus 30 cents, from a 5 USD minimum', () => {
    expect(quoteTopUp(500)).toEqual({ creditCents: 500, feeCents: 48, totalCents: 548 });
    expect(quoteTopUp(1000)).toEqual({ creditCents: 1000, feeCents: 65, totalCents: 1065 });
    expect(quoteTopUp(10_000)).toEqual({ creditCents: 10_000, feeCents: 380, totalCents: 10_380 });
    // 3.5% of 5.01 USD is 17.535 cents: 18.
    expect(feeCents(501)).toBe(48);
    // 3.5% of 20.00 is exactly 70 cents: no rounding.
    expect(feeCents(2000)).toBe(100);
    expect(describeInvalidTopUp(MIN_TOP_UP_CENTS - 1)).toMatch(/minimum top-up is 5.00 USD; 4.99 USD/);
    expect(describeInvalidTopUp(0)).toMatch(/Enter an amount/);
    expect(describeInvalidTopUp(undefined)).toMatch(/Enter an amount/);
    expect(() => quoteTopUp(499)).toThrow(RangeError);
  });

  it('fee property: never less than 3.5% + 30 cents, never a whole cent more', () => {
    for (let c = MIN_TOP_UP_CENTS; c < 200_000; c += 7) {
      const fee = feeCents(c);
      expect((fee - 30) * 1000).toBeGreaterThanOrEqual(c * 35);
      expect((fee - 30 - 1) * 1000).toBeLessThan(c * 35);
    }
  });

  it('reads typed amounts as cents without floats, and formats cents', () => {
    expect(parseUsdCents('10')).toBe(1000);
    expect(parseUsdCents('10.5')).toBe(1050);
    expect(parseUsdCents('$ 10.05')).toBe(1005);
    expect(parseUsdCents('0.1')).toBe(10);
    for (const bad of ['', '1e3', '10.555', '-5', 'ten', '1,000', null, {}]) expect(parseUsdCents(bad)).toBeUndefined();
    expect(formatCents(1065)).toBe('10.65');
    expect(formatCents(5)).toBe('0.05');
    expect(formatCents(-48)).toBe('-0.48');
  });
});
