// Anthropic usage -> the ledger's TokenUsage. input_tokens excludes cache reads and writes, so
// the total input is their sum; stream usage is cumulative (the newest value of each counter wins).
import type { TokenUsage } from '../../billing/ledger.js';
import { isObject } from '../json-shape.js';

export interface AnthropicUsageCounters {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
  thinking_tokens?: number;
  /** A counter was present but not a count (negative, non-numeric): the report cannot be billed by. */
  invalid?: boolean;
}

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined);

/** Folds a usage object into the running counters: set, never add. */
export function mergeAnthropicUsage(into: AnthropicUsageCounters, raw: unknown): void {
  if (!isObject(raw)) return;
  for (const field of ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const) {
    const v = count(raw[field]);
    if (v !== undefined) into[field] = v;
    else if (raw[field] !== undefined && raw[field] !== null) into.invalid = true;
  }
  const details = raw.output_tokens_details;
  if (isObject(details)) {
    const t = count(details.thinking_tokens);
    if (t !== undefined) into.thinking_tokens = t;
  }
}

/** All prompt tokens reported so far (message_start), or undefined when none can be trusted. */
export function anthropicInputTokens(c: AnthropicUsageCounters): number | undefined {
  if (c.invalid === true || c.input_tokens === undefined) return undefined;
  return c.input_tokens + (c.cache_creation_input_tokens ?? 0) + (c.cache_read_input_tokens ?? 0);
}

/**
 * The usage to bill, or undefined when the counters cannot be billed by (an output count never
 * reported, or a counter that was not a count): the exchange then estimates, never charges zero.
 */
export function anthropicTokenUsage(c: AnthropicUsageCounters): TokenUsage | undefined {
  if (c.invalid === true || c.output_tokens === undefined) return undefined;
  const cacheRead = c.cache_read_input_tokens ?? 0;
  const input = (c.input_tokens ?? 0) + (c.cache_creation_input_tokens ?? 0) + cacheRead;
  const output = c.output_tokens ?? 0;
  return { input, output, cachedInput: cacheRead, reasoning: Math.min(c.thinking_tokens ?? 0, output) };
}
