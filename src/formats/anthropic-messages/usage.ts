// Messages' usage (docs/wire-formats.md C.6): input_tokens exclude cache reads and writes, and a stream's
// usage is cumulative. Every relay of this format, same-format or translated, reads usage here.
//
// Cache classes: `cache_read_input_tokens` are reads; `cache_creation_input_tokens` are all writes, which
// `cache_creation.ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens` split by the cache's lifetime.
// The total is what counts: the 1-hour part is read from the split (never above the total) and the rest
// are 5-minute writes, so a report without the split (older API versions) bills every write as 5-minute.
import { isRecord, tokenCount as count, type NormalizedUsage } from '../../representation/index.js';

/** Raw Anthropic counters; each one is the last non-null value seen (stream usage is cumulative). */
export interface AnthropicUsageCounters {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
  /** `cache_creation.ephemeral_1h_input_tokens`. */
  cache_creation_1h?: number;
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
  if (isRecord(u.cache_creation)) {
    const v = u.cache_creation.ephemeral_1h_input_tokens;
    const oneHour = count(v);
    if (oneHour !== undefined) into.cache_creation_1h = oneHour;
    else if (v !== undefined && v !== null) into.invalid = true;
  }
  const thinking = isRecord(u.output_tokens_details) ? count(u.output_tokens_details.thinking_tokens) : undefined;
  if (thinking !== undefined) into.thinking_tokens = thinking;
}

export function usageFromAnthropicCounters(c: AnthropicUsageCounters): NormalizedUsage {
  const cacheRead = c.cache_read_input_tokens ?? 0;
  const writes = c.cache_creation_input_tokens ?? 0;
  const cacheWrite1h = Math.min(c.cache_creation_1h ?? 0, writes);
  return {
    input: (c.input_tokens ?? 0) + cacheRead + writes,
    cacheRead,
    cacheWrite5m: writes - cacheWrite1h,
    cacheWrite1h,
    output: c.output_tokens ?? 0,
    reasoning: c.thinking_tokens ?? 0,
    ...(c.invalid === true || c.output_tokens === undefined ? { unbillable: true as const } : {}),
    // message_start already has the prompt's counts; a counter that is not a count spoils them all.
    ...(c.invalid === true || c.input_tokens === undefined ? { promptUnbillable: true as const } : {}),
  };
}

export function usageFromAnthropic(u: unknown): NormalizedUsage {
  const c: AnthropicUsageCounters = {};
  mergeAnthropicUsage(c, u);
  return usageFromAnthropicCounters(c);
}

export function usageToAnthropic(u: NormalizedUsage): Record<string, unknown> {
  const writes = u.cacheWrite5m + u.cacheWrite1h;
  return {
    input_tokens: Math.max(0, u.input - u.cacheRead - writes),
    output_tokens: u.output,
    cache_creation_input_tokens: writes,
    cache_read_input_tokens: u.cacheRead,
    cache_creation: { ephemeral_5m_input_tokens: u.cacheWrite5m, ephemeral_1h_input_tokens: u.cacheWrite1h },
  };
}
