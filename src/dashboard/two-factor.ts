// The second factor of dashboard sign-in as the record keeps it: the TOTP secret with the last time step
// accepted (a code works once), and ten single-use recovery codes, any of which stands in for a code
// (at sign-in, to reset a password, to turn two-factor sign-in off) when the phone is lost.
//
// Recovery codes are 80 random bits each (16 base32 characters), kept as SHA-256 digests. Unlike a
// password, nothing about such a code can be guessed from its digest faster than trying 2^80 codes, so
// a slow hash (argon2, as for passwords) would add nothing but ~50 ms per code to every check of ten.
import { createHash } from 'node:crypto';
import { Secret } from 'otpauth';
import type { Database, Queryable } from '../record/database.js';
import { enqueueEmail } from './outbox.js';
import { checkTotp } from './totp.js';

export const RECOVERY_CODE_COUNT = 10;

/** A recovery code as typed: 16 base32 characters, any case, with or without dashes and spaces. */
const RECOVERY_CODE = /^[a-z2-7]{16}$/;

const digest = (code: string): string => createHash('sha256').update(code).digest('hex');

/** The code's canonical form (lower case, no separators), or undefined when it is not one. */
function normalizeRecoveryCode(input: string): string | undefined {
  const code = input.toLowerCase().replace(/[\s-]/g, '');
  return RECOVERY_CODE.test(code) ? code : undefined;
}

/** Ten new codes, as shown to the holder: "abcd-efgh-ijkl-mnop". */
function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => (new Secret({ size: 10 }).base32.toLowerCase().match(/.{4}/g) ?? []).join('-'));
}

/** Replaces the user's recovery codes with ten new ones (every old one stops working); the codes, to show once. */
export async function replaceRecoveryCodes(tx: Queryable, userId: string): Promise<string[]> {
  const codes = newRecoveryCodes();
  await tx.query('DELETE FROM totp_recovery_codes WHERE user_id = $1', [userId]);
  for (const code of codes) await tx.query('INSERT INTO totp_recovery_codes (user_id, code_hash) VALUES ($1, $2)', [userId, digest(normalizeRecoveryCode(code) ?? code)]);
  return codes;
}

/** How many of the user's recovery codes are unused. */
export async function recoveryCodesLeft(q: Queryable, userId: string): Promise<number> {
  const r = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM totp_recovery_codes WHERE user_id = $1 AND used_at IS NULL', [userId]);
  return Number(r.rows[0]?.n ?? 0);
}

/** A code is accepted once: its time step must be later than the last one accepted (set atomically). */
async function consumeTotp(q: Queryable, userId: string, secret: string, code: string): Promise<boolean> {
  const step = checkTotp(secret, code);
  if (step === undefined) return false;
  const r = await q.query('UPDATE dashboard_users SET totp_last_step = $2 WHERE id = $1 AND (totp_last_step IS NULL OR totp_last_step < $2)', [userId, step]);
  return r.rowCount === 1;
}

/** An unused recovery code of the user, marked used (one statement: two uses at once cannot both win). */
async function consumeRecoveryCode(q: Queryable, userId: string, input: string): Promise<boolean> {
  const code = normalizeRecoveryCode(input);
  if (code === undefined) return false;
  const r = await q.query('UPDATE totp_recovery_codes SET used_at = now() WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL', [userId, digest(code)]);
  return r.rowCount === 1;
}

/** What a second factor was given as: nothing, or a TOTP code or recovery code (which may still be wrong). */
export function secondFactorGiven(input: unknown): string | undefined {
  const text = typeof input === 'string' ? input.trim() : '';
  return text === '' || text.length > 64 ? undefined : text;
}

/**
 * Checks and uses up a second factor of a user with TOTP on: a 6-digit code of the secret (its step
 * later than the last accepted) or one of the unused recovery codes. In `q`'s transaction, so a refused
 * operation around it leaves the code unused.
 */
export async function consumeSecondFactor(q: Queryable, user: { id: string; totpSecret: string }, input: unknown): Promise<'totp' | 'recovery' | undefined> {
  const text = secondFactorGiven(input);
  if (text === undefined) return undefined;
  const digits = text.replace(/\s/g, '');
  if (/^\d{6}$/.test(digits)) return (await consumeTotp(q, user.id, user.totpSecret, digits)) ? 'totp' : undefined;
  return (await consumeRecoveryCode(q, user.id, text)) ? 'recovery' : undefined;
}

/** Turns TOTP on with a confirmed code's step; false when it was on already. */
export async function enableTotp(tx: Queryable, userId: string, secret: string, step: number): Promise<boolean> {
  const r = await tx.query('UPDATE dashboard_users SET totp_secret = $2, totp_enabled_at = now(), totp_last_step = $3 WHERE id = $1 AND totp_enabled_at IS NULL', [userId, secret, step]);
  return r.rowCount === 1;
}

/** Turns TOTP off and deletes the recovery codes; false when it was off. */
export async function disableTotp(tx: Queryable, userId: string): Promise<boolean> {
  const r = await tx.query('UPDATE dashboard_users SET totp_secret = NULL, totp_enabled_at = NULL, totp_last_step = NULL WHERE id = $1 AND totp_enabled_at IS NOT NULL', [userId]);
  await tx.query('DELETE FROM totp_recovery_codes WHERE user_id = $1', [userId]);
  return r.rowCount === 1;
}

/** Who cleared a user's second factor: a dashboard admin's user id, or the admin API's token holder. */
export type ClearedBy = { adminUserId: string } | { adminApi: true };

/**
 * The deployment's admin turns a locked-out user's two-factor sign-in off (the phone and the recovery
 * codes are lost): TOTP and the codes are gone, every session of the user ends, the user is mailed, and
 * a `totp_cleared` log line names the admin. Undefined when no such user; `cleared` false when it was off.
 */
export async function clearSecondFactor(
  db: Database,
  find: { userId: string } | { email: string },
  by: ClearedBy,
  log: (line: string) => void,
): Promise<{ userId: string; email: string; cleared: boolean } | undefined> {
  const done = await db.transaction(async (tx) => {
    const [where, value] = 'userId' in find ? ['id', find.userId] : ['email', find.email.trim().toLowerCase()];
    const user = (await tx.query<{ id: string; email: string }>(`SELECT id, email FROM dashboard_users WHERE ${where} = $1 FOR UPDATE`, [value])).rows[0];
    if (user === undefined) return undefined;
    const cleared = await disableTotp(tx, user.id);
    if (!cleared) return { userId: user.id, email: user.email, cleared };
    await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [user.id]);
    await enqueueEmail(tx, {
      to: user.email,
      subject: 'Two-factor sign-in was turned off for your Tollgate account',
      text: `The operator of this Tollgate turned off two-factor sign-in for ${user.email}, as asked when the authenticator and the recovery codes were lost. Every session was signed out. Sign in with your password and turn two-factor sign-in on again on the Security page. If you did not ask for this, tell the operator at once.`,
    });
    return { userId: user.id, email: user.email, cleared };
  });
  if (done?.cleared === true) {
    log(JSON.stringify({ level: 'info', event: 'totp_cleared', user_id: done.userId, ...('adminUserId' in by ? { admin_id: by.adminUserId } : { admin_id: 'admin-api' }) }));
  }
  return done;
}
