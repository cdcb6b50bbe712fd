// Decimal strings as providers send amounts ("10.65", "0.00016385", "65000.12"), to whole cents without
// floats: the digits go into BigInts with their scale.
interface Scaled {
  digits: bigint;
  scale: number;
}

function parse(s: string): Scaled | undefined {
  const m = /^\s*(\d{1,30})(?:\.(\d{1,30}))?\s*$/.exec(s);
  if (m === null) return undefined;
  const frac = m[2] ?? '';
  return { digits: BigInt(`${m[1]}${frac}`), scale: frac.length };
}

/** Whole cents of a USD decimal string, rounded down; undefined when it is not a plain decimal. */
export function usdToCents(s: unknown): number | undefined {
  if (typeof s !== 'string' && typeof s !== 'number') return undefined;
  const v = parse(String(s));
  if (v === undefined) return undefined;
  const cents = v.scale >= 2 ? v.digits / 10n ** BigInt(v.scale - 2) : v.digits * 10n ** BigInt(2 - v.scale);
  return cents > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(cents);
}

/**
 * Whole cents of Σ amount × rate, rounded down once at the end (so an exact payment split across two
 * payment methods is not a cent short); undefined when any part is not a plain decimal.
 */
export function sumOfProductsToCents(pairs: ReadonlyArray<readonly [unknown, unknown]>): number | undefined {
  const scaled: Scaled[] = [];
  for (const [amount, rate] of pairs) {
    if (typeof amount !== 'string' || typeof rate !== 'string') return undefined;
    const a = parse(amount);
    const r = parse(rate);
    if (a === undefined || r === undefined) return undefined;
    scaled.push({ digits: a.digits * r.digits, scale: a.scale + r.scale });
  }
  const scale = Math.max(2, ...scaled.map((x) => x.scale));
  const total = scaled.reduce((t, x) => t + x.digits * 10n ** BigInt(scale - x.scale), 0n);
  const cents = total / 10n ** BigInt(scale - 2);
  return cents > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(cents);
}

/** "10.65" for 1065: what Greenfield takes as an invoice amount. */
export function centsToDecimal(cents: number): string {
  return `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
}
