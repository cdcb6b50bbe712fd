// The cost an answer reports: the very figure its settlement charges, min(cost, held), where the cost is
// the one cost function of money.ts on the usage as the ledger records it. Converted to USD only here,
// at the edge, from the integer micro-USD through its exact decimal text (never a float product).
import type { Micros, ModelPricing } from '../catalog/snapshot.js';
import type { TokenUsage } from './ledger.js';
import { costMicros, formatUsd, recordableUsage } from './money.js';

/** What settling a usage will charge, in micro-USD. */
export type ChargeOf = (usage: TokenUsage) => Micros;

/**
 * The charge of a usage against a hold of `held`: the settle script charges min(cost, held) when its hold
 * is still there, which it always is for a request answered within its timeout (a hold outlives it).
 */
export function chargeOf(pricing: ModelPricing, held: Micros): ChargeOf {
  return (usage) => Math.min(costMicros(recordableUsage(usage), pricing), held);
}

/**
 * Micro-USD as the JSON number an answer carries (`usage.cost`): the decimal of formatUsd read as a
 * number, which JSON.stringify writes back as the same digits (trailing zeros dropped). Exact for any
 * amount below 10^9 USD: a double keeps every decimal of at most 15 significant digits.
 */
export function usdNumber(micros: Micros): number {
  return Number(formatUsd(micros));
}
