// What a usage report bills by: the cache classes stay parts of the prompt, apart from each other.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import type { ModelPricing } from '../../src/catalog/snapshot.js';
import { billablePrompt, billableUsage } from '../../src/relay/billable-usage.js';
import { usageFromAnthropic } from '../../src/formats/anthropic-messages/usage.js';
import { usageFromGemini } from '../../src/formats/gemini/usage.js';
import { usageFromOpenAI } from '../../src/formats/openai-chat/usage.js';

const PRICES: ModelPricing = { input: 3_000_000, output: 15_000_000, cacheRead: 300_000, cacheWrite5m: 3_750_000, cacheWrite1h: 6_000_000, display: { input: '3', output: '15' } };

describe('billableUsage', () => {
  it('keeps reads and both writes apart, and cuts parts that overrun the prompt in the order read, 5m, 1h', () => {
    expect(billableUsage({ input: 100, cacheRead: 30, cacheWrite5m: 20, cacheWrite1h: 10, output: 5, reasoning: 1 })).toEqual({
      input: 100, output: 5, cachedInput: 30, cacheWrite5m: 20, cacheWrite1h: 10, reasoning: 1,
    });
    // A buggy upstream: 60 + 50 + 40 > 100.
    expect(billableUsage({ input: 100, cacheRead: 60, cacheWrite5m: 50, cacheWrite1h: 40, output: 5, reasoning: 9 })).toEqual({
      input: 100, output: 5, cachedInput: 60, cacheWrite5m: 40, cacheWrite1h: 0, reasoning: 5,
    });
    expect(billableUsage({ input: 1, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 1, reasoning: 0, unbillable: true })).toBeUndefined();
  });

  it('records exactly the classes the charge is computed from: never more cache tokens than prompt tokens', () => {
    fc.assert(
      fc.property(fc.nat(10_000), fc.nat(10_000), fc.nat(10_000), fc.nat(10_000), fc.nat(1_000), (input, read, w5, w1, output) => {
        const u = billableUsage({ input, cacheRead: read, cacheWrite5m: w5, cacheWrite1h: w1, output, reasoning: 0 })!;
        const parts = u.cachedInput + (u.cacheWrite5m ?? 0) + (u.cacheWrite1h ?? 0);
        expect(parts).toBeLessThanOrEqual(input);
        const scaled = BigInt(input - parts) * 3_000_000n + BigInt(u.cachedInput) * 300_000n + BigInt(u.cacheWrite5m ?? 0) * 3_750_000n + BigInt(u.cacheWrite1h ?? 0) * 6_000_000n + BigInt(output) * 15_000_000n;
        expect(costMicros(u, PRICES)).toBe(Number((scaled + 999_999n) / 1_000_000n));
      }),
    );
  });
});

describe('billablePrompt: the prompt of a report that may not be final', () => {
  it("Anthropic's message_start: its cache split, though the output count is a placeholder", () => {
    const start = usageFromAnthropic({ input_tokens: 1000, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 100_000, cache_creation: { ephemeral_5m_input_tokens: 60_000, ephemeral_1h_input_tokens: 40_000 } });
    expect(billablePrompt(start)).toEqual({ input: 101_000, cachedInput: 0, cacheWrite5m: 60_000, cacheWrite1h: 40_000 });
  });

  it("a Gemini chunk's prompt, with its cached part, though it has no answer count yet", () => {
    const chunk = usageFromGemini({ promptTokenCount: 500, cachedContentTokenCount: 200, totalTokenCount: 500 });
    expect(chunk.unbillable).toBe(true);
    expect(billablePrompt(chunk)).toEqual({ input: 500, cachedInput: 200, cacheWrite5m: 0, cacheWrite1h: 0 });
  });

  it('none from a report whose prompt count is missing, not a count, or zero', () => {
    expect(billablePrompt(usageFromAnthropic({ output_tokens: 3 }))).toBeUndefined();
    expect(billablePrompt(usageFromAnthropic({ input_tokens: 10, cache_read_input_tokens: 'many' }))).toBeUndefined();
    expect(billablePrompt(usageFromGemini({ cachedContentTokenCount: 200 }))).toBeUndefined();
    expect(billablePrompt(usageFromGemini({ promptTokenCount: 500, cachedContentTokenCount: -1 }))).toBeUndefined();
    expect(billablePrompt(usageFromOpenAI({ completion_tokens: 4 }))).toBeUndefined();
    expect(billablePrompt(usageFromOpenAI({ prompt_tokens: 0, completion_tokens: 0 }))).toBeUndefined();
    // An OpenAI report with its prompt but no output count yet still has a billable prompt.
    expect(billablePrompt(usageFromOpenAI({ prompt_tokens: 42, prompt_tokens_details: { cached_tokens: 40 } }))).toEqual({ input: 42, cachedInput: 40, cacheWrite5m: 0, cacheWrite1h: 0 });
  });
});
