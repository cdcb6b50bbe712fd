// A new API key's record, the same for both account stores: what is stored about a key is never the
// secret, only its display hint (and, beside the record, its hash).
import type { ApiKeyRecord, NewKeyOptions } from './account-store.js';
import { keyDisplayHint } from './api-key.js';
import { newKeyId } from './ids.js';
import { checkCap, checkCaps } from './validation.js';
import { checkRateLimits, compactRateLimits } from './rate-limits.js';

export function newKeyRecord(accountId: string, secret: string, opts: NewKeyOptions, createdAt: number): ApiKeyRecord {
  checkCaps(opts);
  checkCap(opts.maxCostPerRequest, 'maxCostPerRequest');
  checkRateLimits(opts.rateLimits);
  const record: ApiKeyRecord = {
    id: newKeyId(),
    accountId,
    name: opts.name ?? '',
    displayHint: keyDisplayHint(secret),
    createdAt,
  };
  if (opts.lifetimeCap !== undefined) record.lifetimeCap = opts.lifetimeCap;
  if (opts.monthlyCap !== undefined) record.monthlyCap = opts.monthlyCap;
  if (opts.maxCostPerRequest !== undefined) record.maxCostPerRequest = opts.maxCostPerRequest;
  const limits = compactRateLimits(opts.rateLimits);
  if (limits !== undefined) record.rateLimits = limits;
  if (opts.ownerId !== undefined) record.ownerId = opts.ownerId;
  if (opts.teamId !== undefined) record.teamId = opts.teamId;
  return record;
}
