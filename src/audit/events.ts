// Entries for what changes no row of a recorded table: sign-ins (and failed ones), sign-outs, a verify
// run. Who and from where come from the acting context, as for the triggers' entries.
import type { Queryable } from '../record/database.js';

export interface AuditEvent {
  /** Dotted, domain words: `sign_in.succeeded`, `sign_in.failed`. */
  action: string;
  accountId?: string;
  target?: string;
  /** What the entry records beyond who and when (never a secret). */
  detail?: Record<string, string | number | boolean | null>;
}

export async function recordAuditEvent(q: Queryable, event: AuditEvent): Promise<void> {
  await q.query('INSERT INTO audit_log (account_id, action, target, after) VALUES ($1, $2, $3, $4)', [
    event.accountId ?? null,
    event.action,
    event.target ?? null,
    event.detail === undefined ? null : JSON.stringify(event.detail),
  ]);
}
