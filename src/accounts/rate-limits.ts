// Per-key rate limits: requests and tokens per window (a minute by default) and requests in flight.
// Each is optional; a key's own value overrides its account's default for keys.

export interface RateLimits {
  /** Requests admitted per window (RPM). */
  requestsPerMinute?: number;
  /** Input + output tokens per window (TPM), counted at their worst case when reserved. */
  tokensPerMinute?: number;
  /** Requests in flight at once. */
  concurrentRequests?: number;
}

export const RATE_LIMIT_FIELDS = ['requestsPerMinute', 'tokensPerMinute', 'concurrentRequests'] as const;
export type RateLimitField = (typeof RATE_LIMIT_FIELDS)[number];

/** Largest value accepted: far above any real limit, and exact in Lua's doubles. */
export const MAX_RATE_LIMIT = 1_000_000_000_000;

export function checkRateLimits(limits: RateLimits | undefined): void {
  if (limits === undefined) return;
  for (const f of RATE_LIMIT_FIELDS) {
    const v = limits[f];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v < 1 || v > MAX_RATE_LIMIT) throw new RangeError(`${f} must be a whole number from 1 to ${MAX_RATE_LIMIT}`);
  }
}

/** Only the limits that are set; undefined when none is. */
export function compactRateLimits(limits: RateLimits | undefined): RateLimits | undefined {
  if (limits === undefined) return undefined;
  const out: RateLimits = {};
  for (const f of RATE_LIMIT_FIELDS) if (limits[f] !== undefined) out[f] = limits[f];
  return Object.keys(out).length === 0 ? undefined : out;
}

/** What is enforced for a key: its own value where set, else the account's default. */
export function effectiveRateLimits(own: RateLimits | undefined, accountDefault: RateLimits | undefined): RateLimits {
  const out: RateLimits = {};
  for (const f of RATE_LIMIT_FIELDS) {
    const v = own?.[f] ?? accountDefault?.[f];
    if (v !== undefined) out[f] = v;
  }
  return out;
}

/** Hash fields of the hot path's copy: on a key (its own limits) and on an account (its default). */
export const KEY_LIMIT_FIELDS: Record<RateLimitField, string> = { requestsPerMinute: 'rpm', tokensPerMinute: 'tpm', concurrentRequests: 'conc' };
export const ACCOUNT_LIMIT_FIELDS: Record<RateLimitField, string> = { requestsPerMinute: 'drpm', tokensPerMinute: 'dtpm', concurrentRequests: 'dconc' };

/** Field, value pairs of the limits set, under the given names. */
export function limitFieldPairs(limits: RateLimits | undefined, names: Record<RateLimitField, string>): string[] {
  const out: string[] = [];
  for (const f of RATE_LIMIT_FIELDS) {
    const v = limits?.[f];
    if (v !== undefined) out.push(names[f], String(v));
  }
  return out;
}

/** The limits read back from hash fields. */
export function limitsFromHash(h: Record<string, string | undefined>, names: Record<RateLimitField, string>): RateLimits | undefined {
  const out: RateLimits = {};
  for (const f of RATE_LIMIT_FIELDS) {
    const v = h[names[f]];
    if (v !== undefined && v !== '') out[f] = Number(v);
  }
  return compactRateLimits(out);
}
