// The Responses API's usage: input_tokens include cache reads (`input_tokens_details.cached_tokens`) and
// cache writes, in the OpenAI-shaped cache details chat completions use too
// (src/translate/representation/usage.ts). The encoder is what clients see; the decoder reads it back
// (a client's own view, as the tests check it).
import { isRecord, openaiCacheDetails, openaiCacheWrites, tokenCount, type JsonObject, type NormalizedUsage } from '../../translate/representation/index.js';

export function usageToResponses(u: NormalizedUsage): JsonObject {
  return {
    input_tokens: u.input,
    input_tokens_details: openaiCacheDetails(u),
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    total_tokens: u.input + u.output,
  };
}

export function usageFromResponses(u: unknown): NormalizedUsage {
  if (!isRecord(u)) return { input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, reasoning: 0, unbillable: true };
  const id = isRecord(u.input_tokens_details) ? u.input_tokens_details : {};
  const od = isRecord(u.output_tokens_details) ? u.output_tokens_details : {};
  const input = tokenCount(u.input_tokens);
  const output = tokenCount(u.output_tokens);
  return {
    input: input ?? 0,
    cacheRead: tokenCount(id.cached_tokens) ?? 0,
    ...openaiCacheWrites(id),
    output: output ?? 0,
    reasoning: tokenCount(od.reasoning_tokens) ?? 0,
    ...(input === undefined || output === undefined ? { unbillable: true as const } : {}),
  };
}
