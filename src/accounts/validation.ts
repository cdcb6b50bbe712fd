// Shared input checks for both account stores.
import { KEY_AMOUNT_SETTINGS, type KeyCaps, type KeyChange, type ScopeBudgets } from './account-store.js';
import { checkRateLimits, RATE_LIMIT_FIELDS, type RateLimits } from './rate-limits.js';
import { describeMalformedKey } from './api-key.js';

export function checkCap(value: number | undefined, what: string): void {
  if (value === undefined) return;
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${what} must be a non-negative integer amount of micro-USD`);
  }
}

export function checkCaps(caps: KeyCaps): void {
  checkCap(caps.lifetimeCap, 'lifetimeCap');
  checkCap(caps.monthlyCap, 'monthlyCap');
}

export function checkScopeBudgets(budgets: ScopeBudgets): void {
  checkCap(budgets.lifetimeBudget, 'lifetimeBudget');
  checkCap(budgets.monthlyBudget, 'monthlyBudget');
}

/** The values a change sets (a null clears, so there is nothing to check). */
export function checkKeyChange(change: KeyChange): void {
  for (const s of KEY_AMOUNT_SETTINGS) checkCap(change[s] ?? undefined, s);
  const limits: RateLimits = {};
  for (const f of RATE_LIMIT_FIELDS) {
    const v = change[f];
    if (v !== undefined && v !== null) limits[f] = v;
  }
  checkRateLimits(limits);
}

/** An imported secret must pass the same shape check the gateway applies, or it could never be used. */
export function checkImportedSecret(secret: string, marker: string): void {
  const reason = describeMalformedKey(secret, marker);
  if (reason !== undefined) throw new Error(`The imported API key is not usable: ${reason}`);
}
