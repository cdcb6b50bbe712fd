// OpenAI's rate-limit headers (x-ratelimit-{limit,remaining,reset}-{requests,tokens}); the reset is a
// duration in the style OpenAI sends ("1s", "6m0s", "20ms"). The Responses API sends the same ones.
import type { RateLimitHeaderState } from '../types.js';

/** A duration as OpenAI writes it: "20ms" below a second, else minutes and (fractional) seconds. */
export function openaiResetDuration(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1000) return `${whole}ms`;
  const minutes = Math.floor(whole / 60_000);
  const seconds = (whole % 60_000) / 1000;
  const secondsText = `${Number.isInteger(seconds) ? seconds : seconds.toFixed(3).replace(/0+$/, '')}s`;
  return minutes > 0 ? `${minutes}m${secondsText}` : secondsText;
}

export function openaiRateLimitHeaders(state: RateLimitHeaderState): Record<string, string> {
  const out: Record<string, string> = {};
  const reset = openaiResetDuration(state.resetMs);
  if (state.requests !== undefined) {
    out['x-ratelimit-limit-requests'] = String(state.requests.limit);
    out['x-ratelimit-remaining-requests'] = String(state.requests.remaining);
    out['x-ratelimit-reset-requests'] = reset;
  }
  if (state.tokens !== undefined) {
    out['x-ratelimit-limit-tokens'] = String(state.tokens.limit);
    out['x-ratelimit-remaining-tokens'] = String(state.tokens.remaining);
    out['x-ratelimit-reset-tokens'] = reset;
  }
  return out;
}
