// Chat completions' usage (docs/wire-formats.md C.6): prompt_tokens include cached tokens and cache writes
// (read and written as OpenAI-shaped cache details: src/translate/representation/usage.ts). Every relay of
// this format, same-format or translated, reads usage here.
import { isRecord, openaiCacheDetails, openaiCacheWrites, tokenCount as count, type NormalizedUsage } from '../../translate/representation/index.js';

export function usageFromOpenAI(u: unknown): NormalizedUsage {
  if (!isRecord(u)) return { input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, reasoning: 0, unbillable: true };
  const pd = isRecord(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const cd = isRecord(u.completion_tokens_details) ? u.completion_tokens_details : {};
  const input = count(u.prompt_tokens);
  const output = count(u.completion_tokens);
  return {
    input: input ?? 0,
    cacheRead: count(pd.cached_tokens) ?? 0,
    ...openaiCacheWrites(pd),
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
    prompt_tokens_details: openaiCacheDetails(u),
    completion_tokens_details: { reasoning_tokens: u.reasoning },
  };
}
