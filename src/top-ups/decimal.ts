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

/** Whole cents of `amount × rate` (a crypto amount at a USD rate), rounded down. */
export function productToCents(amount: unknown, rate: unknown): number | undefined {
  if (typeof amount !== 'string' || typeof rate !== 'string') return undefined;
  const a = parse(amount);
  const r = parse(rate);
  if (a === undefined || r === undefined) return undefined;
  const scale = a.scale + r.scale;
  const product = a.digits * r.digits;
  const cents = scale >= 2 ? product / 10n ** BigInt(scale - 2) : product * 10n ** BigInt(2 - scale);
  return cents > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(cents);
}

/** "10.65" for 1065: what Greenfield takes as an invoice amount. */
export function centsToDecimal(cents: number): string {
  return `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
}
