/**
 * Usage in the neutral convention (NormalizedUsage) and what billing takes from it. Each format reads
 * its own usage into NormalizedUsage (src/formats/<format>/usage.ts); every relay bills by billableUsage.
 */
import type { TokenUsage } from '../../billing/ledger.js';
import type { NormalizedUsage } from './internal.js';
import { num } from './json.js';

/** A count as reported: a finite number not below zero, floored; else undefined. */
export function tokenCount(v: unknown): number | undefined {
  const n = num(v);
  return n === undefined || n < 0 ? undefined : Math.floor(n);
}

/**
 * The usage to bill, or undefined for a report that cannot be billed by (a missing, negative or
 * non-numeric count is not a zero, or delivered output would be free): the exchange then estimates.
 */
export function billableUsage(u: NormalizedUsage): TokenUsage | undefined {
  if (u.unbillable === true) return undefined;
  return { input: u.input, output: u.output, cachedInput: Math.min(u.cachedInput, u.input), reasoning: Math.min(u.reasoning, u.output) };
}
