// Messages' usage (docs/wire-formats.md C.6): input_tokens exclude cache reads and writes, and a stream's
// usage is cumulative. Every relay of this format, same-format or translated, reads usage here.
import { isRecord, tokenCount as count, type NormalizedUsage } from '../../translate/representation/index.js';

/** Raw Anthropic counters; each one is the last non-null value seen (stream usage is cumulative). */
export interface AnthropicUsageCounters {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
  thinking_tokens?: number;
  /** A counter was present but not a count. */
  invalid?: boolean;
}

/** Overwrites every counter present (non-null) in `u`; never adds. */
export function mergeAnthropicUsage(into: AnthropicUsageCounters, u: unknown): void {
  if (!isRecord(u)) return;
  for (const key of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'] as const) {
    const v = count(u[key]);
    if (v !== undefined) into[key] = v;
    else if (u[key] !== undefined && u[key] !== null) into.invalid = true;
  }
  const thinking = isRecord(u.output_tokens_details) ? count(u.output_tokens_details.thinking_tokens) : undefined;
  if (thinking !== undefined) into.thinking_tokens = thinking;
}

export function usageFromAnthropicCounters(c: AnthropicUsageCounters): NormalizedUsage {
  const cachedInput = c.cache_read_input_tokens ?? 0;
  const cacheWrite = c.cache_creation_input_tokens ?? 0;
  return {
    input: (c.input_tokens ?? 0) + cachedInput + cacheWrite,
    cachedInput,
    cacheWrite,
    output: c.output_tokens ?? 0,
    reasoning: c.thinking_tokens ?? 0,
    ...(c.invalid === true || c.output_tokens === undefined ? { unbillable: true as const } : {}),
  };
}

export function usageFromAnthropic(u: unknown): NormalizedUsage {
  const c: AnthropicUsageCounters = {};
  mergeAnthropicUsage(c, u);
  return usageFromAnthropicCounters(c);
}

export function usageToAnthropic(u: NormalizedUsage): Record<string, number> {
  return {
    input_tokens: Math.max(0, u.input - u.cachedInput - u.cacheWrite),
    output_tokens: u.output,
    cache_creation_input_tokens: u.cacheWrite,
    cache_read_input_tokens: u.cachedInput,
  };
}

/** All prompt tokens reported so far (Anthropic message_start), or undefined when none can be trusted. */
export function anthropicInputTokens(c: AnthropicUsageCounters): number | undefined {
  if (c.invalid === true || c.input_tokens === undefined) return undefined;
  return c.input_tokens + (c.cache_creation_input_tokens ?? 0) + (c.cache_read_input_tokens ?? 0);
}
