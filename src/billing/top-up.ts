// Top-up pricing (spec 2.3): at least 5 USD credited; the payer also pays a service fee of
// 3.5% of the top-up plus 30 cents. Integer micro-USD; the percentage is rounded up to the micro-USD.
import type { Micros } from '../catalog/snapshot.js';
import { formatUsd } from './money.js';

export const MIN_TOP_UP_MICROS: Micros = 5_000_000;
/** 3.5% as a fraction with an integer numerator: 35 / 1000. */
export const TOP_UP_FEE_PER_MILLE = 35;
export const TOP_UP_FIXED_FEE_MICROS: Micros = 300_000;

export interface TopUpQuote {
  /** What lands on the balance. */
  credit: Micros;
  /** The service fee. */
  fee: Micros;
  /** What the payer is charged: credit + fee. */
  total: Micros;
}

export function topUpFee(credit: Micros): Micros {
  const pct = (BigInt(credit) * BigInt(TOP_UP_FEE_PER_MILLE) + 999n) / 1000n;
  return Number(pct) + TOP_UP_FIXED_FEE_MICROS;
}

/** Why a top-up amount is refused, in words for the payer; undefined when it is acceptable. */
export function describeInvalidTopUp(credit: Micros): string | undefined {
  if (!Number.isSafeInteger(credit) || credit <= 0) return 'The top-up amount must be a positive amount of money.';
  if (credit < MIN_TOP_UP_MICROS) return `The minimum top-up is ${formatUsd(MIN_TOP_UP_MICROS)} USD; ${formatUsd(credit)} USD was asked for.`;
  return undefined;
}

export function quoteTopUp(credit: Micros): TopUpQuote {
  const reason = describeInvalidTopUp(credit);
  if (reason !== undefined) throw new RangeError(reason);
  const fee = topUpFee(credit);
  return { credit, fee, total: credit + fee };
}
