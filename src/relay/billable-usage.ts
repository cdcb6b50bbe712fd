// What billing takes from a usage report in the internal representation's convention: every relay,
// same-format or translated, bills by this.
import type { TokenUsage } from '../billing/ledger.js';
import type { NormalizedUsage } from '../representation/index.js';

/** The prompt's part of a usage: all its tokens, and the cache classes among them. */
export type PromptUsage = Pick<TokenUsage, 'input' | 'cachedInput' | 'cacheWrite5m' | 'cacheWrite1h'>;

/**
 * The cache classes are parts of `input` and apart from each other: parts that overrun the whole (a
 * buggy upstream) are cut in the order read, 5-minute write, 1-hour write, as costMicros cuts them, so
 * the record shows exactly the classes the charge was computed from.
 */
function promptClasses(u: NormalizedUsage): PromptUsage {
  const cachedInput = Math.min(u.cacheRead, u.input);
  const cacheWrite5m = Math.min(u.cacheWrite5m, u.input - cachedInput);
  const cacheWrite1h = Math.min(u.cacheWrite1h, u.input - cachedInput - cacheWrite5m);
  return { input: u.input, cachedInput, cacheWrite5m, cacheWrite1h };
}

/**
 * The usage to bill, or undefined for a report that cannot be billed by (a missing, negative or
 * non-numeric count is not a zero, or delivered output would be free): the exchange then estimates.
 */
export function billableUsage(u: NormalizedUsage): TokenUsage | undefined {
  if (u.unbillable === true) return undefined;
  return { ...promptClasses(u), output: u.output, reasoning: Math.min(u.reasoning, u.output) };
}

/**
 * The prompt's usage from a report that may not be final (Anthropic's message_start, a Gemini chunk):
 * what an exchange cut before its final usage is charged for its prompt. Undefined when the report's
 * prompt cannot be billed by, or counts no token (no prompt is empty: such a report says nothing).
 */
export function billablePrompt(u: NormalizedUsage): PromptUsage | undefined {
  if (u.promptUnbillable === true || u.input <= 0) return undefined;
  return promptClasses(u);
}
