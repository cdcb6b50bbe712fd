// Shared input checks for both account stores.
import type { KeyCaps } from './account-store.js';
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

/** An imported secret must pass the same shape check the gateway applies, or it could never be used. */
export function checkImportedSecret(secret: string, marker: string): void {
  const reason = describeMalformedKey(secret, marker);
  if (reason !== undefined) throw new Error(`The imported API key is not usable: ${reason}`);
}
