// Chat completions' usage (docs/wire-formats.md C.6): prompt_tokens include cached tokens and cache writes
// (read and written as OpenAI-shaped cache details: src/representation/usage.ts). Every relay of
// this format, same-format or translated, reads usage here.
import { openaiCacheDetails, usageFromOpenAIShape, type NormalizedUsage } from '../../representation/index.js';

const CHAT_USAGE = { input: 'prompt_tokens', output: 'completion_tokens', inputDetails: 'prompt_tokens_details', outputDetails: 'completion_tokens_details' };

export function usageFromOpenAI(u: unknown): NormalizedUsage {
  return usageFromOpenAIShape(u, CHAT_USAGE);
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
