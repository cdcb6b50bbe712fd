// Pieces both ledgers share: argument checks, the usage-stream trim rule, record decoding.
import type { RequestStatus, ReservationRequest, SettlementRequest, UsageRecord } from './ledger.js';
import { cacheWrites } from './money.js';

/** A credit's idempotency key was already used for a different amount: neither amount is applied again. */
export class CreditConflictError extends Error {
  constructor(readonly idempotencyKey: string) {
    super('this idempotency key was already used for a credit of a different amount');
    this.name = 'CreditConflictError';
  }
}

export function checkAmount(v: number, what: string): void {
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${what} must be a non-negative integer amount of micro-USD`);
}

export function checkPositiveAmount(v: number, what: string): void {
  if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${what} must be a positive integer amount of micro-USD`);
}

/**
 * The usage log is trimmed back to `max` records once it grows a tenth past it, so trimming (which
 * moves the trimmed costs into a counter, keeping the books exact) runs once per max/10 settlements.
 */
export function checkReservation(req: ReservationRequest): void {
  checkAmount(req.amount, 'reservation amount');
  if (!req.requestId) throw new Error('a reservation needs a request id');
  if (!Number.isSafeInteger(req.holdTtlMs) || req.holdTtlMs <= 0) throw new RangeError('holdTtlMs must be a positive integer');
}

export function checkSettlement(req: SettlementRequest): void {
  checkAmount(req.cost, 'cost');
  if (!req.requestId) throw new Error('a settlement needs a request id');
  for (const [name, v] of Object.entries(req.usage)) {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`usage.${name} must be a non-negative integer`);
  }
}

export function trimThreshold(max: number): number {
  return max + Math.max(1, Math.floor(max / 10));
}

export function usageFromFields(accountId: string, f: Record<string, string>): UsageRecord {
  return {
    requestId: f.rid ?? '',
    accountId,
    keyId: f.key ?? '',
    model: f.model ?? '',
    usage: {
      input: Number(f.in ?? 0),
      output: Number(f.out ?? 0),
      cachedInput: Number(f.cin ?? 0),
      reasoning: Number(f.rsn ?? 0),
      ...cacheWrites(Number(f.cw5 ?? 0), Number(f.cw1 ?? 0)),
    },
    cost: Number(f.cost ?? 0),
    status: (f.st ?? 'completed') as RequestStatus,
    latencyMs: Number(f.lat ?? 0),
    time: Number(f.time ?? 0),
  };
}

/** Default lifetime of settled/reaped markers: a retried settlement within this window is recognised. */
export const DEFAULT_MARKER_TTL_SECONDS = 30 * 24 * 3600;
export const DEFAULT_USAGE_MAX_RECORDS = 10_000;
