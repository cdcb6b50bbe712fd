// The Responses API's usage: input_tokens include cache reads (`input_tokens_details.cached_tokens`) and
// cache writes, in the OpenAI-shaped cache details chat completions use too
// (src/representation/usage.ts). The encoder is what clients see; the decoder reads it back
// (a client's own view, as the tests check it).
import { openaiCacheDetails, usageFromOpenAIShape, type JsonObject, type NormalizedUsage } from '../../representation/index.js';

export function usageToResponses(u: NormalizedUsage): JsonObject {
  return {
    input_tokens: u.input,
    input_tokens_details: openaiCacheDetails(u),
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    total_tokens: u.input + u.output,
  };
}

const RESPONSES_USAGE = { input: 'input_tokens', output: 'output_tokens', inputDetails: 'input_tokens_details', outputDetails: 'output_tokens_details' };

export function usageFromResponses(u: unknown): NormalizedUsage {
  return usageFromOpenAIShape(u, RESPONSES_USAGE);
}
