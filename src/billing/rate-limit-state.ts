// The rate-limit state a reservation reports (what the answer's rate-limit headers say), read from its
// buckets, and what a settlement gives back to the token window.
import type { BucketReading } from '../limits/admission.js';
import { rateLimitFamily } from '../limits/limits.js';
import type { RateLimitState, TokenUsage } from './ledger.js';

/** Per-minute limits: the window the request and token counts are kept in. */
export const DEFAULT_RATE_LIMIT_WINDOW_MS = 60_000;

/** The tokens a request used against a token-per-window limit: input and output alike. */
export function rateLimitedTokens(usage: TokenUsage): number {
  return usage.input + usage.output;
}

/**
 * The rate limits in force as the buckets stand (after the request was counted, when admitted); of two
 * limits of one unit the one with the least left is reported. Undefined when no rate limit is set.
 */
export function rateLimitStateOf(readings: readonly BucketReading[], resetMs: number): RateLimitState | undefined {
  const state: RateLimitState = { resetMs: Math.max(0, resetMs) };
  let any = false;
  for (const r of readings) {
    if (r.unit === 'money' || r.limit === undefined) continue;
    const remaining = Math.max(0, r.limit - r.used);
    const family = rateLimitFamily(r.unit);
    if (family === 'concurrency') {
      const was = state.concurrency;
      if (was === undefined || remaining < Math.max(0, was.limit - was.inFlight)) state.concurrency = { limit: r.limit, inFlight: r.used };
    } else {
      const was = state[family];
      if (was === undefined || remaining < was.remaining) state[family] = { limit: r.limit, remaining };
    }
    any = true;
  }
  return any ? state : undefined;
}
