// What billing takes from a usage report in the internal representation's convention: every relay,
// same-format or translated, bills by this.
import type { TokenUsage } from '../billing/ledger.js';
import type { NormalizedUsage } from '../translate/representation/index.js';

/**
 * The usage to bill, or undefined for a report that cannot be billed by (a missing, negative or
 * non-numeric count is not a zero, or delivered output would be free): the exchange then estimates.
 */
export function billableUsage(u: NormalizedUsage): TokenUsage | undefined {
  if (u.unbillable === true) return undefined;
  // The cache classes are parts of `input` and apart from each other: parts that overrun the whole (a
  // buggy upstream) are cut in the order read, 5-minute write, 1-hour write, as costMicros cuts them, so
  // the record shows exactly the classes the charge was computed from.
  const cachedInput = Math.min(u.cacheRead, u.input);
  const cacheWrite5m = Math.min(u.cacheWrite5m, u.input - cachedInput);
  const cacheWrite1h = Math.min(u.cacheWrite1h, u.input - cachedInput - cacheWrite5m);
  return { input: u.input, output: u.output, cachedInput, cacheWrite5m, cacheWrite1h, reasoning: Math.min(u.reasoning, u.output) };
}
