// A new key's secret between the POST that creates it and the GET that shows it (post-redirect-get, so
// a reload makes no second key). The record keeps only a sealed copy (AES-256-GCM) tied to the session;
// the key that opens it travels in a short-lived HttpOnly cookie to the creating browser alone. The
// first GET deletes the row, so the secret is shown once and a stolen cookie later opens nothing.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Database } from '../record/database.js';

export const REVEAL_COOKIE = 'tg_reveal';
const LIFE_SECONDS = 300;

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

export interface Reveal {
  name: string;
  secret: string;
}

/** Stores the sealed secret; returns the cookie value (row id and opening key). */
export async function sealReveal(db: Database, sessionId: string, reveal: Reveal): Promise<string> {
  const id = randomBytes(16).toString('base64url');
  const key = randomBytes(32);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(id));
  const body = Buffer.concat([cipher.update(JSON.stringify(reveal), 'utf8'), cipher.final()]);
  const sealed = Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
  await db.query(`INSERT INTO key_reveals (id, session_hash, sealed, expires_at) VALUES ($1, $2, $3, now() + interval '${LIFE_SECONDS} seconds')`, [id, sha256(sessionId), sealed]);
  return `${id}.${key.toString('base64url')}`;
}

/** Takes the reveal (once) for this session, or undefined when gone, expired, another session's or forged. */
export async function openReveal(db: Database, cookie: string, sessionId: string): Promise<Reveal | undefined> {
  const [id = '', keyText = ''] = cookie.split('.');
  const key = Buffer.from(keyText, 'base64url');
  if (id === '' || key.length !== 32) return undefined;
  const row = (await db.query<{ sealed: string }>('DELETE FROM key_reveals WHERE id = $1 AND session_hash = $2 AND expires_at > now() RETURNING sealed', [id, sha256(sessionId)])).rows[0];
  if (row === undefined) return undefined;
  try {
    const raw = Buffer.from(row.sealed, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(id));
    decipher.setAuthTag(raw.subarray(12, 28));
    const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    const parsed = JSON.parse(text) as Partial<Reveal>;
    return typeof parsed.name === 'string' && typeof parsed.secret === 'string' ? { name: parsed.name, secret: parsed.secret } : undefined;
  } catch {
    return undefined;
  }
}
