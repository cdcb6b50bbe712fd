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
  // Each cache class keeps its own count; costMicros cuts parts that overrun `input`, so none is priced twice.
  return {
    input: u.input,
    output: u.output,
    cachedInput: Math.min(u.cacheRead, u.input),
    cacheWrite5m: Math.min(u.cacheWrite5m, u.input),
    cacheWrite1h: Math.min(u.cacheWrite1h, u.input),
    reasoning: Math.min(u.reasoning, u.output),
  };
}
