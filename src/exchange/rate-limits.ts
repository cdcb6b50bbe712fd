// What a key's rate limits add to an answer: the headers of the client's format on every answer of a
// key with limits, and the 429 of a refusal by one of them (with retry-after, which the official SDKs
// wait out before their own retry).
import type { RateLimitState } from '../billing/ledger.js';
import { LIMITS, rateLimitFamily, type RateLimit, type RateLimitReason, type RateRefusalFacts } from '../limits/limits.js';
import { clientFormat, type ClientFormatName } from '../formats/index.js';
import { GatewayError } from '../request/gateway-error.js';

/** Past the window's end by this much, so a retry timed by the gateway's clock lands in the next window. */
const RESET_MARGIN_MS = 10;
/** A request refused for the key's requests in flight is worth trying again after this long. */
const CONCURRENCY_RETRY_MS = 1000;

export function rateLimitHeaders(format: ClientFormatName, state: RateLimitState | undefined): Record<string, string> {
  return state === undefined ? {} : clientFormat(format).rateLimitHeaders(state, Date.now());
}

function per(windowMs: number): string {
  return windowMs === 60_000 ? 'per minute' : `per ${windowMs / 1000} s`;
}

export interface RateLimitRefusal {
  reason: RateLimitReason;
  /** Requests (1) or tokens the request needed. */
  needed: number;
  /** What the limit had left. */
  available: number;
  state: RateLimitState | undefined;
  windowMs: number;
  /** The request field that limits output, named when a request alone is over the token limit. */
  outputLimitField: string;
}

export function rateLimitError(format: ClientFormatName, r: RateLimitRefusal): GatewayError {
  const spec: RateLimit = LIMITS[r.reason];
  const s = r.state;
  const headers = rateLimitHeaders(format, s);
  const type = rateLimitFamily(spec.unit);
  const limit = s?.[type]?.limit ?? 0;
  // Requests in flight free a place when one finishes, not at a window's end.
  const waitMs = spec.window === 'in_flight' ? CONCURRENCY_RETRY_MS : (s?.resetMs ?? 0) + RESET_MARGIN_MS;
  const facts: RateRefusalFacts = {
    limit,
    per: per(r.windowMs),
    needed: r.needed,
    available: r.available,
    retry: `retry in ${(waitMs / 1000).toFixed(waitMs < 10_000 ? 1 : 0)} s`,
    outputLimitField: r.outputLimitField,
  };
  if (spec.wording.neverFits !== undefined && r.needed > limit && s?.[type] !== undefined) {
    // No window will ever fit it: not worth a retry.
    return new GatewayError(spec.status, spec.wording.neverFits(facts), { code: 'rate_limit_exceeded', headers, final: true, details: { limit_type: type, limit, requested: r.needed } });
  }
  return new GatewayError(spec.status, spec.wording.refused(facts), {
    code: 'rate_limit_exceeded',
    headers: { 'retry-after-ms': String(waitMs), ...headers },
    retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
    details: { limit_type: type, limit, ...(type === 'concurrency' ? {} : { remaining: r.available }), ...(type === 'tokens' ? { requested: r.needed } : {}) },
  });
}
