import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';

describe('usdPerMillionToMicros', () => {
  it('converts the catalogue prices exactly', () => {
    expect(usdPerMillionToMicros('0.30')).toBe(300_000);
    expect(usdPerMillionToMicros('1.00')).toBe(1_000_000);
    expect(usdPerMillionToMicros('2.5')).toBe(2_500_000);
    expect(usdPerMillionToMicros('0')).toBe(0);
    expect(usdPerMillionToMicros('0.000001')).toBe(1);
    expect(usdPerMillionToMicros('9999.999999')).toBe(9_999_999_999);
    // 0.29 * 1e6 is 289999.99999999994 in floating point: string arithmetic must not go there.
    expect(usdPerMillionToMicros('0.29')).toBe(290_000);
  });

  it.each(['', '-1', '+1', '1.', '.5', '01', '0.1234567', '10000', '1e3', ' 1', '1,5', 'NaN', '0x10'])(
    'rejects %j',
    (bad) => {
      expect(() => usdPerMillionToMicros(bad)).toThrow(RangeError);
    },
  );

  it('rejects non-strings', () => {
    expect(() => usdPerMillionToMicros(0.3 as unknown as string)).toThrow(RangeError);
  });

  it('agrees with BigInt arithmetic on every valid decimal', () => {
    const decimal = fc
      .tuple(fc.integer({ min: 0, max: 9999 }), fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }))
      .map(([whole, frac]) => (frac === undefined ? String(whole) : `${whole}.${frac}`));
    fc.assert(
      fc.property(decimal, (s) => {
        const [w, f = ''] = s.split('.');
        const expected = BigInt(w!) * 1_000_000n + BigInt(f.padEnd(6, '0') || '0');
        expect(BigInt(usdPerMillionToMicros(s))).toBe(expected);
        expect(Number.isSafeInteger(usdPerMillionToMicros(s))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});
