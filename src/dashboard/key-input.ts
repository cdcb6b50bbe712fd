// A key's caps and rate limits as forms and JSON bodies give them: decimal USD for caps, whole numbers
// for limits, an empty string or null for none. Refused with a message naming the field.
import type { KeyCaps, KeyChange } from '../accounts/account-store.js';
import { MAX_RATE_LIMIT, type RateLimits } from '../accounts/rate-limits.js';
import { usdTextToMicros } from '../billing/money.js';
import { DashboardError } from './errors.js';

/** "12.50" -> 12500000 micro-USD exactly; "" or undefined -> no cap. */
export function capFromUsd(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const micros = typeof value === 'string' ? usdTextToMicros(value.trim()) : 'malformed';
  if (micros === 'malformed') throw new DashboardError(400, `${field} must be an amount in USD like 12.50 (at most 6 decimals), or empty for no cap.`);
  if (micros === 'too_large') throw new DashboardError(400, `${field} is too large.`);
  return micros;
}

export function capsFromInput(body: Record<string, unknown>): KeyCaps {
  const lifetimeCap = capFromUsd(body.lifetime_cap_usd, 'lifetime_cap_usd');
  const monthlyCap = capFromUsd(body.monthly_cap_usd, 'monthly_cap_usd');
  return { ...(lifetimeCap === undefined ? {} : { lifetimeCap }), ...(monthlyCap === undefined ? {} : { monthlyCap }) };
}

/** The rate-limit fields of a form or JSON body, and the limit each sets. */
export const RATE_LIMIT_INPUTS = [
  ['requests_per_minute', 'requestsPerMinute'],
  ['tokens_per_minute', 'tokensPerMinute'],
  ['concurrent_requests', 'concurrentRequests'],
] as const;

/** Rate limits from a form (text) or JSON (numbers): a whole number from 1, or empty / null for none. */
export function rateLimitsFromInput(body: Record<string, unknown>): RateLimits {
  const out: RateLimits = {};
  for (const [field, limit] of RATE_LIMIT_INPUTS) {
    const v = body[field];
    if (v === undefined || v === null || v === '') continue;
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d{1,13}\s*$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_RATE_LIMIT) throw new DashboardError(400, `${field} must be a whole number from 1 to ${MAX_RATE_LIMIT}, or empty for no limit.`);
    out[limit] = n;
  }
  return out;
}

/**
 * A partial change of a key from a form or JSON body: only the fields present change; an empty string
 * or null clears one (no cap, or the account's default limit), a value sets it.
 */
export function keyChangeFromInput(body: Record<string, unknown>): KeyChange {
  const change: KeyChange = {};
  const given = (field: string): boolean => Object.hasOwn(body, field);
  const cleared = (field: string): boolean => body[field] === null || body[field] === '';
  for (const [field, cap] of [['lifetime_cap_usd', 'lifetimeCap'], ['monthly_cap_usd', 'monthlyCap']] as const) {
    if (given(field)) change[cap] = cleared(field) ? null : (capFromUsd(body[field], field) ?? null);
  }
  const limits = rateLimitsFromInput(body);
  for (const [field, limit] of RATE_LIMIT_INPUTS) {
    if (given(field)) change[limit] = cleared(field) ? null : (limits[limit] ?? null);
  }
  return change;
}
