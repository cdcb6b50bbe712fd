// OpenAI usage -> the ledger's TokenUsage. prompt_tokens already includes cached tokens.
import type { TokenUsage } from '../../billing/ledger.js';
import { isObject } from '../json-shape.js';

const nonNegative = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);
/** A token count as an upstream must report it: a finite number, not below zero. */
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;

/**
 * The usage to bill, or undefined when the upstream gave none it could be billed by: a missing,
 * negative or non-numeric prompt or completion count is not a zero (delivered output would then be
 * free) but no report at all, and the exchange estimates from what it relayed.
 */
export function openaiUsage(raw: unknown): TokenUsage | undefined {
  if (!isObject(raw) || !isCount(raw.prompt_tokens) || !isCount(raw.completion_tokens)) return undefined;
  const promptDetails = isObject(raw.prompt_tokens_details) ? raw.prompt_tokens_details : undefined;
  const completionDetails = isObject(raw.completion_tokens_details) ? raw.completion_tokens_details : undefined;
  const input = Math.floor(raw.prompt_tokens);
  const output = Math.floor(raw.completion_tokens);
  return {
    input,
    output,
    cachedInput: Math.min(input, nonNegative(promptDetails?.cached_tokens)),
    reasoning: Math.min(output, nonNegative(completionDetails?.reasoning_tokens)),
  };
}
