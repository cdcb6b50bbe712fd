/**
 * Reasoning carried through a client in `encrypted_content` (shared/responses-api.md §9): an upstream's
 * thinking and its signature, signed by us, so a client that only echoes this one field (Codex) still
 * gives the upstream its reasoning back. Bound to the account; anything not ours, or not valid, is
 * dropped, never forwarded. Deterministic (same thinking, same bytes) so prompt caches stay warm.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ThinkingPart } from '../../representation/index.js';

const PREFIX = 'tg1.';

interface Payload {
  v: 1;
  a: string;
  b: Array<{ t: string; s?: string; r?: true }>;
}

const mac = (key: Buffer, payload: string): string => createHmac('sha256', key).update(payload).digest('base64url');

export function sealEnvelope(parts: readonly ThinkingPart[], key: Buffer, accountTag: string): string {
  const payload: Payload = { v: 1, a: accountTag, b: parts.map((p) => ({ t: p.text, ...(p.signature === undefined ? {} : { s: p.signature }), ...(p.redacted === true ? { r: true as const } : {}) })) };
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${PREFIX}${body}.${mac(key, body)}`;
}

export function openEnvelope(value: string | undefined, key: Buffer, accountTag: string): ThinkingPart[] | undefined {
  if (value === undefined || !value.startsWith(PREFIX)) return undefined;
  const [body = '', sig = ''] = value.slice(PREFIX.length).split('.');
  const expected = Buffer.from(mac(key, body));
  const given = Buffer.from(sig);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  let payload: Payload;
  try {
    payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Payload;
  } catch {
    return undefined;
  }
  if (payload.v !== 1 || payload.a !== accountTag || !Array.isArray(payload.b)) return undefined;
  return payload.b.map((p) => ({ type: 'thinking' as const, text: p.t, ...(p.s === undefined ? {} : { signature: p.s }), ...(p.r === true ? { redacted: true } : {}) }));
}
