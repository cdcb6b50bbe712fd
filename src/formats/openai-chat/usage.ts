// Chat completions' usage (docs/wire-formats.md C.6): prompt_tokens include cached tokens. Every relay of this
// format, same-format or translated, reads usage here.
import { isRecord, tokenCount as count, type NormalizedUsage } from '../../translate/representation/index.js';

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
