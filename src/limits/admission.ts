// The one rule a reservation is admitted or refused by, over the buckets the request draws from (one per
// limit, in declaration order). The memory ledger runs this function; reserve.lua runs the same rule in
// Lua (its `admit` step), and test/integration/limits.test.ts holds both to it for every declared limit.
import type { LimitReason, LimitUnit } from './limits.js';

/** One bucket as the reservation found it. */
export interface BucketReading {
  reason: LimitReason;
  unit: LimitUnit;
  /** The limit in force; undefined when none is set (the bucket then never refuses). */
  limit: number | undefined;
  /** What is counted against it now: spent and held, requests or tokens in the window, requests in flight. */
  used: number;
}

/** What the request needs of each unit. */
export type Needs = Record<LimitUnit, number>;

export type Admission =
  | { admitted: true; availableOverall: number }
  | {
      admitted: false;
      /** The binding limit of the first unit the request does not fit in. */
      reason: LimitReason;
      needed: number;
      /** What the binding limit has left (never negative). */
      available: number;
      /** What the binding money limit has left: what any request could still reserve. */
      availableOverall: number;
    };

/** What a bucket has left (never negative); unlimited when no limit is set. */
export function leftOf(r: BucketReading): number {
  if (r.limit === undefined) return Number.POSITIVE_INFINITY;
  return r.limit - r.used < 0 ? 0 : r.limit - r.used;
}

/**
 * Units are checked in the order their first bucket comes (the declaration's: money first). Within a
 * unit the binding limit is the one with the least left, the first declared on a tie, so a refusal
 * names what actually stops the request; it refuses when the request needs more than that. A unit
 * without any limit set never refuses.
 */
export function admit(readings: readonly BucketReading[], needs: Needs): Admission {
  const binding = new Map<LimitUnit, BucketReading>();
  const units: LimitUnit[] = [];
  for (const r of readings) {
    if (!units.includes(r.unit)) units.push(r.unit);
    if (r.limit === undefined) continue;
    const b = binding.get(r.unit);
    if (b === undefined || leftOf(r) < leftOf(b)) binding.set(r.unit, r);
  }
  const money = binding.get('money');
  const availableOverall = money === undefined ? Number.MAX_SAFE_INTEGER : leftOf(money);
  for (const unit of units) {
    const b = binding.get(unit);
    if (b === undefined) continue;
    const available = leftOf(b);
    if (needs[unit] > available) return { admitted: false, reason: b.reason, needed: needs[unit], available, availableOverall };
  }
  return { admitted: true, availableOverall };
}
