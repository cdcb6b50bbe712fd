// Automatic top-ups by a saved card, as OpenRouter offers them: a holder saves a card through the
// provider's hosted page and sets a threshold, an amount (at least 5.00, the usual fee on top) and a
// monthly maximum. A pass, run every few seconds, finds accounts whose balance of record is below their
// threshold and makes one off-session payment for each: the top-up (origin 'auto') is written first, so
// at most one is in flight per account (a unique index says so) and its id is the payment's idempotency
// key, then the card is charged, and the payment's webhook credits it exactly like any top-up. A decline,
// or a bank that wants the holder present, turns automatic top-ups off and mails the holder.
import { randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../record/database.js';
import type { PaymentProvider, SavedCard, SavedCards } from './provider.js';
import { describeInvalidTopUp, formatCents, MICROS_PER_CENT, quoteTopUp, type Cents } from './quote.js';
import { TopUpError } from './service.js';

export interface AutoTopUpSettings {
  enabled: boolean;
  thresholdCents: Cents;
  amountCents: Cents;
  monthlyMaxCents: Cents;
  /** The saved card, for pages ("visa ending 4242"); null before one is saved. */
  card: string | null;
  /** Why it was turned off, when it was. */
  disabledReason: string | null;
  /** Credit of this month's automatic top-ups (in flight or credited). */
  thisMonthCents: Cents;
}

export interface AutoTopUpOptions {
  db: Database;
  provider: PaymentProvider & { readonly savedCards: SavedCards };
  /** The dashboard's address as holders reach it: where the provider sends them back after saving a card. */
  publicUrl: () => string;
  /** Mails the account's holders, in the caller's transaction (the dashboard's outbox). */
  notifyHolders?: (tx: Queryable, accountId: string, subject: string, text: string) => Promise<void>;
  onError?: (what: string, err: unknown) => void;
}

interface SettingsRow {
  enabled: boolean;
  threshold_cents: number;
  amount_cents: number;
  monthly_max_cents: number;
  customer_ref: string | null;
  payment_method_ref: string | null;
  card_label: string | null;
  disabled_reason: string | null;
}

interface DueRow {
  account_id: string;
  amount_cents: number;
  monthly_max_cents: number;
  customer_ref: string;
  payment_method_ref: string;
  card_label: string | null;
  balance: number;
  threshold_cents: number;
}

/** A quoted automatic top-up left unpaid this long (the charge call failed) is charged again, same key. */
const STUCK_AFTER_MS = 60_000;

const MONTH_START = `date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`;

async function thisMonth(q: Queryable, accountId: string): Promise<Cents> {
  const r = await q.query<{ cents: number }>(
    `SELECT COALESCE(sum(credit_cents), 0)::bigint AS cents FROM top_ups
      WHERE account_id = $1 AND origin = 'auto' AND state NOT IN ('failed', 'expired', 'cancelled') AND created_at >= ${MONTH_START}`,
    [accountId],
  );
  return Number(r.rows[0]?.cents ?? 0);
}

export class AutoTopUps {
  constructor(private readonly opts: AutoTopUpOptions) {}

  async settings(accountId: string): Promise<AutoTopUpSettings> {
    const r = await this.opts.db.query<SettingsRow>('SELECT * FROM auto_top_ups WHERE account_id = $1', [accountId]);
    const row = r.rows[0];
    return {
      enabled: row?.enabled ?? false,
      thresholdCents: Number(row?.threshold_cents ?? 500),
      amountCents: Number(row?.amount_cents ?? 2000),
      monthlyMaxCents: Number(row?.monthly_max_cents ?? 10_000),
      card: row?.payment_method_ref === null || row?.payment_method_ref === undefined ? null : (row.card_label ?? 'saved card'),
      disabledReason: row?.disabled_reason ?? null,
      thisMonthCents: await thisMonth(this.opts.db, accountId),
    };
  }

  /** Sets the threshold, amount and monthly maximum, and turns it on or off (on needs a saved card). */
  async configure(accountId: string, input: { enabled: boolean; thresholdCents: Cents | undefined; amountCents: Cents | undefined; monthlyMaxCents: Cents | undefined }): Promise<AutoTopUpSettings> {
    const { thresholdCents, amountCents, monthlyMaxCents } = input;
    if (thresholdCents === undefined || thresholdCents < 0) throw new TopUpError(400, 'Enter the balance below which to top up, in USD (for example 5.00).');
    const amountProblem = describeInvalidTopUp(amountCents);
    if (amountProblem !== undefined || amountCents === undefined) throw new TopUpError(400, `Amount to add: ${amountProblem ?? 'enter an amount'}`);
    if (monthlyMaxCents === undefined || monthlyMaxCents < amountCents) throw new TopUpError(400, 'The monthly maximum must be at least the amount of one top-up.');
    const current = await this.settings(accountId);
    if (input.enabled && current.card === null) throw new TopUpError(409, 'Save a card first: automatic top-ups charge it.');
    await this.opts.db.query(
      `INSERT INTO auto_top_ups (account_id, enabled, threshold_cents, amount_cents, monthly_max_cents, disabled_reason)
       VALUES ($1, $2, $3, $4, $5, NULL)
       ON CONFLICT (account_id) DO UPDATE SET enabled = EXCLUDED.enabled, threshold_cents = EXCLUDED.threshold_cents, amount_cents = EXCLUDED.amount_cents,
         monthly_max_cents = EXCLUDED.monthly_max_cents, disabled_reason = NULL, updated_at = now()`,
      [accountId, input.enabled, thresholdCents, amountCents, monthlyMaxCents],
    );
    return this.settings(accountId);
  }

  /** Starts saving a card at the provider; the holder is sent to the returned address. */
  async startCardSetup(accountId: string): Promise<string> {
    const existing = await this.opts.db.query<{ customer_ref: string | null }>('SELECT customer_ref FROM auto_top_ups WHERE account_id = $1', [accountId]);
    const id = `cs_${randomBytes(12).toString('base64url')}`;
    const base = this.opts.publicUrl().replace(/\/$/, '');
    const setup = await this.opts.provider.savedCards.startCardSetup({
      accountId,
      customerRef: existing.rows[0]?.customer_ref ?? undefined,
      successUrl: `${base}/balance?card_setup=${id}`,
      cancelUrl: `${base}/balance?card_setup=${id}&cancelled=1`,
    });
    await this.opts.db.transaction(async (tx) => {
      await tx.query('INSERT INTO card_setups (id, account_id, checkout_ref) VALUES ($1, $2, $3)', [id, accountId, setup.checkoutRef]);
      await tx.query(
        `INSERT INTO auto_top_ups (account_id, customer_ref) VALUES ($1, $2) ON CONFLICT (account_id) DO UPDATE SET customer_ref = EXCLUDED.customer_ref, updated_at = now()`,
        [accountId, setup.customerRef],
      );
    });
    return setup.checkoutUrl;
  }

  /** Back from the provider: the card the setup saved is kept; false while the setup is not finished. */
  async completeCardSetup(accountId: string, setupId: string): Promise<boolean> {
    const r = await this.opts.db.query<{ checkout_ref: string }>('SELECT checkout_ref FROM card_setups WHERE id = $1 AND account_id = $2', [setupId, accountId]);
    const setup = r.rows[0];
    if (setup === undefined) throw new TopUpError(404, 'There is no such card setup on this account.');
    const card = await this.opts.provider.savedCards.savedCard(setup.checkout_ref);
    if (card === undefined) return false;
    await this.opts.db.transaction(async (tx) => {
      await tx.query('UPDATE card_setups SET completed_at = coalesce(completed_at, now()) WHERE id = $1', [setupId]);
      await tx.query(
        `INSERT INTO auto_top_ups (account_id, customer_ref, payment_method_ref, card_label) VALUES ($1, $2, $3, $4)
         ON CONFLICT (account_id) DO UPDATE SET customer_ref = EXCLUDED.customer_ref, payment_method_ref = EXCLUDED.payment_method_ref,
           card_label = EXCLUDED.card_label, disabled_reason = NULL, updated_at = now()`,
        [accountId, card.customerRef, card.paymentMethodRef, card.label],
      );
    });
    return true;
  }

  /** One pass: every account below its threshold gets one automatic top-up; how many were charged. */
  async check(): Promise<number> {
    const due = await this.opts.db.query<DueRow>(
      `SELECT a.account_id, a.amount_cents, a.monthly_max_cents, a.customer_ref, a.payment_method_ref, a.card_label, t.balance, a.threshold_cents
         FROM auto_top_ups a JOIN account_totals t USING (account_id)
        WHERE a.enabled AND a.payment_method_ref IS NOT NULL AND a.customer_ref IS NOT NULL AND t.balance < a.threshold_cents * $1`,
      [MICROS_PER_CENT],
    );
    let charged = 0;
    for (const row of due.rows) {
      try {
        const topUpId = await this.begin(row);
        if (topUpId !== undefined && (await this.charge(topUpId, row))) charged++;
      } catch (err) {
        this.opts.onError?.('automatic top-up', err);
      }
    }
    // Quoted but never charged (the provider did not answer): charged again under the same key.
    const stuck = await this.opts.db.query<DueRow & { id: string }>(
      `SELECT t.id, a.account_id, a.customer_ref, a.payment_method_ref, a.card_label, t.credit_cents AS amount_cents
         FROM top_ups t JOIN auto_top_ups a USING (account_id)
        WHERE t.origin = 'auto' AND t.state = 'quoted' AND t.provider_ref IS NULL AND t.created_at < now() - make_interval(secs => $1)
          AND a.payment_method_ref IS NOT NULL AND a.customer_ref IS NOT NULL`,
      [STUCK_AFTER_MS / 1000],
    );
    for (const row of stuck.rows) {
      try {
        if (await this.charge(row.id, row)) charged++;
      } catch (err) {
        this.opts.onError?.('automatic top-up', err);
      }
    }
    return charged;
  }

  /** Writes the automatic top-up, unless one is in flight or the month's maximum would be passed. */
  private async begin(row: DueRow): Promise<string | undefined> {
    const q = quoteTopUp(Number(row.amount_cents));
    const id = `tu_${randomBytes(12).toString('base64url')}`;
    return this.opts.db.transaction(async (tx) => {
      // Passes on one account take turns (the settings row's lock), and each reads the balance again
      // under it: a pass that listed the account before another's top-up was credited finds it above
      // the threshold now, rather than charging the card a second time.
      const still = await tx.query<{ enabled: boolean; balance: number }>(
        `SELECT a.enabled, t.balance FROM auto_top_ups a JOIN account_totals t USING (account_id) WHERE a.account_id = $1 FOR UPDATE OF a`,
        [row.account_id],
      );
      const now = still.rows[0];
      if (now === undefined || !now.enabled || Number(now.balance) >= Number(row.threshold_cents) * MICROS_PER_CENT) return undefined;
      if ((await thisMonth(tx, row.account_id)) + q.creditCents > Number(row.monthly_max_cents)) return undefined;
      const inserted = await tx.query(
        `INSERT INTO top_ups (id, account_id, provider, credit_cents, fee_cents, total_cents, state, origin) VALUES ($1, $2, $3, $4, $5, $6, 'quoted', 'auto')
         ON CONFLICT (account_id) WHERE origin = 'auto' AND state IN ('quoted', 'pending') DO NOTHING RETURNING id`,
        [id, row.account_id, this.opts.provider.name, q.creditCents, q.feeCents, q.totalCents],
      );
      if (inserted.rows.length === 0) return undefined;
      await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, $3, $4)', [
        id,
        'quoted',
        q.totalCents,
        `automatic: the balance fell below ${formatCents(Number(row.threshold_cents))} USD; credit ${formatCents(q.creditCents)} + fee ${formatCents(q.feeCents)} USD`,
      ]);
      return id;
    });
  }

  /** Charges the saved card for the top-up; a decline turns automatic top-ups off and tells the holder. */
  private async charge(topUpId: string, row: Pick<DueRow, 'account_id' | 'customer_ref' | 'payment_method_ref' | 'card_label'>): Promise<boolean> {
    const total = await this.opts.db.query<{ total_cents: number }>('SELECT total_cents FROM top_ups WHERE id = $1', [topUpId]);
    const card: SavedCard = { customerRef: row.customer_ref, paymentMethodRef: row.payment_method_ref, label: row.card_label ?? 'saved card' };
    const result = await this.opts.provider.savedCards.chargeSavedCard({ topUpId, accountId: row.account_id, card, totalCents: Number(total.rows[0]?.total_cents ?? 0) });
    await this.opts.db.transaction(async (tx) => {
      if (result.ok) {
        // The webhook may have credited it already (it finds the top-up by its id): only the reference is added then.
        await tx.query(`UPDATE top_ups SET provider_ref = coalesce(provider_ref, $2), state = CASE WHEN state = 'quoted' THEN 'pending' ELSE state END, updated_at = now() WHERE id = $1`, [topUpId, result.paymentRef]);
        await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, NULL, $3)', [topUpId, 'charged', `${card.label}, without you present`]);
        return;
      }
      const why = result.needsAuthentication ? 'your bank asked to confirm the payment with you present' : `the card was declined (${result.reason})`;
      await tx.query(`UPDATE top_ups SET state = 'failed', updated_at = now() WHERE id = $1 AND state IN ('quoted', 'pending')`, [topUpId]);
      await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, NULL, $3)', [topUpId, 'failed', `automatic top-up not paid: ${why}`]);
      await tx.query('UPDATE auto_top_ups SET enabled = false, disabled_reason = $2, updated_at = now() WHERE account_id = $1', [row.account_id, `Turned off: ${why}.`]);
      await this.opts.notifyHolders?.(
        tx,
        row.account_id,
        'Your automatic Tollgate top-up was not paid',
        `An automatic top-up could not be paid: ${why}. Automatic top-ups are now off. Add money on the Balance page (you will be asked to confirm there), then turn automatic top-ups on again.`,
      );
    });
    return result.ok;
  }
}
