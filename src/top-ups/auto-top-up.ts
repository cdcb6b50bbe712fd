// Automatic top-ups by a saved card, as OpenRouter offers them: a holder saves a card through the
// provider's hosted page and sets a threshold, an amount (at least 5.00, the usual fee on top) and a
// monthly maximum of what the card may be charged (credit + fee). A pass, run every few seconds by every
// process with a dashboard port, finds accounts whose balance of record is below their threshold and
// makes one off-session payment for each.
//
// One charge per crossing, however many passes run: every writer of an account's automatic top-ups
// (a pass, the settings form, a new card, the holder's cancel, a payment's failure event) takes the
// account's settings row lock first. Under it, a pass reads the settings, the balance and the top-ups
// in flight in one statement begun after the lock is its own, so a webhook that credited the previous
// top-up is seen whole (credited, and its credit on the balance) or not at all; then the top-up (origin
// 'auto') is written with the card it will charge, and a unique index keeps one in flight per account.
//
// The holder decides: a charge is "sent" once its attempt is committed under the lock, and only then is
// the provider called (the top-up's id is the idempotency key). Turning automatic top-ups off, saving
// another card abandons every top-up never sent, turning off or cancelling every one not charged yet; a
// call that got no answer (a 5xx, a timeout) is sent again later with the same key and the same card
// (never another: Stripe answers a repeated key with the payment it made), for at most `retryForMs`,
// and then abandoned and automatic top-ups turned off. A decline, a bank that wants the holder present, or a
// payment that fails later (its event) turns them off and mails the holder.
import { randomBytes } from 'node:crypto';
import { recordAuditEvent } from '../audit/events.js';
import type { Database, Queryable } from '../record/database.js';
import { turnOffAfterUnpaid, type NotifyHolders } from './auto-top-up-off.js';
import { describeUnpaidCharge, type OffSessionCharge, type PaymentProvider, type SavedCard, type SavedCards } from './provider.js';
import { describeInvalidTopUp, formatCents, MICROS_PER_CENT, quoteTopUp, type Cents } from './quote.js';
import { TopUpError } from './service.js';

export interface AutoTopUpSettings {
  enabled: boolean;
  thresholdCents: Cents;
  amountCents: Cents;
  /** The most the card may be charged in a calendar month (UTC), fees included. */
  monthlyMaxCents: Cents;
  /** The saved card, for pages ("visa ending 4242"); null before one is saved. */
  card: string | null;
  /** Why it was turned off, when it was. */
  disabledReason: string | null;
  /** What this month's automatic top-ups charge the card (credit + fee), in flight or paid. */
  chargedThisMonthCents: Cents;
}

export interface AutoTopUpOptions {
  db: Database;
  provider: PaymentProvider & { readonly savedCards: SavedCards };
  /** The dashboard's address as holders reach it: where the provider sends them back after saving a card. */
  publicUrl: () => string;
  /** Mails the account's holders, in the caller's transaction (the dashboard's outbox). */
  notifyHolders?: NotifyHolders;
  onError?: (what: string, err: unknown) => void;
  /**
   * A charge whose call got no answer is sent again after this long (default 5 minutes: longer than
   * the client's own timeouts and retries, so two sends of one key do not overlap).
   */
  retryAfterMs?: number;
  /** ...for at most this long after it was quoted (default an hour, well inside the 24 hours Stripe keeps a key). */
  retryForMs?: number;
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

/** A top-up's charge as the claim reads it, under the account's lock. */
interface ChargeRow {
  account_id: string;
  state: string;
  total_cents: number;
  customer_ref: string;
  payment_method_ref: string;
  card_label: string | null;
  attempts: number;
  enabled: boolean;
  card_now: string | null;
  /** Not sent within the last retryAfterMs (or, never sent, quoted that long ago). */
  due: boolean;
  /** Quoted longer than retryForMs ago. */
  too_old: boolean;
}

/** Sent now: the card and amount to charge. */
interface Claimed {
  accountId: string;
  card: SavedCard;
  totalCents: Cents;
}

const MONTH_START = `date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`;

/** What this month's automatic top-ups charge the card, in flight or paid (abandoned and failed ones charged nothing). */
const CHARGED_THIS_MONTH = `SELECT COALESCE(sum(total_cents), 0)::bigint FROM top_ups
  WHERE account_id = $1 AND origin = 'auto' AND state NOT IN ('failed', 'expired', 'cancelled') AND created_at >= ${MONTH_START}`;

/** Why a top-up not charged yet is abandoned, as its timeline says it. */
const ABANDONED = {
  turnedOff: 'automatic top-ups were turned off before it was charged',
  newCard: 'another card was saved before it was charged',
  cancelled: 'you cancelled it before it was charged',
  notSent: 'the pass that quoted it stopped before charging; the next pass decides again',
  noAnswer: 'the payment provider did not answer',
} as const;

/** The account's settings row, locked: every writer of its automatic top-ups takes it first. */
async function lockAccount(tx: Queryable, accountId: string): Promise<void> {
  await tx.query('SELECT 1 FROM auto_top_ups WHERE account_id = $1 FOR UPDATE', [accountId]);
}

/**
 * Abandons the account's automatic top-ups not charged yet (only `topUpId`, when given; only those never
 * sent, with `neverSent`): cancelled, which a payment the provider did make still credits when its event
 * arrives. The ids abandoned.
 */
async function abandon(tx: Queryable, accountId: string, reason: string, only: { topUpId?: string; neverSent?: boolean } = {}): Promise<string[]> {
  const r = await tx.query<{ id: string }>(
    `UPDATE top_ups t SET state = 'cancelled', updated_at = now()
      WHERE t.account_id = $1 AND t.origin = 'auto' AND t.state = 'quoted' AND ($2::text IS NULL OR t.id = $2)
        AND NOT ($3 AND EXISTS (SELECT 1 FROM auto_top_up_charges c WHERE c.top_up_id = t.id AND c.attempts > 0)) RETURNING t.id`,
    [accountId, only.topUpId ?? null, only.neverSent === true],
  );
  for (const { id } of r.rows) {
    await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, NULL, $3)', [
      id,
      'abandoned',
      `not charged: ${reason}. If the payment provider had taken it already, it is credited when the provider reports it.`,
    ]);
  }
  return r.rows.map((x) => x.id);
}

export class AutoTopUps {
  private readonly retryAfterMs: number;
  private readonly retryForMs: number;

  constructor(private readonly opts: AutoTopUpOptions) {
    this.retryAfterMs = opts.retryAfterMs ?? 5 * 60_000;
    this.retryForMs = opts.retryForMs ?? 60 * 60_000;
  }

  async settings(accountId: string): Promise<AutoTopUpSettings> {
    const r = await this.opts.db.query<SettingsRow & { charged: number }>(`SELECT a.*, (${CHARGED_THIS_MONTH}) AS charged FROM auto_top_ups a WHERE account_id = $1`, [accountId]);
    const row = r.rows[0];
    const charged = row === undefined ? (await this.opts.db.query<{ c: number }>(`SELECT (${CHARGED_THIS_MONTH}) AS c`, [accountId])).rows[0]?.c : row.charged;
    return {
      enabled: row?.enabled ?? false,
      thresholdCents: Number(row?.threshold_cents ?? 500),
      amountCents: Number(row?.amount_cents ?? 2000),
      monthlyMaxCents: Number(row?.monthly_max_cents ?? 10_000),
      card: row?.payment_method_ref === null || row?.payment_method_ref === undefined ? null : (row.card_label ?? 'saved card'),
      disabledReason: row?.disabled_reason ?? null,
      chargedThisMonthCents: Number(charged ?? 0),
    };
  }

  /**
   * Sets the threshold, amount and monthly maximum, and turns it on or off (on needs a saved card).
   * Off abandons every automatic top-up not charged yet, in the same transaction.
   */
  async configure(accountId: string, input: { enabled: boolean; thresholdCents: Cents | undefined; amountCents: Cents | undefined; monthlyMaxCents: Cents | undefined }): Promise<AutoTopUpSettings> {
    const { thresholdCents, amountCents, monthlyMaxCents } = input;
    if (thresholdCents === undefined || thresholdCents < 0) throw new TopUpError(400, 'Enter the balance below which to top up, in USD (for example 5.00).');
    const amountProblem = describeInvalidTopUp(amountCents);
    if (amountProblem !== undefined || amountCents === undefined) throw new TopUpError(400, `Amount to add: ${amountProblem ?? 'enter an amount'}`);
    const oneCharge = quoteTopUp(amountCents).totalCents;
    if (monthlyMaxCents === undefined || monthlyMaxCents < oneCharge) {
      throw new TopUpError(400, `The monthly maximum is what the card may be charged in a month, fees included: one top-up of ${formatCents(amountCents)} USD charges ${formatCents(oneCharge)} USD, so set at least that.`);
    }
    const current = await this.settings(accountId);
    if (input.enabled && current.card === null) throw new TopUpError(409, 'Save a card first: automatic top-ups charge it.');
    await this.opts.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO auto_top_ups (account_id, enabled, threshold_cents, amount_cents, monthly_max_cents, disabled_reason)
         VALUES ($1, $2, $3, $4, $5, NULL)
         ON CONFLICT (account_id) DO UPDATE SET enabled = EXCLUDED.enabled, threshold_cents = EXCLUDED.threshold_cents, amount_cents = EXCLUDED.amount_cents,
           monthly_max_cents = EXCLUDED.monthly_max_cents, disabled_reason = NULL, updated_at = now()`,
        [accountId, input.enabled, thresholdCents, amountCents, monthlyMaxCents],
      );
      if (!input.enabled) await abandon(tx, accountId, ABANDONED.turnedOff);
    });
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
      // Card setups are not a recorded table; that one was started (and by whom) is worth the log's line.
      await recordAuditEvent(tx, { action: 'auto_top_ups.card_setup_started', accountId, target: id });
      await tx.query(
        `INSERT INTO auto_top_ups (account_id, customer_ref) VALUES ($1, $2) ON CONFLICT (account_id) DO UPDATE SET customer_ref = EXCLUDED.customer_ref, updated_at = now()`,
        [accountId, setup.customerRef],
      );
    });
    return setup.checkoutUrl;
  }

  /**
   * Back from the provider: the card the setup saved is kept; false while the setup is not finished.
   * A top-up never sent was quoted for the old card: it is abandoned, never sent with this one. One
   * whose charge got no answer may have been made: it is sent again on its own card under its key
   * (Stripe answers with the payment it made, if it made one), never on the new card.
   */
  async completeCardSetup(accountId: string, setupId: string): Promise<boolean> {
    const r = await this.opts.db.query<{ checkout_ref: string }>('SELECT checkout_ref FROM card_setups WHERE id = $1 AND account_id = $2', [setupId, accountId]);
    const setup = r.rows[0];
    if (setup === undefined) throw new TopUpError(404, 'There is no such card setup on this account.');
    const card = await this.opts.provider.savedCards.savedCard(setup.checkout_ref);
    if (card === undefined) return false;
    await this.opts.db.transaction(async (tx) => {
      await lockAccount(tx, accountId);
      await tx.query('UPDATE card_setups SET completed_at = coalesce(completed_at, now()) WHERE id = $1', [setupId]);
      const before = await tx.query<{ payment_method_ref: string | null }>('SELECT payment_method_ref FROM auto_top_ups WHERE account_id = $1', [accountId]);
      await tx.query(
        `INSERT INTO auto_top_ups (account_id, customer_ref, payment_method_ref, card_label) VALUES ($1, $2, $3, $4)
         ON CONFLICT (account_id) DO UPDATE SET customer_ref = EXCLUDED.customer_ref, payment_method_ref = EXCLUDED.payment_method_ref,
           card_label = EXCLUDED.card_label, disabled_reason = NULL, updated_at = now()`,
        [accountId, card.customerRef, card.paymentMethodRef, card.label],
      );
      if ((before.rows[0]?.payment_method_ref ?? null) !== card.paymentMethodRef) await abandon(tx, accountId, ABANDONED.newCard, { neverSent: true });
    });
    return true;
  }

  /** The holder cancels an automatic top-up that is not charged yet; one the card was charged for stays. */
  async cancel(accountId: string, topUpId: string): Promise<void> {
    await this.opts.db.transaction(async (tx) => {
      await lockAccount(tx, accountId);
      if ((await abandon(tx, accountId, ABANDONED.cancelled, { topUpId })).length === 0) {
        throw new TopUpError(409, 'Only an automatic top-up not charged yet can be cancelled; this one was charged (or is finished).');
      }
    });
  }

  /** One pass: every account below its threshold gets one automatic top-up; how many were charged. */
  async check(): Promise<number> {
    // Accounts that look due; each is decided again under its lock.
    const due = await this.opts.db.query<{ account_id: string }>(
      `SELECT a.account_id FROM auto_top_ups a JOIN account_totals t USING (account_id)
        WHERE a.enabled AND a.payment_method_ref IS NOT NULL AND a.customer_ref IS NOT NULL AND t.balance < a.threshold_cents * $1`,
      [MICROS_PER_CENT],
    );
    let charged = 0;
    for (const { account_id: accountId } of due.rows) {
      try {
        const topUpId = await this.begin(accountId);
        if (topUpId !== undefined && (await this.send(topUpId, 'first'))) charged++;
      } catch (err) {
        this.opts.onError?.('automatic top-up', err);
      }
    }
    // Quoted and not answered (or never sent): sent again under the same key and card, or abandoned.
    const stuck = await this.opts.db.query<{ id: string }>(
      `SELECT t.id FROM top_ups t JOIN auto_top_up_charges c ON c.top_up_id = t.id
        WHERE t.origin = 'auto' AND t.state = 'quoted' AND coalesce(c.last_attempt_at, t.created_at) < now() - make_interval(secs => $1)`,
      [this.retryAfterMs / 1000],
    );
    for (const { id } of stuck.rows) {
      try {
        if (await this.send(id, 'retry')) charged++;
      } catch (err) {
        this.opts.onError?.('automatic top-up', err);
      }
    }
    return charged;
  }

  /** Writes the account's automatic top-up, unless it is off, above its threshold, has one in flight or its month is full. */
  private async begin(accountId: string): Promise<string | undefined> {
    return this.opts.db.transaction(async (tx) => {
      await lockAccount(tx, accountId);
      // A statement of its own, begun once the lock is ours: its one snapshot holds every pass and
      // webhook that committed before, so the balance and the top-ups in flight agree.
      const r = await tx.query<SettingsRow & { balance: number; in_flight: boolean; charged: number }>(
        `SELECT a.*, coalesce(t.balance, 0) AS balance, (${CHARGED_THIS_MONTH}) AS charged,
                EXISTS (SELECT 1 FROM top_ups f WHERE f.account_id = a.account_id AND f.origin = 'auto' AND f.state IN ('quoted', 'pending')) AS in_flight
           FROM auto_top_ups a LEFT JOIN account_totals t USING (account_id) WHERE a.account_id = $1`,
        [accountId],
      );
      const s = r.rows[0];
      if (s === undefined || !s.enabled || s.in_flight || s.customer_ref === null || s.payment_method_ref === null) return undefined;
      if (Number(s.balance) >= Number(s.threshold_cents) * MICROS_PER_CENT) return undefined;
      const q = quoteTopUp(Number(s.amount_cents));
      if (Number(s.charged) + q.totalCents > Number(s.monthly_max_cents)) return undefined;
      const id = `tu_${randomBytes(12).toString('base64url')}`;
      const inserted = await tx.query(
        `INSERT INTO top_ups (id, account_id, provider, credit_cents, fee_cents, total_cents, state, origin) VALUES ($1, $2, $3, $4, $5, $6, 'quoted', 'auto')
         ON CONFLICT (account_id) WHERE origin = 'auto' AND state IN ('quoted', 'pending') DO NOTHING RETURNING id`,
        [id, accountId, this.opts.provider.name, q.creditCents, q.feeCents, q.totalCents],
      );
      if (inserted.rows.length === 0) return undefined;
      await tx.query('INSERT INTO auto_top_up_charges (top_up_id, customer_ref, payment_method_ref, card_label) VALUES ($1, $2, $3, $4)', [
        id,
        s.customer_ref,
        s.payment_method_ref,
        s.card_label,
      ]);
      await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, $3, $4)', [
        id,
        'quoted',
        q.totalCents,
        `automatic: the balance fell below ${formatCents(Number(s.threshold_cents))} USD; credit ${formatCents(q.creditCents)} + fee ${formatCents(q.feeCents)} USD`,
      ]);
      return id;
    });
  }

  /**
   * Decides under the account's lock whether the top-up's charge goes out now, and records the attempt
   * before it does: the top-up's own card, or nothing (abandoned when the holder turned it off, saved
   * another card, or the provider has not answered for retryForMs).
   */
  private async claim(topUpId: string, kind: 'first' | 'retry'): Promise<Claimed | undefined> {
    return this.opts.db.transaction(async (tx) => {
      const owner = (await tx.query<{ account_id: string }>('SELECT account_id FROM top_ups WHERE id = $1', [topUpId])).rows[0];
      if (owner === undefined) return undefined;
      await lockAccount(tx, owner.account_id);
      const r = await tx.query<ChargeRow>(
        `SELECT t.account_id, t.state, t.total_cents, c.customer_ref, c.payment_method_ref, c.card_label, c.attempts, a.enabled, a.payment_method_ref AS card_now,
                coalesce(c.last_attempt_at, t.created_at) < now() - make_interval(secs => $2) AS due,
                t.created_at < now() - make_interval(secs => $3) AS too_old
           FROM top_ups t JOIN auto_top_up_charges c ON c.top_up_id = t.id JOIN auto_top_ups a ON a.account_id = t.account_id
          WHERE t.id = $1 FOR UPDATE OF t`,
        [topUpId, this.retryAfterMs / 1000, this.retryForMs / 1000],
      );
      const c = r.rows[0];
      if (c === undefined || c.state !== 'quoted') return undefined;
      const accountId = c.account_id;
      const sent = Number(c.attempts) > 0;
      if (!c.enabled) return void (await abandon(tx, accountId, ABANDONED.turnedOff, { topUpId }));
      if (!sent && c.card_now !== c.payment_method_ref) return void (await abandon(tx, accountId, ABANDONED.newCard, { topUpId }));
      if (kind === 'first' ? sent : !c.due) return undefined;
      if (kind === 'retry' && !sent) return void (await abandon(tx, accountId, ABANDONED.notSent, { topUpId }));
      if (kind === 'retry' && c.too_old) {
        const why = `${ABANDONED.noAnswer} for ${Math.round(this.retryForMs / 60_000)} minutes`;
        await abandon(tx, accountId, why, { topUpId });
        // Whether the card was charged is not known: nothing more is charged until the holder says so.
        await turnOffAfterUnpaid(tx, accountId, why, this.opts.notifyHolders);
        return undefined;
      }
      await tx.query('UPDATE auto_top_up_charges SET attempts = attempts + 1, last_attempt_at = now() WHERE top_up_id = $1', [topUpId]);
      return { accountId, totalCents: Number(c.total_cents), card: { customerRef: c.customer_ref, paymentMethodRef: c.payment_method_ref, label: c.card_label ?? 'saved card' } };
    });
  }

  /** Charges the top-up's card if the claim lets it; true when the provider took the payment. */
  private async send(topUpId: string, kind: 'first' | 'retry'): Promise<boolean> {
    const claimed = await this.claim(topUpId, kind);
    if (claimed === undefined) return false;
    let result: OffSessionCharge;
    try {
      result = await this.opts.provider.savedCards.chargeSavedCard({ topUpId, accountId: claimed.accountId, card: claimed.card, totalCents: claimed.totalCents });
    } catch (err) {
      const said = err instanceof Error ? err.message.slice(0, 200) : 'no answer';
      await this.opts.db.transaction(async (tx) => {
        await tx.query('UPDATE auto_top_up_charges SET last_error = $2 WHERE top_up_id = $1', [topUpId, said]);
        await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, NULL, $3)', [
          topUpId,
          'no_answer',
          `the payment provider did not answer (${said}); it is asked again later under the same key, for the same card`,
        ]);
      });
      throw err;
    }
    await this.settle(topUpId, claimed, result);
    return result.ok;
  }

  /** The charge's answer, recorded: pending until its webhook credits it, or failed (off, and the holder mailed). */
  private async settle(topUpId: string, claimed: Claimed, result: OffSessionCharge): Promise<void> {
    await this.opts.db.transaction(async (tx) => {
      if (result.ok) {
        // The webhook may have credited it already (it finds the top-up by its id): only the reference is added then.
        await tx.query(`UPDATE top_ups SET provider_ref = coalesce(provider_ref, $2), state = CASE WHEN state = 'quoted' THEN 'pending' ELSE state END, updated_at = now() WHERE id = $1`, [topUpId, result.paymentRef]);
        await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, NULL, $3)', [topUpId, 'charged', `${claimed.card.label}, without you present`]);
        return;
      }
      await lockAccount(tx, claimed.accountId);
      // Its failure event may have come first (and done this): the holder is told once.
      const failed = await tx.query(`UPDATE top_ups SET state = 'failed', updated_at = now() WHERE id = $1 AND state IN ('quoted', 'pending') RETURNING id`, [topUpId]);
      if (failed.rows.length === 0) return;
      const why = describeUnpaidCharge(result.why, result.message);
      await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, NULL, $3)', [topUpId, 'failed', `automatic top-up not paid: ${why}`]);
      await turnOffAfterUnpaid(tx, claimed.accountId, why, this.opts.notifyHolders);
    });
  }
}
