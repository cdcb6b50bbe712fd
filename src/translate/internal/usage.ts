/**
 * Usage, the one decoder per format (wire-formats C.6): OpenAI prompt_tokens include cache; Anthropic
 * input_tokens do not. Every relay, same-format or translated, reads usage here and bills by
 * billableUsage.
 */
import type { TokenUsage } from '../../billing/ledger.js';
import type { NormalizedUsage } from './internal.js';
import { isRecord, num } from './json.js';

export type { NormalizedUsage } from './internal.js';

/** A count as reported: a finite number not below zero, floored; else undefined. */
function count(v: unknown): number | undefined {
  const n = num(v);
  return n === undefined || n < 0 ? undefined : Math.floor(n);
}

export function usageFromOpenAI(u: unknown): NormalizedUsage {
  if (!isRecord(u)) return { input: 0, cachedInput: 0, cacheWrite: 0, output: 0, reasoning: 0, unbillable: true };
  const pd = isRecord(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const cd = isRecord(u.completion_tokens_details) ? u.completion_tokens_details : {};
  const input = count(u.prompt_tokens);
  const output = count(u.completion_tokens);
  return {
    input: input ?? 0,
    cachedInput: count(pd.cached_tokens) ?? 0,
    cacheWrite: count(pd.cache_write_tokens) ?? 0,
    output: output ?? 0,
    reasoning: count(cd.reasoning_tokens) ?? 0,
    ...(input === undefined || output === undefined ? { unbillable: true as const } : {}),
  };
}

export function usageToOpenAI(u: NormalizedUsage): Record<string, unknown> {
  return {
    prompt_tokens: u.input,
    completion_tokens: u.output,
    total_tokens: u.input + u.output,
    prompt_tokens_details: { cached_tokens: u.cachedInput, ...(u.cacheWrite > 0 ? { cache_write_tokens: u.cacheWrite } : {}) },
    completion_tokens_details: { reasoning_tokens: u.reasoning },
  };
}

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

/**
 * The usage to bill, or undefined for a report that cannot be billed by (a missing, negative or
 * non-numeric count is not a zero, or delivered output would be free): the exchange then estimates.
 */
export function billableUsage(u: NormalizedUsage): TokenUsage | undefined {
  if (u.unbillable === true) return undefined;
  return { input: u.input, output: u.output, cachedInput: Math.min(u.cachedInput, u.input), reasoning: Math.min(u.reasoning, u.output) };
}
