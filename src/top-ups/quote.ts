// What a top-up costs. Processors charge whole cents, so the quote is in cents: the credit, and a
// service fee of 3.5% of it rounded up to the cent plus 30 cents (5.00 USD costs 5.48; 10.00 costs
// 10.65). The balance is kept in micro-USD: one cent is 10,000 of them.
import type { Micros } from '../catalog/snapshot.js';

export type Cents = number;

export const MIN_TOP_UP_CENTS: Cents = 500;
/** The largest top-up taken in one payment (card processors refuse far smaller amounts already). */
export const MAX_TOP_UP_CENTS: Cents = 1_000_000;
/** 3.5% as an integer fraction: 35 / 1000. */
export const FEE_PER_MILLE = 35;
export const FIXED_FEE_CENTS: Cents = 30;
export const MICROS_PER_CENT = 10_000;

export interface TopUpQuote {
  /** What lands on the balance. */
  creditCents: Cents;
  /** The service fee. */
  feeCents: Cents;
  /** What the payer is charged: credit + fee. */
  totalCents: Cents;
}

export function feeCents(creditCents: Cents): Cents {
  return Math.ceil((creditCents * FEE_PER_MILLE) / 1000) + FIXED_FEE_CENTS;
}

export const centsToMicros = (cents: Cents): Micros => cents * MICROS_PER_CENT;

/** "12.34" for 1234. */
export function formatCents(cents: Cents): string {
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

/**
 * Cents from what a payer typed: "10", "10.5", "10.50", "$10.00". Undefined for anything else (no
 * floats: the digits are read as they are).
 */
export function parseUsdCents(input: unknown): Cents | undefined {
  if (typeof input === 'number') input = String(input);
  if (typeof input !== 'string') return undefined;
  const m = /^\s*\$?\s*(\d{1,9})(?:\.(\d{1,2}))?\s*$/.exec(input);
  if (m === null) return undefined;
  return Number(m[1]) * 100 + Number((m[2] ?? '0').padEnd(2, '0'));
}

/** Why a top-up amount is refused, in words for the payer; undefined when it is acceptable. */
export function describeInvalidTopUp(creditCents: Cents | undefined): string | undefined {
  if (creditCents === undefined || !Number.isSafeInteger(creditCents) || creditCents <= 0) return 'Enter an amount in US dollars, like 10 or 25.50.';
  if (creditCents < MIN_TOP_UP_CENTS) return `The minimum top-up is ${formatCents(MIN_TOP_UP_CENTS)} USD; ${formatCents(creditCents)} USD was asked for.`;
  if (creditCents > MAX_TOP_UP_CENTS) return `The largest top-up is ${formatCents(MAX_TOP_UP_CENTS)} USD; split a larger amount into several.`;
  return undefined;
}

export function quoteTopUp(creditCents: Cents): TopUpQuote {
  const reason = describeInvalidTopUp(creditCents);
  if (reason !== undefined) throw new RangeError(reason);
  const fee = feeCents(creditCents);
  return { creditCents, feeCents: fee, totalCents: creditCents + fee };
}
