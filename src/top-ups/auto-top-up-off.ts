// Automatic top-ups turned off after a charge that was not paid, and the account's holders told (through
// the caller's transaction, so the mail is sent only if the change commits). One place for every way a
// charge ends unpaid: its own answer (auto-top-up.ts), the payment's later event (service.ts), or a
// provider that never answered.
import type { Queryable } from '../record/database.js';

/** Mails the account's holders, in the caller's transaction (the dashboard's outbox). */
export type NotifyHolders = (tx: Queryable, accountId: string, subject: string, text: string) => Promise<void>;

export const UNPAID_SUBJECT = 'Your automatic Tollgate top-up was not paid';

/** Turns automatic top-ups off with `why` (shown on the Balance page) and mails the holders. */
export async function turnOffAfterUnpaid(tx: Queryable, accountId: string, why: string, notifyHolders: NotifyHolders | undefined): Promise<void> {
  await tx.query('UPDATE auto_top_ups SET enabled = false, disabled_reason = $2, updated_at = now() WHERE account_id = $1', [accountId, `Turned off: ${why}.`]);
  await notifyHolders?.(
    tx,
    accountId,
    UNPAID_SUBJECT,
    `An automatic top-up could not be paid: ${why}. Automatic top-ups are now off. Add money on the Balance page (you will be asked to confirm there), then turn automatic top-ups on again.`,
  );
}
