// OpenAI usage -> the ledger's TokenUsage. prompt_tokens already includes cached tokens.
import type { TokenUsage } from '../../billing/ledger.js';
import { isObject } from '../json-shape.js';

const nonNegative = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);

export function openaiUsage(raw: unknown): TokenUsage | undefined {
  if (!isObject(raw)) return undefined;
  const promptDetails = isObject(raw.prompt_tokens_details) ? raw.prompt_tokens_details : undefined;
  const completionDetails = isObject(raw.completion_tokens_details) ? raw.completion_tokens_details : undefined;
  const input = nonNegative(raw.prompt_tokens);
  const output = nonNegative(raw.completion_tokens);
  return {
    input,
    output,
    cachedInput: Math.min(input, nonNegative(promptDetails?.cached_tokens)),
    reasoning: Math.min(output, nonNegative(completionDetails?.reasoning_tokens)),
  };
}
