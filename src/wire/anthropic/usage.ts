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
}

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined);

/** Folds a usage object into the running counters: set, never add. */
export function mergeAnthropicUsage(into: AnthropicUsageCounters, raw: unknown): void {
  if (!isObject(raw)) return;
  for (const field of ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const) {
    const v = count(raw[field]);
    if (v !== undefined) into[field] = v;
  }
  const details = raw.output_tokens_details;
  if (isObject(details)) {
    const t = count(details.thinking_tokens);
    if (t !== undefined) into.thinking_tokens = t;
  }
}

export function anthropicTokenUsage(c: AnthropicUsageCounters): TokenUsage {
  const cacheRead = c.cache_read_input_tokens ?? 0;
  const input = (c.input_tokens ?? 0) + (c.cache_creation_input_tokens ?? 0) + cacheRead;
  const output = c.output_tokens ?? 0;
  return { input, output, cachedInput: cacheRead, reasoning: Math.min(c.thinking_tokens ?? 0, output) };
}
