// Small checks shared by the wire decoders.
export type JsonObject = Record<string, unknown>;

/** A JSON object (not null, not an array): the one such check the gateway uses. */
export function isRecord(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** UTF-8 byte length: Buffer.byteLength counts natively, without encoding the string. */
export function utf8Bytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** Bytes of a JSON value as text (tool schemas, tool arguments given as objects). */
export function jsonBytes(v: unknown): number {
  return v === undefined ? 0 : utf8Bytes(JSON.stringify(v));
}
