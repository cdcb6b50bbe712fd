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
  const c = (n: number | undefined): number => Number(tokenCount(n ?? 0));
  const recorded: TokenUsage = { input: c(usage.input), output: c(usage.output), cachedInput: c(usage.cachedInput), reasoning: c(usage.reasoning) };
  // Cache writes only when there were some: absent is 0 (cacheWrites), and records read back the same way.
  return { ...recorded, ...cacheWrites(c(usage.cacheWrite5m), c(usage.cacheWrite1h)) };
}

/** The cache-write members of a TokenUsage: each only when not 0 (absent means 0). */
export function cacheWrites(cacheWrite5m: number, cacheWrite1h: number): Pick<TokenUsage, 'cacheWrite5m' | 'cacheWrite1h'> {
  return { ...(cacheWrite5m > 0 ? { cacheWrite5m } : {}), ...(cacheWrite1h > 0 ? { cacheWrite1h } : {}) };
}

/** The input tokens of each price class; together exactly `input`. */
export interface InputClasses {
  uncached: bigint;
  cacheRead: bigint;
  cacheWrite5m: bigint;
  cacheWrite1h: bigint;
}

/**
 * Splits `input` into its price classes. Cache reads and both kinds of cache write are parts of `input`
 * and apart from each other, so each token falls in exactly one class; parts that add up to more than the
 * whole (a buggy upstream) are cut, in the order read, 5-minute write, 1-hour write.
 */
export function inputClasses(usage: TokenUsage): InputClasses {
  let left = tokenCount(usage.input);
  const take = (n: number | undefined): bigint => {
    const part = tokenCount(n ?? 0);
    const taken = part > left ? left : part;
    left -= taken;
    return taken;
  };
  const cacheRead = take(usage.cachedInput);
  const cacheWrite5m = take(usage.cacheWrite5m);
  const cacheWrite1h = take(usage.cacheWrite1h);
  return { uncached: left, cacheRead, cacheWrite5m, cacheWrite1h };
}

/**
 * What a request cost. Every token is priced once, by its class: uncached input at `input`, cache reads
 * at `cacheRead`, 5-minute and 1-hour cache writes at `cacheWrite5m` and `cacheWrite1h` (each absent price
 * is `input`'s), plain output at `output` and reasoning (part of `output`) at `reasoning` (else `output`'s).
 * The sum is exact and rounded up once, to the micro-USD.
 */
export function costMicros(usage: TokenUsage, pricing: ModelPricing): Micros {
  const input = inputClasses(usage);
  const output = tokenCount(usage.output);
  let reasoning = tokenCount(usage.reasoning);
  if (reasoning > output) reasoning = output;
  const pIn = BigInt(pricing.input);
  const price = (p: Micros | undefined, otherwise: bigint): bigint => (p === undefined ? otherwise : BigInt(p));
  const pOut = BigInt(pricing.output);
  const scaled =
    input.uncached * pIn +
    input.cacheRead * price(pricing.cacheRead, pIn) +
    input.cacheWrite5m * price(pricing.cacheWrite5m, pIn) +
    input.cacheWrite1h * price(pricing.cacheWrite1h, pIn) +
    (output - reasoning) * pOut +
    reasoning * price(pricing.reasoning, pOut);
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

/** Micro-USD as a person sets an amount: cents always, more places only where they are not zero ("500.00", "0.00002"). */
export function formatUsdAmount(micros: Micros): string {
  return formatUsd(micros).replace(/(\.\d\d\d*?)0+$/, '$1');
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
