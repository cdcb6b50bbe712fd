/** Narrowing helpers for untrusted JSON bodies. */
import { isRecord } from '../wire/json-shape.js';

export { isRecord, type JsonObject } from '../wire/json-shape.js';

export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** A finite number, or undefined (null, strings and NaN count as absent). */
export function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Parses a tool-call argument string into an object; empty, broken or non-object JSON gives `{}`. */
export function parseArguments(raw: unknown): Record<string, unknown> {
  if (isRecord(raw)) return raw;
  if (typeof raw !== 'string' || raw.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    return isRecord(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** A random id suffix for ids an upstream forgot to send. */
export function randomId(prefix: string): string {
  return `${prefix}${crypto.randomUUID().replace(/-/g, '').slice(0, 24)}`;
}
