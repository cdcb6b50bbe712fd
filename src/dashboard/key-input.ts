// A key's caps, cost ceiling and rate limits, and teams' and members' budgets, as forms and JSON bodies
// give them: decimal USD for caps, budgets and the ceiling, whole numbers for limits, an empty string or null for none. Refused with a message naming the field.
import type { KeyCaps, KeyChange, KeyRequestCeiling, ScopeBudgets } from '../accounts/account-store.js';
import type { BudgetChange } from '../accounts/teams.js';
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

/** The form and JSON field of a key's default cost ceiling per request, in decimal USD. */
export const MAX_COST_INPUT = 'max_cost_per_request_usd';

/** The key's default cost ceiling per request from a form or JSON body: "0.05" USD, or empty / null / absent for none. */
export function maxCostFromInput(body: Record<string, unknown>): KeyRequestCeiling {
  const maxCostPerRequest = capFromUsd(body[MAX_COST_INPUT], MAX_COST_INPUT);
  return maxCostPerRequest === undefined ? {} : { maxCostPerRequest };
}

/** The decimal-USD fields of a form or JSON body, and the key's amount each sets. */
const AMOUNT_INPUTS = [
  ['lifetime_cap_usd', 'lifetimeCap'],
  ['monthly_cap_usd', 'monthlyCap'],
  [MAX_COST_INPUT, 'maxCostPerRequest'],
] as const;

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
 * or null clears one (no cap or ceiling, or the account's default limit), a value sets it.
 */
export function keyChangeFromInput(body: Record<string, unknown>): KeyChange {
  const change: KeyChange = {};
  const given = (field: string): boolean => Object.hasOwn(body, field);
  const cleared = (field: string): boolean => body[field] === null || body[field] === '';
  for (const [field, amount] of AMOUNT_INPUTS) {
    if (given(field)) change[amount] = cleared(field) ? null : (capFromUsd(body[field], field) ?? null);
  }
  const limits = rateLimitsFromInput(body);
  for (const [field, limit] of RATE_LIMIT_INPUTS) {
    if (given(field)) change[limit] = cleared(field) ? null : (limits[limit] ?? null);
  }
  return change;
}

/** The decimal-USD fields of a team's or member's budgets, and the budget each sets. */
const BUDGET_INPUTS = [
  ['lifetime_budget_usd', 'lifetimeBudget'],
  ['monthly_budget_usd', 'monthlyBudget'],
] as const;

/** Budgets to set from a form or JSON body (a new team's): USD, or empty / null / absent for none. */
export function budgetsFromInput(body: Record<string, unknown>): ScopeBudgets {
  const out: ScopeBudgets = {};
  for (const [field, budget] of BUDGET_INPUTS) {
    const v = capFromUsd(body[field], field);
    if (v !== undefined) out[budget] = v;
  }
  return out;
}

/** A partial change of budgets: only the fields present change; an empty string or null clears one. */
export function budgetChangeFromInput(body: Record<string, unknown>): BudgetChange {
  const change: BudgetChange = {};
  for (const [field, budget] of BUDGET_INPUTS) {
    if (!Object.hasOwn(body, field)) continue;
    change[budget] = body[field] === null || body[field] === '' ? null : (capFromUsd(body[field], field) ?? null);
  }
  return change;
}
