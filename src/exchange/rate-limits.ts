// What a key's rate limits add to an answer: the headers of the client's format on every answer of a
// key with limits, and the 429 of a refusal by one of them (with retry-after, which the official SDKs
// wait out before their own retry).
import type { RateLimitReason, RateLimitState } from '../billing/ledger.js';
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
  const s = r.state;
  const headers = rateLimitHeaders(format, s);
  if (r.reason === 'rate_limit_tokens' && s?.tokens !== undefined && r.needed > s.tokens.limit) {
    // No window will ever fit it: not worth a retry.
    return new GatewayError(
      429,
      `This request counts up to ${r.needed} tokens (its input and the reserved ${r.outputLimitField}), more than this API key's limit of ${s.tokens.limit} tokens ${per(r.windowMs)}; lower ${r.outputLimitField} or ask for a higher limit.`,
      { code: 'rate_limit_exceeded', headers, final: true, details: { limit_type: 'tokens', limit: s.tokens.limit, requested: r.needed } },
    );
  }
  const waitMs = r.reason === 'rate_limit_concurrency' ? CONCURRENCY_RETRY_MS : (s?.resetMs ?? 0) + RESET_MARGIN_MS;
  const retry = { 'retry-after-ms': String(waitMs), ...headers };
  const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1000));
  const inSeconds = `retry in ${(waitMs / 1000).toFixed(waitMs < 10_000 ? 1 : 0)} s`;
  if (r.reason === 'rate_limit_concurrency') {
    const limit = s?.concurrency?.limit ?? 0;
    return new GatewayError(429, `This API key already has ${limit} requests in flight, its limit; retry when one has finished.`, {
      code: 'rate_limit_exceeded',
      headers: retry,
      retryAfterSeconds,
      details: { limit_type: 'concurrency', limit },
    });
  }
  if (r.reason === 'rate_limit_tokens') {
    const limit = s?.tokens?.limit ?? 0;
    return new GatewayError(
      429,
      `This API key's limit of ${limit} tokens ${per(r.windowMs)} is reached: this request counts up to ${r.needed} and ${r.available} are left; ${inSeconds}.`,
      { code: 'rate_limit_exceeded', headers: retry, retryAfterSeconds, details: { limit_type: 'tokens', limit, remaining: r.available, requested: r.needed } },
    );
  }
  const limit = s?.requests?.limit ?? 0;
  return new GatewayError(429, `This API key's limit of ${limit} requests ${per(r.windowMs)} is reached; ${inSeconds}.`, {
    code: 'rate_limit_exceeded',
    headers: retry,
    retryAfterSeconds,
    details: { limit_type: 'requests', limit, remaining: r.available },
  });
}
