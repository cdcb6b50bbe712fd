/** Counts as usage reports carry them; each format reads its own usage (src/formats/<format>/usage.ts). */
import { num } from './json.js';

/** A count as reported: a finite number not below zero, floored; else undefined. */
export function tokenCount(v: unknown): number | undefined {
  const n = num(v);
  return n === undefined || n < 0 ? undefined : Math.floor(n);
}
