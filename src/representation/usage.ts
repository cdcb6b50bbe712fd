/** Counts as usage reports carry them; each format reads its own usage (src/formats/<format>/usage.ts). */
import type { NormalizedUsage } from './internal.js';
import { isRecord, num } from './json.js';

/** A count as reported: a finite number not below zero, floored; else undefined. */
export function tokenCount(v: unknown): number | undefined {
  const n = num(v);
  return n === undefined || n < 0 ? undefined : Math.floor(n);
}

// OpenAI's two shapes (chat's `prompt_tokens_details`, the Responses API's `input_tokens_details`) carry
// cache reads as `cached_tokens` (OpenAI charges no write). Writes are `cache_write_tokens`, all of them
// (OpenRouter's name); of those, the 1-hour part is `cache_creation.ephemeral_1h_input_tokens` beside it
// (Anthropic's names, which this gateway also writes) and the rest are 5-minute writes. All are parts of
// the prompt count.

/** Cache writes from an OpenAI-shaped details object: the total, split by its 1-hour part. */
export function openaiCacheWrites(details: Record<string, unknown>): { cacheWrite5m: number; cacheWrite1h: number } {
  const all = tokenCount(details.cache_write_tokens) ?? 0;
  const creation = details.cache_creation;
  const oneHour = isRecord(creation) ? Math.min(tokenCount(creation.ephemeral_1h_input_tokens) ?? 0, all) : 0;
  return { cacheWrite5m: all - oneHour, cacheWrite1h: oneHour };
}

/** The cache members of an OpenAI-shaped details object; the write members only when there were writes. */
export function openaiCacheDetails(u: NormalizedUsage): Record<string, unknown> {
  const writes = u.cacheWrite5m + u.cacheWrite1h;
  return {
    cached_tokens: u.cacheRead,
    ...(writes > 0
      ? { cache_write_tokens: writes, cache_creation: { ephemeral_5m_input_tokens: u.cacheWrite5m, ephemeral_1h_input_tokens: u.cacheWrite1h } }
      : {}),
  };
}

/** The member names of one of OpenAI's two usage shapes. */
export interface OpenAIUsageNames {
  input: string;
  output: string;
  inputDetails: string;
  outputDetails: string;
}

/**
 * Usage from one of OpenAI's two shapes (chat completions' prompt/completion, the Responses API's
 * input/output): the prompt count includes cache reads and writes; a missing count makes it unbillable.
 */
export function usageFromOpenAIShape(u: unknown, names: OpenAIUsageNames): NormalizedUsage {
  if (!isRecord(u)) return { input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, reasoning: 0, unbillable: true, promptUnbillable: true };
  const inDetails = u[names.inputDetails];
  const outDetails = u[names.outputDetails];
  const id = isRecord(inDetails) ? inDetails : {};
  const od = isRecord(outDetails) ? outDetails : {};
  const input = tokenCount(u[names.input]);
  const output = tokenCount(u[names.output]);
  return {
    input: input ?? 0,
    cacheRead: tokenCount(id.cached_tokens) ?? 0,
    ...openaiCacheWrites(id),
    output: output ?? 0,
    reasoning: tokenCount(od.reasoning_tokens) ?? 0,
    ...(input === undefined || output === undefined ? { unbillable: true as const } : {}),
    ...(input === undefined ? { promptUnbillable: true as const } : {}),
  };
}
