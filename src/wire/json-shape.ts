// Small checks shared by the wire decoders.
export type JsonObject = Record<string, unknown>;

export const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

const encoder = new TextEncoder();

/** UTF-8 byte length without allocating for ASCII-only strings (the common case). */
export function utf8Bytes(s: string): number {
  // Each UTF-16 unit is at most 3 UTF-8 bytes; a surrogate pair (2 units) is 4: so length*3 bounds it,
  // but we want the exact count for a tight reservation.
  let ascii = true;
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0x7f) {
      ascii = false;
      break;
    }
  }
  return ascii ? s.length : encoder.encode(s).length;
}

/** Bytes of a JSON value as text (tool schemas, tool arguments given as objects). */
export function jsonBytes(v: unknown): number {
  return v === undefined ? 0 : utf8Bytes(JSON.stringify(v));
}
