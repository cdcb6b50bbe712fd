// The signed-in user's two-factor sign-in, as the Security page changes it: turned on with a code and
// the password (the other sessions end, ten recovery codes are shown once), new recovery codes, turned
// off; and the deployment admin's clearing of a locked-out user. The record's side is two-factor.ts.
import type { Database, Queryable } from '../record/database.js';
import { DashboardError } from './errors.js';
import { SECOND_FACTOR_NEEDED, SECOND_FACTOR_WRONG, type Identity } from './identity.js';
import { sha256 } from './sessions.js';
import { checkTotp, newTotpEnrolment, TOTP_SECRET, type TotpEnrolment } from './totp.js';
import { recordAccessEvent } from './sign-in-events.js';
import { clearSecondFactor, consumeSecondFactor, disableTotp, enableTotp, recoveryCodesLeft, replaceRecoveryCodes, secondFactorGiven, type ClearedBy } from './two-factor.js';
import type { User, UserRow } from './users.js';

export class TwoFactorSettings {
  constructor(private readonly opts: { db: Database; identity: Identity; log?: (line: string) => void }) {}

  /** A fresh TOTP secret for the enrolment page (nothing stored until a code confirms it). */
  enrolment(user: User): TotpEnrolment {
    return newTotpEnrolment(user.email);
  }

  /**
   * Turns TOTP on with the secret the enrolment page showed, once the password and a code from the
   * secret check out. This session counts as opened with the second factor; every other session of the
   * user ends. The ten recovery codes are returned to be shown this once.
   */
  async enable(user: User, sessionId: string, input: { password: unknown; secret: unknown; code: unknown }, address: string): Promise<string[]> {
    if (user.totpEnabled) throw new DashboardError(409, 'Two-factor sign-in is already on for this account.');
    const { secret } = input;
    if (typeof secret !== 'string' || !TOTP_SECRET.test(secret)) throw new DashboardError(400, 'The setup form is damaged; reload the page and start again.');
    await this.opts.identity.confirmPassword(user, input.password, address);
    const code = typeof input.code === 'string' ? input.code.replace(/\s/g, '') : '';
    const step = checkTotp(secret, code);
    if (step === undefined) throw new DashboardError(400, 'That code does not match; check the time on your phone and enter the current code.');
    return this.opts.db.transaction(async (tx) => {
      if (!(await enableTotp(tx, user.id, secret, step))) throw new DashboardError(409, 'Two-factor sign-in is already on for this account.');
      const codes = await replaceRecoveryCodes(tx, user.id);
      await tx.query('UPDATE dashboard_sessions SET second_factor = true WHERE id_hash = $1', [sha256(sessionId)]);
      await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1 AND id_hash <> $2', [user.id, sha256(sessionId)]);
      return codes;
    });
  }

  /** The password and a current code (or a recovery code) of a user with TOTP on, checked and used up in `tx`. */
  private static async confirmSecondFactor(tx: Queryable, row: UserRow, code: unknown): Promise<void> {
    if (row.totp_enabled_at === null || row.totp_secret === null) throw new DashboardError(409, 'Two-factor sign-in is off for this account.');
    if (secondFactorGiven(code) === undefined) throw new DashboardError(400, SECOND_FACTOR_NEEDED);
    if ((await consumeSecondFactor(tx, { id: row.id, totpSecret: row.totp_secret }, code)) === undefined) throw new DashboardError(403, SECOND_FACTOR_WRONG);
  }

  /**
   * Turns TOTP off: the password and a current code or a recovery code. The recovery codes go with it,
   * and no session of the user counts as opened with a second factor any more.
   */
  async disable(user: User, input: { password: unknown; code: unknown }, address: string): Promise<void> {
    const row = await this.opts.identity.confirmPassword(user, input.password, address);
    await this.opts.db.transaction(async (tx) => {
      await TwoFactorSettings.confirmSecondFactor(tx, row, input.code);
      await disableTotp(tx, user.id);
      await tx.query('UPDATE dashboard_sessions SET second_factor = false WHERE user_id = $1', [user.id]);
    });
  }

  /** Ten new recovery codes in place of the old ones (the password and a current code); shown this once. */
  async newRecoveryCodes(user: User, input: { password: unknown; code: unknown }, address: string): Promise<string[]> {
    const row = await this.opts.identity.confirmPassword(user, input.password, address);
    return this.opts.db.transaction(async (tx) => {
      await TwoFactorSettings.confirmSecondFactor(tx, row, input.code);
      // The codes are kept hashed in a table of their own; that they were replaced is what the log keeps.
      await recordAccessEvent(tx, 'two_factor.recovery_codes_replaced', user);
      return replaceRecoveryCodes(tx, user.id);
    });
  }

  /** How many of the user's recovery codes are left unused. */
  recoveryCodesLeft(user: User): Promise<number> {
    return recoveryCodesLeft(this.opts.db, user.id);
  }

  /**
   * The deployment's admin turns a user's two-factor sign-in off (phone and recovery codes lost): see
   * clearSecondFactor. The user must belong to `accountId` (the page it was asked from). False when it was off.
   */
  async clearFor(by: ClearedBy, accountId: string, userId: string): Promise<boolean> {
    const member = await this.opts.db.query('SELECT 1 FROM account_memberships WHERE user_id = $1 AND account_id = $2', [userId, accountId]);
    if (member.rows.length === 0) throw new DashboardError(404, 'There is no such user on this account.');
    const done = await clearSecondFactor(this.opts.db, { userId }, by, this.opts.log ?? ((l) => process.stderr.write(`${l}\n`)));
    return done?.cleared === true;
  }
}
