// Anthropic's rate-limit headers: anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}, the
// reset an RFC 3339 time. The gateway counts input and output tokens together, so the input- and
// output-tokens variants Anthropic also sends carry the same combined figures.
import type { RateLimitHeaderState } from '../types.js';

/** RFC 3339 in UTC, to the second (as Anthropic sends it), rounded up so it is never before the reset. */
function rfc3339(ms: number): string {
  return new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export function anthropicRateLimitHeaders(state: RateLimitHeaderState, nowMs: number): Record<string, string> {
  const out: Record<string, string> = {};
  const reset = rfc3339(nowMs + state.resetMs);
  if (state.requests !== undefined) {
    out['anthropic-ratelimit-requests-limit'] = String(state.requests.limit);
    out['anthropic-ratelimit-requests-remaining'] = String(state.requests.remaining);
    out['anthropic-ratelimit-requests-reset'] = reset;
  }
  if (state.tokens !== undefined) {
    for (const kind of ['tokens', 'input-tokens', 'output-tokens']) {
      out[`anthropic-ratelimit-${kind}-limit`] = String(state.tokens.limit);
      out[`anthropic-ratelimit-${kind}-remaining`] = String(state.tokens.remaining);
      out[`anthropic-ratelimit-${kind}-reset`] = reset;
    }
  }
  return out;
}
