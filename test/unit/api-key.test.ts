import { describe, expect, it } from 'vitest';
import {
  API_KEY_RANDOM_LENGTH,
  describeMalformedKey,
  generateApiKey,
  hashApiKey,
  isWellFormedKey,
  keyDisplayHint,
} from '../../src/accounts/api-key.js';

describe('API key format', () => {
  it('is sk-<marker>-<43 base62 chars>, at least 256 bits of randomness', () => {
    const key = generateApiKey('tg');
    expect(key).toMatch(/^sk-tg-[A-Za-z0-9]{43}$/);
    expect(API_KEY_RANDOM_LENGTH * Math.log2(62)).toBeGreaterThanOrEqual(256);
    expect(isWellFormedKey(key, 'tg')).toBe(true);
    expect(isWellFormedKey(key, 'other')).toBe(false);
    expect(describeMalformedKey(key, 'tg')).toBeUndefined();
  });

  it('never repeats and uses the whole alphabet roughly evenly', () => {
    const keys = Array.from({ length: 2000 }, () => generateApiKey('tg'));
    expect(new Set(keys).size).toBe(keys.length);
    const counts = new Map<string, number>();
    for (const k of keys) for (const c of k.slice(6)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = (2000 * 43) / 62;
    for (const n of counts.values()) {
      expect(n).toBeGreaterThan(expected * 0.75);
      expect(n).toBeLessThan(expected * 1.25);
    }
  });

  it('hashes with SHA-256 hex', () => {
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('shows only the prefix, four leading and four trailing characters', () => {
    const key = `sk-tg-ABCD${'x'.repeat(35)}wxyz`;
    expect(keyDisplayHint(key)).toBe('sk-tg-ABCD…wxyz');
  });
});

describe('describeMalformedKey', () => {
  const good = generateApiKey('tg');
  const cases: Array<[string, string, RegExp]> = [
    ['empty', '', /No API key/],
    ['blank', '   ', /blank/],
    ['doubled Bearer', `Bearer ${good}`, /Bearer.*only once/],
    ['leading space', ` ${good}`, /spaces before or after/],
    ['inner space', `${good.slice(0, 20)} ${good.slice(20)}`, /spaces or line breaks inside/],
    ['wrong prefix', good.replace('sk-tg-', 'sk-xx-'), /does not start with "sk-tg-"/],
    ['invalid character', `${good.slice(0, 20)}*${good.slice(21)}`, /character that never appears.*position 21/],
    ['missing characters', good.slice(0, -2), /too short: 2 characters are missing/],
    ['one missing character', good.slice(0, -1), /too short: 1 character is missing/],
  ];
  for (const [name, value, reason] of cases) {
    it(`explains ${name} without echoing the key`, () => {
      const msg = describeMalformedKey(value, 'tg');
      expect(msg).toMatch(reason);
      expect(isWellFormedKey(value, 'tg')).toBe(false);
      const random = good.slice(6);
      // No run of 8 characters of the secret appears in the message.
      for (let i = 0; i + 8 <= random.length; i++) expect(msg).not.toContain(random.slice(i, i + 8));
    });
  }
});
