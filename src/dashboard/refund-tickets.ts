// Refund tickets: a holder asks for a request's cost back (the request is checked to be this account's
// and to have cost something); support hears of it by e-mail with the request id in the subject; an
// admin approves (the cost is credited back through the ledger's idempotent refund, of record first) or
// declines, and the holder follows the ticket's status.
import { randomBytes } from 'node:crypto';
import type { AccountService } from '../account-service/account-service.js';
import { formatUsd } from '../billing/money.js';
import type { Database } from '../record/database.js';
import { findUsage } from '../record/usage-query.js';
import { enqueueEmail } from './outbox.js';
import { DashboardError } from './errors.js';

export type TicketStatus = 'open' | 'approved' | 'declined';

export interface RefundTicket {
  id: string;
  accountId: string;
  requestId: string;
  reason: string;
  status: TicketStatus;
  /** Micro-USD credited back on approval. */
  refunded: number | null;
  note: string | null;
  createdAt: Date;
  decidedAt: Date | null;
  /** What the request cost (from its usage record). */
  cost: number;
  modelRefused: boolean;
}

interface TicketRow {
  id: string;
  account_id: string;
  request_id: string;
  reason: string;
  status: TicketStatus;
  refunded: number | null;
  note: string | null;
  created_at: Date;
  decided_at: Date | null;
  cost: number | null;
  model_refused: boolean | null;
}

const SELECT = `SELECT t.id, t.account_id, t.request_id, t.reason, t.status, t.refunded, t.note, t.created_at, t.decided_at, u.cost, u.model_refused
  FROM refund_tickets t LEFT JOIN usage_records u ON u.request_id = t.request_id AND u.account_id = t.account_id`;

function ticket(r: TicketRow): RefundTicket {
  return {
    id: r.id,
    accountId: r.account_id,
    requestId: r.request_id,
    reason: r.reason,
    status: r.status,
    refunded: r.refunded === null ? null : Number(r.refunded),
    note: r.note,
    createdAt: new Date(r.created_at),
    decidedAt: r.decided_at === null ? null : new Date(r.decided_at),
    cost: Number(r.cost ?? 0),
    modelRefused: r.model_refused === true,
  };
}

export class RefundTickets {
  constructor(
    private readonly opts: { db: Database; accounts: AccountService; supportEmail: string },
  ) {}

  async open(accountId: string, requestIdIn: unknown, reasonIn: unknown, holderEmail: string): Promise<RefundTicket> {
    const requestId = typeof requestIdIn === 'string' ? requestIdIn.trim() : '';
    const reason = typeof reasonIn === 'string' ? reasonIn.trim() : '';
    if (reason.length < 3 || reason.length > 2000) throw new DashboardError(400, 'Say in a few words why this request should be refunded (up to 2,000 characters).');
    const usage = requestId === '' ? undefined : await findUsage(this.opts.db, accountId, requestId);
    if (usage === undefined) throw new DashboardError(404, 'There is no such request on this account.');
    if (usage.cost <= 0) throw new DashboardError(400, 'This request cost nothing, so there is nothing to refund.');
    if (usage.refunded) throw new DashboardError(409, 'This request has been refunded already.');
    const id = `rt_${randomBytes(10).toString('base64url')}`;
    await this.opts.db.transaction(async (tx) => {
      const inserted = await tx.query(
        `INSERT INTO refund_tickets (id, account_id, request_id, reason, status) VALUES ($1, $2, $3, $4, 'open') ON CONFLICT (request_id) DO NOTHING RETURNING id`,
        [id, accountId, requestId, reason],
      );
      if (inserted.rows.length === 0) throw new DashboardError(409, 'A refund was already asked for this request; follow it under Refunds.');
      await enqueueEmail(tx, {
        to: this.opts.supportEmail,
        subject: `Refund request ${requestId}`,
        text: `${holderEmail} asks for a refund of request ${requestId} (account ${accountId}, cost ${formatUsd(usage.cost)} USD, model ${usage.model}${usage.modelRefused ? ', the model refused' : ''}).\n\nReason: ${reason}\n\nTicket ${id}.`,
      });
    });
    return this.get(accountId, id);
  }

  async get(accountId: string | undefined, id: string): Promise<RefundTicket> {
    const r = await this.opts.db.query<TicketRow>(`${SELECT} WHERE t.id = $1`, [id]);
    const row = r.rows[0];
    if (row === undefined || (accountId !== undefined && row.account_id !== accountId)) throw new DashboardError(404, 'There is no such refund ticket.');
    return ticket(row);
  }

  /** Newest first; every account's (an admin) when accountId is undefined, optionally by status. */
  async list(accountId: string | undefined, status?: TicketStatus): Promise<RefundTicket[]> {
    const where: string[] = [];
    const params: Array<string> = [];
    if (accountId !== undefined) where.push(`t.account_id = $${params.push(accountId)}`);
    if (status !== undefined) where.push(`t.status = $${params.push(status)}`);
    const r = await this.opts.db.query<TicketRow>(`${SELECT}${where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`} ORDER BY t.created_at DESC, t.id LIMIT 200`, params);
    return r.rows.map(ticket);
  }

  /** An admin's decision: approval credits the cost back once (the ledger's refund is idempotent). */
  async decide(id: string, adminEmail: string, approve: boolean, note?: string): Promise<RefundTicket> {
    const t = await this.get(undefined, id);
    if (t.status !== 'open') throw new DashboardError(409, `This ticket is ${t.status} already.`);
    let refunded: number | null = null;
    if (approve) {
      const outcome = await this.opts.accounts.refund(t.accountId, t.requestId);
      if (outcome.unknown) throw new DashboardError(409, 'The request has no charge of record to refund.');
      refunded = outcome.refunded;
    }
    await this.opts.db.transaction(async (tx) => {
      await tx.query(`UPDATE refund_tickets SET status = $2, refunded = $3, note = $4, decided_at = now(), decided_by = $5 WHERE id = $1 AND status = 'open'`, [
        id,
        approve ? 'approved' : 'declined',
        refunded,
        note ?? null,
        adminEmail,
      ]);
      const holders = await tx.query<{ email: string }>('SELECT email FROM dashboard_users WHERE account_id = $1', [t.accountId]);
      for (const h of holders.rows) {
        await enqueueEmail(tx, {
          to: h.email,
          subject: `Your refund request for ${t.requestId} was ${approve ? 'approved' : 'declined'}`,
          text: approve ? `${formatUsd(refunded ?? 0)} USD is back on your balance.` : `It was declined${note === undefined || note === '' ? '.' : `: ${note}`}`,
        });
      }
    });
    return this.get(undefined, id);
  }
}
