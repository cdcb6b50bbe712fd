// Catalog prices are decimal USD strings per 1M tokens; the money path needs integer micro-USD.
// Converted by string arithmetic so that "0.30" is exactly 300000 and never 299999.99999.
import type { Micros } from './snapshot.js';

/** The CRD's price pattern: at most 9999 USD, at most 6 decimals, no leading zeros, no sign. */
export const PRICE_PATTERN = /^(0|[1-9][0-9]{0,3})(\.[0-9]{1,6})?$/;

/** "0.30" -> 300000: integer micro-USD per 1M tokens. Throws a RangeError on anything else. */
export function usdPerMillionToMicros(decimal: string): Micros {
  if (typeof decimal !== 'string' || !PRICE_PATTERN.test(decimal)) {
    throw new RangeError(
      `price ${JSON.stringify(decimal)} is not a decimal USD amount with at most 6 decimals and at most 9999`,
    );
  }
  const dot = decimal.indexOf('.');
  const whole = dot === -1 ? decimal : decimal.slice(0, dot);
  const fraction = dot === -1 ? '' : decimal.slice(dot + 1);
  // Both parts are short digit strings (<= 4 and <= 6 digits), so the integers stay far below 2^53.
  return Number.parseInt(whole, 10) * 1_000_000 + Number.parseInt(fraction.padEnd(6, '0'), 10);
}
