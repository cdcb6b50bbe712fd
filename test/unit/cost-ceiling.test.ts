// The cost ceiling's arithmetic and parsing (src/reserve/cost-ceiling.ts): the header read as exact
// micro-USD or refused with a 400 naming it; the lower of header and key default in force; and under a
// ceiling, the largest output limit whose worst case fits, or a 402 naming the ceiling and the prompt's cost.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../src/catalog/snapshot.js';
import { ceilingInForce, MAX_COST_CEILING, parseCostCeilingHeader, withinCeiling } from '../../src/reserve/cost-ceiling.js';
import { worstCase, type RequestFootprint } from '../../src/reserve/worst-case.js';
import { GatewayError } from '../../src/request/gateway-error.js';

function model(p: { input: number; output: number; reasoning?: number; cacheWrite1h?: number }, contextWindow = 1_000_000, defaultMaxOutputTokens = 8192): CatalogModel {
  return {
    id: 'm', displayName: 'M', kind: 'Abliterated', contextWindow, contextDisplay: '1M',
    pricing: { ...p, display: { input: '', output: '' } },
    supportsTools: true, supportsVision: true, supportsReasoning: true, abliterated: true,
    defaultMaxOutputTokens, aliases: [], created: 0, upstreams: [], source: 'test',
  };
}

function refusal(run: () => unknown): GatewayError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }
  throw new Error('expected a refusal');
}

describe('the x-tollgate-max-cost-usd header', () => {
  it('is read as exact micro-USD from its digits', () => {
    expect(parseCostCeilingHeader(undefined)).toBeUndefined();
    expect(parseCostCeilingHeader('0.05')).toBe(50_000);
    expect(parseCostCeilingHeader('1')).toBe(1_000_000);
    expect(parseCostCeilingHeader('0.000001')).toBe(1);
    expect(parseCostCeilingHeader('0')).toBe(0);
    expect(parseCostCeilingHeader(' 12.5 ')).toBe(12_500_000);
    // 0.1 + 0.2 is not 0.3 in floats; in digits it is.
    expect(parseCostCeilingHeader('0.300000')).toBe(300_000);
    expect(parseCostCeilingHeader('1000000')).toBe(MAX_COST_CEILING);
  });

  it('refuses what is not one non-negative amount of at most six decimals up to the bound, with a 400 naming the header', () => {
    for (const [value, says] of [
      ['-0.01', 'must not be negative'],
      ['-0', 'must not be negative'],
      ['0.1234567', 'has more than 6 decimals'],
      ['', 'is empty'],
      ['abc', 'is not a decimal amount of USD'],
      ['.5', 'is not a decimal amount of USD'],
      ['5.', 'is not a decimal amount of USD'],
      ['+1', 'is not a decimal amount of USD'],
      ['1e3', 'is not a decimal amount of USD'],
      ['0x10', 'is not a decimal amount of USD'],
      ['Infinity', 'is not a decimal amount of USD'],
      ['1,5', 'is not a decimal amount of USD'],
      ['0.05, 0.10', 'is not a decimal amount of USD'],
      ['1000000.000001', 'is above the largest ceiling taken, 1000000.000000 USD'],
      ['123456789012345678901234567890', 'is above the largest ceiling taken'],
    ] as const) {
      const e = refusal(() => parseCostCeilingHeader(value));
      expect([e.status, e.code], value).toEqual([400, 'invalid_cost_ceiling']);
      expect(e.message, value).toContain(`The x-tollgate-max-cost-usd header ${says}`);
    }
    // A repeated header arrives as two values: two ceilings are not one.
    expect(refusal(() => parseCostCeilingHeader(['0.05', '0.10'])).status).toBe(400);
  });

  it('round-trips every amount of micro-USD up to the bound', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_COST_CEILING }), (micros) => {
        const text = `${Math.floor(micros / 1_000_000)}.${String(micros % 1_000_000).padStart(6, '0')}`;
        expect(parseCostCeilingHeader(text)).toBe(micros);
      }),
    );
  });
});

describe('the ceiling in force', () => {
  it('is the lower of the header and the key default; a header cannot raise the key default', () => {
    expect(ceilingInForce(undefined, undefined)).toBeUndefined();
    expect(ceilingInForce(500, undefined)).toEqual({ amount: 500, setBy: 'header' });
    expect(ceilingInForce(undefined, 700)).toEqual({ amount: 700, setBy: 'key' });
    expect(ceilingInForce(500, 700)).toEqual({ amount: 500, setBy: 'header' });
    expect(ceilingInForce(900, 700)).toEqual({ amount: 700, setBy: 'key' });
    expect(ceilingInForce(700, 700)).toEqual({ amount: 700, setBy: 'header' });
  });
});

describe('withinCeiling', () => {
  const opts = { minOutputTokens: 1, outputLimitField: 'max_tokens' };
  // $3 input, $15 output per 1M (an output token is 15 µUSD), a 1-hour cache write at $6 (the dearest input price).
  const m = model({ input: 3_000_000, output: 15_000_000, cacheWrite1h: 6_000_000 });
  const fp: RequestFootprint = { textBytes: 4_000, messages: 2, images: 0, maxOutputTokens: 4_000 };

  it('keeps a worst case that fits as it is', () => {
    const requested = worstCase(fp, m);
    expect(withinCeiling(requested, fp, m, { amount: requested.amount, setBy: 'header' }, opts)).toBe(requested);
  });

  it('lowers the output limit to the largest whose worst case fits: one more token would not', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 1, max: 50_000 }), fc.integer({ min: 1, max: 200_000 }), (textBytes, asked, ceiling) => {
        const f: RequestFootprint = { textBytes, messages: 1, images: 0, maxOutputTokens: asked };
        const requested = worstCase(f, m);
        let bound;
        try {
          bound = withinCeiling(requested, f, m, { amount: ceiling, setBy: 'header' }, opts);
        } catch (err) {
          // Refused only when even one output token is above the ceiling.
          expect((err as GatewayError).status).toBe(402);
          expect(worstCase({ ...f, maxOutputTokens: 1 }, m).amount).toBeGreaterThan(ceiling);
          return;
        }
        expect(bound.inputTokenBound).toBe(requested.inputTokenBound);
        if (requested.amount <= ceiling) {
          expect(bound).toBe(requested);
        } else {
          expect(bound.outputTokens).toBeLessThan(asked);
          expect(bound.amount).toBeLessThanOrEqual(ceiling);
          expect(worstCase({ ...f, maxOutputTokens: bound.outputTokens + 1 }, m).amount).toBeGreaterThan(ceiling);
        }
      }),
    );
  });

  it('refuses with a 402 naming the ceiling, who set it and the prompt\'s cost when not even one output token fits', () => {
    const requested = worstCase(fp, m);
    const promptCost = worstCase({ ...fp, maxOutputTokens: 1 }, m).amount;
    const e = refusal(() => withinCeiling(requested, fp, m, { amount: promptCost - 1, setBy: 'header' }, opts));
    expect([e.status, e.code]).toEqual([402, 'cost_ceiling_too_low']);
    expect(e.message).toContain(`may cost up to 0.${String(promptCost).padStart(6, '0')} USD, above the ceiling of 0.${String(promptCost - 1).padStart(6, '0')} USD set by x-tollgate-max-cost-usd`);
    expect(e.details).toMatchObject({ ceiling_micro_usd: promptCost - 1, prompt_cost_micro_usd: promptCost, ceiling_set_by: 'x-tollgate-max-cost-usd' });
    // At exactly the prompt's cost with one token, one token is served.
    expect(withinCeiling(requested, fp, m, { amount: promptCost, setBy: 'header' }, opts).outputTokens).toBe(1);
    const byKey = refusal(() => withinCeiling(requested, fp, m, { amount: 10, setBy: 'key' }, opts));
    expect(byKey.message).toContain("set as this key's max cost per request (a x-tollgate-max-cost-usd header can lower it, not raise it)");
  });

  it('never goes below the smallest limit the bodies take (a thinking budget): then it refuses and says why', () => {
    const thinking = { minOutputTokens: 2_001, outputLimitField: 'max_tokens' };
    const requested = worstCase({ ...fp, maxOutputTokens: 8_000 }, m);
    const atMinimum = worstCase({ ...fp, maxOutputTokens: 2_001 }, m).amount;
    expect(withinCeiling(requested, fp, m, { amount: atMinimum, setBy: 'header' }, thinking).outputTokens).toBe(2_001);
    const e = refusal(() => withinCeiling(requested, fp, m, { amount: atMinimum - 1, setBy: 'header' }, thinking));
    expect(e.status).toBe(402);
    expect(e.message).toContain('with the 2001 output tokens its thinking budget needs (max_tokens above budget_tokens)');
    expect(e.details).toMatchObject({ prompt_cost_micro_usd: atMinimum });
  });

  it('with the default output limit (none asked), lowers from the model default', () => {
    const none: RequestFootprint = { ...fp, maxOutputTokens: undefined };
    const requested = worstCase(none, m);
    expect(requested.outputTokens).toBe(8192);
    const bound = withinCeiling(requested, none, m, { amount: 50_000, setBy: 'key' }, opts);
    expect(bound.outputTokens).toBeLessThan(8192);
    expect(bound.amount).toBeLessThanOrEqual(50_000);
  });
});
