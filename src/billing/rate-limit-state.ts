// The rate-limit part of the reserve script's reply, and what a settlement gives back to the token window.
import type { RateLimitState, TokenUsage } from './ledger.js';

/** Per-minute limits: the window the request and token counts are kept in. */
export const DEFAULT_RATE_LIMIT_WINDOW_MS = 60_000;

/** The tokens a request used against a token-per-window limit: input and output alike. */
export function rateLimitedTokens(usage: TokenUsage): number {
  return usage.input + usage.output;
}

/**
 * Reads {rpm, requests left, tpm, tokens left, ms to reset, concurrency, in flight} from the script's
 * reply at `at` (-1 = no such limit); undefined when the reply has none or no limit is set.
 */
export function rateLimitStateOf(reply: ReadonlyArray<number | string | undefined>, at: number): RateLimitState | undefined {
  if (reply.length < at + 7) return undefined;
  const n = (i: number): number => Number(reply[at + i]);
  const state: RateLimitState = { resetMs: Math.max(0, n(4)) };
  if (n(0) >= 0) state.requests = { limit: n(0), remaining: n(1) };
  if (n(2) >= 0) state.tokens = { limit: n(2), remaining: n(3) };
  if (n(5) >= 0) state.concurrency = { limit: n(5), inFlight: n(6) };
  return state.requests === undefined && state.tokens === undefined && state.concurrency === undefined ? undefined : state;
}
