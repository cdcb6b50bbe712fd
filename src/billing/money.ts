// Cost arithmetic in integer micro-USD. Prices are µUSD per 1,000,000 tokens, so a token count times a
// price is in "µUSD · 1e-6"; sums are exact in BigInt and rounded up once, at the end.
import type { Micros, ModelPricing } from '../catalog/snapshot.js';
import type { TokenUsage } from './ledger.js';

export const TOKENS_PER_PRICE_UNIT = 1_000_000n;

/** ceil(n / d) for non-negative BigInts. */
export function ceilDiv(n: bigint, d: bigint): bigint {
  return (n + d - 1n) / d;
}

/** A BigInt amount as a Micros number; refuses anything a double cannot hold exactly. */
export function toMicros(v: bigint): Micros {
  if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new RangeError(`amount out of range for micro-USD: ${v}`);
  }
  return Number(v);
}

const MAX_MICROS = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A token count as the cost arithmetic takes it. Never throws: a settlement must always be computable,
 * whatever an upstream reported (an absurd figure used to throw here, and then nothing was settled).
 * Fractions are cut, what is not a positive number counts nothing, and a count past 2^53 is taken as
 * 2^53 - 1 (its cost is far beyond any hold, and settlement charges at most the hold).
 */
function tokenCount(n: number): bigint {
  if (typeof n !== 'number' || Number.isNaN(n) || n <= 0) return 0n;
  if (n >= Number.MAX_SAFE_INTEGER) return MAX_MICROS;
  return BigInt(Math.floor(n));
}

/** Usage as the ledger records it: whole, non-negative, exact counts (an absurd report is clamped). */
export function recordableUsage(usage: TokenUsage): TokenUsage {
  const c = (n: number): number => Number(tokenCount(n));
  return { input: c(usage.input), output: c(usage.output), cachedInput: c(usage.cachedInput), reasoning: c(usage.reasoning) };
}

/**
 * What a request cost. `cachedInput` is part of `input` and `reasoning` part of `output`, so each token is
 * priced once: cached input at the cached price (else the input price), reasoning at the reasoning price
 * (else the output price). A subset larger than its whole (a buggy upstream) is clamped to the whole.
 */
export function costMicros(usage: TokenUsage, pricing: ModelPricing): Micros {
  const input = tokenCount(usage.input);
  const output = tokenCount(usage.output);
  let cached = tokenCount(usage.cachedInput);
  let reasoning = tokenCount(usage.reasoning);
  if (cached > input) cached = input;
  if (reasoning > output) reasoning = output;
  const pIn = BigInt(pricing.input);
  const pOut = BigInt(pricing.output);
  const pCached = BigInt(pricing.cachedInput ?? pricing.input);
  const pReasoning = BigInt(pricing.reasoning ?? pricing.output);
  const scaled = (input - cached) * pIn + cached * pCached + (output - reasoning) * pOut + reasoning * pReasoning;
  const cost = ceilDiv(scaled, TOKENS_PER_PRICE_UNIT);
  // Clamped, not refused: the ledger charges min(cost, held), so any figure past the hold is the same.
  return Number(cost > MAX_MICROS ? MAX_MICROS : cost);
}

/** Micro-USD as a decimal USD string with six places, e.g. 1234567 -> "1.234567". Exact: integer ops only. */
export function formatUsd(micros: Micros): string {
  if (!Number.isSafeInteger(micros)) throw new RangeError(`not an integer amount of micro-USD: ${micros}`);
  const v = BigInt(micros);
  const abs = v < 0n ? -v : v;
  const whole = abs / 1_000_000n;
  const frac = (abs % 1_000_000n).toString().padStart(6, '0');
  return `${v < 0n ? '-' : ''}${whole}.${frac}`;
}

const USD_TEXT = /^\d{1,10}(\.\d{1,6})?$/;

/**
 * A decimal USD text ("12.50", at most 6 decimals) as micro-USD, exactly: integer arithmetic on the
 * digits, no floats. Each app words the refusal for its own reader.
 */
export function usdTextToMicros(text: string): Micros | 'malformed' | 'too_large' {
  if (!USD_TEXT.test(text)) return 'malformed';
  const [whole = '0', fraction = ''] = text.split('.');
  const micros = BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
  return micros > MAX_MICROS ? 'too_large' : Number(micros);
}
