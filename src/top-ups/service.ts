// Top-ups, exactly once. The quote is stored before the checkout starts; a provider event is applied in
// one PostgreSQL transaction that records the event (a repeat of its id is a no-op), moves the top-up
// along its states and writes the ledger entry (top_up, reversal, dispute hold or release, each under
// its own idempotency key); only after COMMIT is the hot path told, and only then does the webhook get
// its 2xx. A crash between the two leaves a committed movement the movement sweeper applies, and the
// provider's retry finds its event recorded.
// Refund rule: a card refund of R cents (of the total paid) takes back min(R, credit) of the credit; the
// service fee is the last part refunded. A dispute holds what refunds left of the credit until it is
// closed: won, the hold is released; lost, it stays taken. Refunds and holds together never take more
// than the credit: a refund reported while a dispute holds the rest waits, and is taken if the dispute
// is won. A balance may go negative, and then requests get 402.
// Order: providers deliver events late, twice and in any order. An event about a payment no top-up has
// yet is parked (never dropped) and applied in the transaction that records the payment; the provider
// is also asked at once which checkout made the payment, so the payment need not wait for its own
// event. A refund's total is read back from the provider where it can say (refunds can fail, and then
// the credit is given back), and a dispute's outcome is final whichever event comes first.
import { randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../record/database.js';
import type { AccountService, CommittedMovement, PaymentMovement } from '../account-service/account-service.js';
import type { PaymentFact, PaymentProvider, ProviderEvent, ProviderName } from './provider.js';
import { WebhookRejected } from './provider.js';
import { turnOffAfterUnpaid, type NotifyHolders } from './auto-top-up-off.js';
import { checkedRegistry, type ProviderModule } from './provider-module.js';
import { PROVIDERS } from './providers/index.js';
import { centsToMicros, describeInvalidTopUp, formatCents, quoteTopUp, type Cents, type TopUpQuote } from './quote.js';
import { ClientError } from '../http/client-error.js';

export type TopUpState = 'quoted' | 'pending' | 'cancelled' | 'credited' | 'failed' | 'expired' | 'refunded' | 'disputed' | 'reversed';

/** How a top-up was started: by the payer at a checkout, or by an automatic top-up charging a saved card. */
export type TopUpOrigin = 'checkout' | 'auto';

export interface TopUpEvent {
  kind: string;
  amountCents: Cents | null;
  detail: string | null;
  at: Date;
}

export interface TopUpView {
  id: string;
  accountId: string;
  provider: ProviderName;
  creditCents: Cents;
  feeCents: Cents;
  totalCents: Cents;
  state: TopUpState;
  origin: TopUpOrigin;
  checkoutUrl: string | null;
  createdAt: Date;
  creditedAt: Date | null;
  timeline?: TopUpEvent[];
}

/** A top-up refused (its status and message reach the caller as they are). */
export class TopUpError extends ClientError {
  constructor(status: number, message: string) {
    super(status, message);
    this.name = 'TopUpError';
  }
}

export interface TopUpServiceOptions {
  db: Database;
  /** The providers configured here (each must be in the registry). */
  providers: readonly PaymentProvider[];
  /** Every provider Tollgate knows (providers/index.ts): labels and webhook paths. */
  registry?: readonly ProviderModule[];
  /** Where a payment's money moves: credits, reversals, dispute holds and releases, in the event's transaction. */
  accounts: AccountService;
  /** The dashboard's address as payers reach it: where the provider sends them back (read at each start). */
  publicUrl: string | (() => string);
  /** Runs right after an event's COMMIT, before the hot path and the answer (tests crash here). */
  afterCommit?: () => void;
  /** Mails an account's holders in the event's transaction (an automatic top-up whose payment failed later). */
  notifyHolders?: NotifyHolders;
  onHotPathPending?: (err: unknown) => void;
}

interface TopUpRow {
  id: string;
  account_id: string;
  provider: ProviderName;
  credit_cents: number;
  fee_cents: number;
  total_cents: number;
  currency: string;
  state: TopUpState;
  origin: TopUpOrigin;
  provider_ref: string | null;
  payment_ref: string | null;
  checkout_url: string | null;
  created_at: Date;
  credited_at: Date | null;
  refunded_cents: number | null;
}

const COLUMNS = 'id, account_id, provider, credit_cents, fee_cents, total_cents, currency, state, origin, provider_ref, payment_ref, checkout_url, created_at, credited_at, refunded_cents';

function view(r: TopUpRow): TopUpView {
  return {
    id: r.id,
    accountId: r.account_id,
    provider: r.provider,
    creditCents: Number(r.credit_cents),
    feeCents: Number(r.fee_cents),
    totalCents: Number(r.total_cents),
    state: r.state,
    origin: r.origin,
    checkoutUrl: r.checkout_url,
    createdAt: new Date(r.created_at),
    creditedAt: r.credited_at === null ? null : new Date(r.credited_at),
  };
}

/** What one event did: movements to hand to the hot path after COMMIT. */
interface Applied {
  movements: CommittedMovement[];
  /** The event named a payment no top-up has yet: it was parked under this payment id. */
  parkedPayment?: string;
}

/** One event's work: the provider it came from, its transaction, and where the money it moves goes. */
interface Step {
  provider: PaymentProvider;
  accounts: AccountService;
  tx: Queryable;
  applied: Applied;
  notifyHolders: NotifyHolders | undefined;
}

export class TopUpService {
  private readonly providers: Map<ProviderName, PaymentProvider>;
  /** Every provider Tollgate knows, configured here or not: the webhook routes and the pages' labels. */
  readonly registry: readonly ProviderModule[];

  constructor(private readonly opts: TopUpServiceOptions) {
    if (!opts.accounts.movesPayments) throw new Error("top-ups need an account service given the record's hot-path step (applyCommitted)");
    this.registry = checkedRegistry(opts.registry ?? PROVIDERS);
    this.providers = new Map(opts.providers.map((p) => [p.name, p]));
    const unknown = opts.providers.find((p) => !this.registry.some((m) => m.name === p.name));
    // It would have no webhook route: its payments would never be credited.
    if (unknown !== undefined) throw new Error(`payment provider ${unknown.name} is not in the registry (top-ups/providers/index.ts)`);
  }

  /** The providers on offer, for the pages. */
  get offered(): readonly PaymentProvider[] {
    return [...this.providers.values()];
  }

  /** A top-up's method for pages: its provider's label ("Card"), or the name of one no longer registered. */
  labelOf(name: ProviderName): string {
    return this.providers.get(name)?.label ?? this.registry.find((m) => m.name === name)?.label ?? name;
  }

  provider(name: unknown): PaymentProvider {
    const p = typeof name === 'string' ? this.providers.get(name as ProviderName) : undefined;
    if (p === undefined) throw new TopUpError(400, `Choose a payment method: ${[...this.providers.keys()].join(' or ')}.`);
    return p;
  }

  quote(creditCents: Cents | undefined): TopUpQuote {
    const reason = describeInvalidTopUp(creditCents);
    if (reason !== undefined || creditCents === undefined) throw new TopUpError(400, reason ?? 'Enter an amount.');
    return quoteTopUp(creditCents);
  }

  /** Stores the quote, then starts the provider's checkout; the payer is sent to the returned URL. */
  async start(accountId: string, creditCents: Cents | undefined, providerName: unknown): Promise<{ topUp: TopUpView; checkoutUrl: string }> {
    const provider = this.provider(providerName);
    const q = this.quote(creditCents);
    const id = `tu_${randomBytes(12).toString('base64url')}`;
    await this.opts.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO top_ups (id, account_id, provider, credit_cents, fee_cents, total_cents, state) VALUES ($1, $2, $3, $4, $5, $6, 'quoted')`,
        [id, accountId, provider.name, q.creditCents, q.feeCents, q.totalCents],
      );
      await event(tx, id, 'quoted', q.totalCents, `credit ${formatCents(q.creditCents)} + fee ${formatCents(q.feeCents)} USD`);
    });
    const base = (typeof this.opts.publicUrl === 'string' ? this.opts.publicUrl : this.opts.publicUrl()).replace(/\/$/, '');
    let checkout: { checkoutRef: string; checkoutUrl: string };
    try {
      checkout = await provider.startCheckout({
        topUpId: id,
        accountId,
        ...q,
        successUrl: `${base}/balance?top_up=${id}`,
        cancelUrl: `${base}/balance?top_up=${id}&cancelled=1`,
      });
    } catch (err) {
      await this.opts.db.transaction(async (tx) => {
        await tx.query(`UPDATE top_ups SET state = 'failed', updated_at = now() WHERE id = $1`, [id]);
        await event(tx, id, 'failed', null, 'the payment provider could not start a checkout');
      });
      throw new TopUpError(502, `${provider.label} payments are unavailable right now (${err instanceof Error ? err.message.slice(0, 120) : 'error'}); nothing was charged. Try again later.`);
    }
    const row = await this.opts.db.transaction(async (tx) => {
      const r = await tx.query<TopUpRow>(
        `UPDATE top_ups SET state = 'pending', provider_ref = $2, checkout_url = $3, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, checkout.checkoutRef, checkout.checkoutUrl],
      );
      await event(tx, id, 'checkout_started', q.totalCents, provider.label);
      return r.rows[0] as TopUpRow;
    });
    return { topUp: view(row), checkoutUrl: checkout.checkoutUrl };
  }

  /** A webhook: verified on the raw body, then each event applied. Throws WebhookRejected (answer 400). */
  async receiveWebhook(providerName: ProviderName, rawBody: Buffer, header: (name: string) => string | undefined): Promise<number> {
    const provider = this.providers.get(providerName);
    if (provider === undefined) throw new WebhookRejected(`${providerName} is not configured`);
    const events = await provider.verifyWebhook(rawBody, header);
    let applied = 0;
    for (const e of events) if (await this.apply(provider, e)) applied++;
    return applied;
  }

  /** Applies one provider event once; false for a repeat or an event about no top-up of ours. */
  async apply(provider: PaymentProvider, e: ProviderEvent): Promise<boolean> {
    const done = await this.opts.db.transaction(async (tx): Promise<Applied | undefined> => {
      const fresh = await tx.query(`INSERT INTO payment_provider_events (provider, event_id, type) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING event_id`, [
        provider.name,
        e.eventId,
        e.type,
      ]);
      if (fresh.rows.length === 0) return undefined;
      // An automatic top-up's payment failing turns automatic top-ups off: the account's settings row
      // is locked before the top-up, the order every writer of automatic top-ups takes (auto-top-up.ts).
      if ('topUp' in e.ref && e.fact.kind === 'failed') {
        await tx.query('SELECT 1 FROM auto_top_ups WHERE account_id = (SELECT account_id FROM top_ups WHERE id = $1) FOR UPDATE', [e.ref.topUp]);
      }
      const [where, value] = 'checkout' in e.ref ? ['provider_ref = $2', e.ref.checkout] : 'payment' in e.ref ? ['payment_ref = $2', e.ref.payment] : ['id = $2', e.ref.topUp];
      const found = await tx.query<TopUpRow>(`SELECT ${COLUMNS} FROM top_ups WHERE provider = $1 AND ${where} FOR UPDATE`, [provider.name, value]);
      const row = found.rows[0];
      if (row === undefined) {
        if (!('payment' in e.ref)) return { movements: [] };
        // A refund or dispute ahead of its payment: kept until the payment is recorded.
        await tx.query('INSERT INTO parked_payment_events (provider, event_id, payment_ref, type, fact) VALUES ($1, $2, $3, $4, $5)', [
          provider.name,
          e.eventId,
          e.ref.payment,
          e.type,
          JSON.stringify(e.fact),
        ]);
        return { movements: [], parkedPayment: e.ref.payment };
      }
      await tx.query('UPDATE payment_provider_events SET top_up_id = $3 WHERE provider = $1 AND event_id = $2', [provider.name, e.eventId, row.id]);
      const applied: Applied = { movements: [] };
      await transition({ provider, accounts: this.opts.accounts, tx, applied, notifyHolders: this.opts.notifyHolders }, row, e.fact);
      return applied;
    });
    if (done === undefined) return false;
    this.opts.afterCommit?.();
    for (const m of done.movements) {
      // Committed: a hot path that cannot take it now gets it from the movement sweeper.
      await this.opts.accounts.applyCommitted(m).catch((err: unknown) => this.opts.onHotPathPending?.(err));
    }
    // Parked: ask the provider which checkout made the payment, and record that payment now (which
    // applies what was parked). If it cannot say, the payment's own event or a re-check does it later.
    if (done.parkedPayment !== undefined) await this.resolvePayment(provider, done.parkedPayment).catch((err: unknown) => this.opts.onHotPathPending?.(err));
    return true;
  }

  /** Finds the top-up that made `paymentRef` through the provider and applies the checkout's state now. */
  private async resolvePayment(provider: PaymentProvider, paymentRef: string): Promise<void> {
    const checkout = await provider.checkoutOfPayment?.(paymentRef);
    if (checkout === undefined) return;
    const mine = await this.opts.db.query<{ id: string }>('SELECT id FROM top_ups WHERE provider = $1 AND provider_ref = $2', [provider.name, checkout]);
    if (mine.rows.length === 0) return;
    const fact = await provider.currentFact(checkout);
    await this.apply(provider, { eventId: `resolve:${checkout}:${paymentRef}:${fact.kind}`, type: 'resolve', ref: { checkout }, fact });
  }

  /** Whether the payer can still cancel the top-up: a checkout of theirs, started and not finished. */
  static openCheckout(t: Pick<TopUpView, 'origin' | 'state' | 'checkoutUrl'>): boolean {
    return t.origin === 'checkout' && t.state === 'pending' && t.checkoutUrl !== null;
  }

  /**
   * The payer left the checkout: the provider is asked to close it so it can no longer be paid, and the
   * top-up says cancelled. Paid meanwhile (another tab), it is re-checked instead and credited. Only a
   * checkout still open can be cancelled (409 otherwise): never an automatic top-up, nor a finished one.
   */
  async cancel(accountId: string | undefined, topUpId: string): Promise<TopUpView> {
    const t = await this.get(accountId, topUpId);
    const row = await this.row(topUpId);
    if (row === undefined || row.provider_ref === null || !TopUpService.openCheckout(t)) {
      throw new TopUpError(409, `Only a checkout still open can be cancelled; this top-up is ${t.state}.`);
    }
    const provider = this.provider(t.provider);
    if (provider.cancelCheckout === undefined) throw new TopUpError(409, `${provider.label} checkouts cannot be closed from here; an unpaid one expires by itself.`);
    // Said first, then asked of the provider: a payment that still lands credits a cancelled top-up.
    await this.opts.db.transaction(async (tx) => {
      const r = await tx.query(`UPDATE top_ups SET state = 'cancelled', updated_at = now() WHERE id = $1 AND origin = 'checkout' AND state = 'pending' RETURNING id`, [topUpId]);
      if (r.rows.length > 0) await event(tx, topUpId, 'cancelled', null, 'you left the payment page; it was closed, nothing was charged');
    });
    if (!(await provider.cancelCheckout(row.provider_ref))) return this.recheck(accountId, topUpId);
    return this.get(accountId, topUpId);
  }

  /** Asks the provider for the payment's state now and applies it through the same path. */
  async recheck(accountId: string | undefined, topUpId: string): Promise<TopUpView> {
    const t = await this.get(accountId, topUpId);
    const row = await this.row(topUpId);
    // Its reference is an off-session payment, not a checkout the provider could be asked about.
    if (t.origin === 'auto') throw new TopUpError(409, 'An automatic top-up follows its payment by the provider\'s events; there is no checkout to re-check.');
    if (row?.provider_ref === null || row === undefined) throw new TopUpError(409, 'This top-up never reached its checkout; start a new one.');
    const provider = this.provider(t.provider);
    const fact = await provider.currentFact(row.provider_ref);
    await this.apply(provider, { eventId: `recheck:${row.provider_ref}:${fact.kind}`, type: 'recheck', ref: { checkout: row.provider_ref }, fact });
    return this.get(accountId, topUpId);
  }

  /** After an outage: every provider's events since `since` (unix s), applied in order; how many were new. */
  async catchUp(since: number): Promise<number> {
    let applied = 0;
    for (const provider of this.providers.values()) for (const e of await provider.recentEvents(since)) if (await this.apply(provider, e)) applied++;
    return applied;
  }

  private async row(id: string): Promise<TopUpRow | undefined> {
    return (await this.opts.db.query<TopUpRow>(`SELECT ${COLUMNS} FROM top_ups WHERE id = $1`, [id])).rows[0];
  }

  /** One top-up with its timeline; `accountId` undefined for an admin. A top-up of another account is not found. */
  async get(accountId: string | undefined, id: string): Promise<TopUpView> {
    const row = await this.row(id);
    if (row === undefined || (accountId !== undefined && row.account_id !== accountId)) throw new TopUpError(404, 'There is no such top-up on this account.');
    const events = await this.opts.db.query<{ kind: string; amount_cents: number | null; detail: string | null; created_at: Date }>(
      'SELECT kind, amount_cents, detail, created_at FROM top_up_events WHERE top_up_id = $1 ORDER BY id',
      [id],
    );
    return { ...view(row), timeline: events.rows.map((e) => ({ kind: e.kind, amountCents: e.amount_cents === null ? null : Number(e.amount_cents), detail: e.detail, at: new Date(e.created_at) })) };
  }

  /** Newest first; every account's for an admin (accountId undefined). */
  async list(accountId: string | undefined, limit = 50): Promise<TopUpView[]> {
    const r =
      accountId === undefined
        ? await this.opts.db.query<TopUpRow>(`SELECT ${COLUMNS} FROM top_ups ORDER BY created_at DESC, id LIMIT $1`, [limit])
        : await this.opts.db.query<TopUpRow>(`SELECT ${COLUMNS} FROM top_ups WHERE account_id = $1 ORDER BY created_at DESC, id LIMIT $2`, [accountId, limit]);
    return r.rows.map(view);
  }
}

async function event(tx: Queryable, topUpId: string, kind: string, amountCents: Cents | null, detail: string | null): Promise<void> {
  await tx.query('INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail) VALUES ($1, $2, $3, $4)', [topUpId, kind, amountCents, detail]);
}

/** A payment's money, in this event's transaction, through the account service: kept for the hot path after COMMIT. */
async function credit(step: Step, m: PaymentMovement): Promise<void> {
  const done = await step.accounts.creditWithin(step.tx, m);
  if (done !== undefined) step.applied.movements.push(done);
}

async function debit(step: Step, m: PaymentMovement): Promise<void> {
  const done = await step.accounts.debitWithin(step.tx, m);
  if (done !== undefined) step.applied.movements.push(done);
}

/** Cents of a top-up's credit that refunds took back, and that disputes hold now (holds less releases). */
async function withdrawn(tx: Queryable, topUpId: string): Promise<{ reversed: Cents; held: Cents }> {
  const r = await tx.query<{ reversed: number; held: number }>(
    `SELECT (COALESCE(-sum(amount) FILTER (WHERE kind = 'reversal'), 0) / 10000)::bigint AS reversed,
            (COALESCE(-sum(amount) FILTER (WHERE kind IN ('dispute_hold', 'dispute_release')), 0) / 10000)::bigint AS held
       FROM ledger_entries WHERE reference = $1`,
    [topUpId],
  );
  return { reversed: Number(r.rows[0]?.reversed ?? 0), held: Number(r.rows[0]?.held ?? 0) };
}

/** The amount of this dispute's first timeline entry of `kind` (its detail starts with the dispute id), if any. */
async function disputeEvent(tx: Queryable, topUpId: string, kind: string, disputeId: string): Promise<{ cents: Cents } | undefined> {
  const r = await tx.query<{ amount_cents: number | null }>(
    'SELECT amount_cents FROM top_up_events WHERE top_up_id = $1 AND kind = $2 AND starts_with(detail, $3) ORDER BY id LIMIT 1',
    [topUpId, kind, `dispute ${disputeId}:`],
  );
  const row = r.rows[0];
  return row === undefined ? undefined : { cents: Number(row.amount_cents ?? 0) };
}

/** How many refund entries (taken or given back) the top-up has: the next one's idempotency key. */
async function refundEntries(tx: Queryable, topUpId: string): Promise<number> {
  const r = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger_entries WHERE reference = $1 AND kind = 'reversal' AND starts_with(idempotency_key, 'refund:')`, [topUpId]);
  return Number(r.rows[0]?.n ?? 0);
}

/**
 * Brings what refunds took back of the credit to min(refunded, credit): more is taken (never what a
 * dispute holds now: that part waits, noted, until the dispute is closed), and what a failed refund no
 * longer covers is given back (unless a lost dispute took the credit). `refundedCents` is the
 * provider's total now, so any order of events ends at the same place.
 */
async function settleRefunds(step: Step, row: TopUpRow, refundedCents: Cents): Promise<void> {
  const { tx } = step;
  const id = row.id;
  const creditCents = Number(row.credit_cents);
  const target = Math.min(refundedCents, creditCents);
  await tx.query('UPDATE top_ups SET refunded_cents = $2, updated_at = now() WHERE id = $1', [id, refundedCents]);
  const { reversed, held } = await withdrawn(tx, id);
  // Keyed by the top-up and the entry's place among its refund entries (the row is locked): a
  // repeat finds nothing to move, so it writes nothing.
  const key = async (): Promise<string> => `refund:${id}:${(await refundEntries(tx, id)) + 1}`;
  if (target > reversed) {
    const owed = target - reversed;
    const delta = Math.min(owed, creditCents - reversed - held);
    if (delta > 0) {
      await debit(step, { accountId: row.account_id, kind: 'reversal', amount: centsToMicros(delta), idempotencyKey: await key(), reference: id, memo: `refund of top-up ${id}` });
      await event(tx, id, 'refunded', refundedCents, `${formatCents(delta)} USD of credit taken back`);
    }
    if (delta < owed) await event(tx, id, 'refund_deferred', refundedCents, `${formatCents(owed - Math.max(0, delta))} USD waits: a dispute holds it; taken back if the dispute is won`);
  } else if (target < reversed) {
    if (await hasEvent(tx, id, 'dispute_lost')) {
      await event(tx, id, 'refund_failed', refundedCents, 'a refund failed, but the lost dispute keeps the credit');
    } else {
      const back = reversed - target;
      await credit(step, { accountId: row.account_id, kind: 'reversal', amount: centsToMicros(back), idempotencyKey: await key(), reference: id, memo: `refund of top-up ${id} failed: credit given back` });
      await event(tx, id, 'refund_failed', refundedCents, `a refund failed or was cancelled: ${formatCents(back)} USD of credit is back on the balance`);
    }
  }
  const after = await withdrawn(tx, id);
  await tx.query(
    `UPDATE top_ups SET state = CASE WHEN $2 THEN 'refunded' ELSE 'credited' END, updated_at = now() WHERE id = $1 AND state IN ('credited', 'refunded')`,
    [id, after.reversed > 0],
  );
}

async function hasEvent(tx: Queryable, topUpId: string, kind: string): Promise<boolean> {
  return (await tx.query('SELECT 1 FROM top_up_events WHERE top_up_id = $1 AND kind = $2 LIMIT 1', [topUpId, kind])).rows.length > 0;
}

/** The refunded total now: the provider's own answer where it can give one, else the event's. */
async function refundedNow(step: Step, row: TopUpRow, reported: Cents): Promise<Cents> {
  if (row.payment_ref === null || step.provider.refundedCents === undefined) return reported;
  return step.provider.refundedCents(row.payment_ref);
}

/** Applies what was parked for the payment this top-up now has, in the order it arrived. */
async function drainParked(step: Step, topUpId: string, paymentRef: string): Promise<void> {
  const { tx, provider } = step;
  const parked = await tx.query<{ event_id: string; fact: PaymentFact | string }>(
    'SELECT event_id, fact FROM parked_payment_events WHERE provider = $1 AND payment_ref = $2 ORDER BY received_at, event_id FOR UPDATE',
    [provider.name, paymentRef],
  );
  for (const p of parked.rows) {
    const fact = (typeof p.fact === 'string' ? JSON.parse(p.fact) : p.fact) as PaymentFact;
    const row = (await tx.query<TopUpRow>(`SELECT ${COLUMNS} FROM top_ups WHERE id = $1 FOR UPDATE`, [topUpId])).rows[0];
    if (row === undefined) return;
    await transition(step, row, fact);
    await tx.query('UPDATE payment_provider_events SET top_up_id = $3 WHERE provider = $1 AND event_id = $2', [provider.name, p.event_id, topUpId]);
    await tx.query('DELETE FROM parked_payment_events WHERE provider = $1 AND event_id = $2', [provider.name, p.event_id]);
  }
}

const OPEN: ReadonlySet<TopUpState> = new Set(['quoted', 'pending', 'cancelled', 'failed', 'expired']);
const PAID: ReadonlySet<TopUpState> = new Set(['credited', 'refunded', 'disputed']);
const UNPAID: ReadonlySet<TopUpState> = new Set(['quoted', 'pending']);

const setState = (tx: Queryable, id: string, state: TopUpState): Promise<unknown> => tx.query('UPDATE top_ups SET state = $2, updated_at = now() WHERE id = $1', [id, state]);

/** One fact applied to one locked top-up row; the movements it makes are added to `step.applied`. */
async function transition(step: Step, row: TopUpRow, fact: PaymentFact): Promise<void> {
  switch (fact.kind) {
    case 'paid':
      return applyPaid(step, row, fact);
    case 'processing':
      return applyProcessing(step.tx, row, fact);
    case 'failed':
    case 'expired':
    case 'underpaid':
      return applyUnpaid(step, row, fact);
    case 'invalidated':
      return applyInvalidated(step, row, fact);
    case 'refunded':
      return applyRefunded(step, row, fact);
    case 'dispute_opened':
    case 'dispute_closed':
      return applyDispute(step, row, fact);
  }
}

/** Paid: the stored quote is credited, only for exactly the quoted payment; then what waited for the payment. */
async function applyPaid(step: Step, row: TopUpRow, fact: Extract<PaymentFact, { kind: 'paid' }>): Promise<void> {
  const { tx } = step;
  const id = row.id;
  if (!OPEN.has(row.state)) {
    // Credited before its payment id was known: record it now, and apply what waited for it.
    if (PAID.has(row.state) && row.payment_ref === null && fact.paymentRef !== undefined) {
      await tx.query('UPDATE top_ups SET payment_ref = $2, updated_at = now() WHERE id = $1', [id, fact.paymentRef]);
      await drainParked(step, id, fact.paymentRef);
    }
    return;
  }
  const problems: string[] = [];
  if (fact.paidCents !== Number(row.total_cents)) problems.push(`paid ${formatCents(fact.paidCents)}, quoted ${formatCents(Number(row.total_cents))}`);
  if (fact.currency !== row.currency) problems.push(`currency ${fact.currency || 'missing'}, quoted ${row.currency}`);
  if (fact.mode !== undefined && fact.mode !== 'payment') problems.push(`checkout mode ${fact.mode}`);
  if (problems.length > 0) {
    await event(tx, id, 'payment_mismatch', fact.paidCents, `${problems.join('; ')}: not credited, support will look at it`);
    return;
  }
  const creditCents = Number(row.credit_cents);
  await credit(step, { accountId: row.account_id, kind: 'top_up', amount: centsToMicros(creditCents), idempotencyKey: `top_up:${id}`, reference: id, memo: `top-up ${id}` });
  await tx.query(`UPDATE top_ups SET state = 'credited', credited_at = now(), payment_ref = COALESCE($2, payment_ref), updated_at = now() WHERE id = $1`, [id, fact.paymentRef ?? null]);
  await event(tx, id, 'paid', fact.paidCents, null);
  await event(tx, id, 'credited', creditCents, null);
  if (fact.overpaidCents !== undefined) await event(tx, id, 'overpaid', fact.overpaidCents, 'paid more than the invoice: the excess is not credited; support returns it');
  const paymentRef = fact.paymentRef ?? row.payment_ref;
  if (paymentRef !== null) await drainParked(step, id, paymentRef);
}

/** Started, not final: noted once; part of a crypto invoice noted once per amount. */
async function applyProcessing(tx: Queryable, row: TopUpRow, fact: Extract<PaymentFact, { kind: 'processing' }>): Promise<void> {
  const id = row.id;
  if (!UNPAID.has(row.state)) return;
  if (fact.paidCents === undefined) {
    if (!(await hasEvent(tx, id, 'processing'))) await event(tx, id, 'processing', null, null);
    return;
  }
  // Part of a crypto invoice arrived: said once per amount, so the holder knows to send the rest.
  if ((await tx.query('SELECT 1 FROM top_up_events WHERE top_up_id = $1 AND kind = $2 AND amount_cents = $3', [id, 'partly_paid', fact.paidCents])).rows.length === 0) {
    await event(tx, id, 'partly_paid', fact.paidCents, `${formatCents(fact.paidCents)} of ${formatCents(Number(row.total_cents))} USD has arrived; send the rest before the invoice expires`);
  }
}

/**
 * Failed, expired or under-paid before any credit: only the state changes, nothing is credited. An
 * automatic top-up's payment failing (after its charge was accepted, or before its answer came) turns
 * automatic top-ups off and tells the holder, so the next pass does not charge the card again.
 */
async function applyUnpaid(step: Step, row: TopUpRow, fact: Extract<PaymentFact, { kind: 'failed' | 'expired' | 'underpaid' }>): Promise<void> {
  const { tx } = step;
  if (!UNPAID.has(row.state)) return;
  if (fact.kind === 'underpaid') {
    await setState(tx, row.id, 'failed');
    await event(tx, row.id, 'underpaid', fact.paidCents, `less than the ${formatCents(Number(row.total_cents))} USD invoiced arrived: nothing credited; support returns it`);
    return;
  }
  await setState(tx, row.id, fact.kind);
  await event(tx, row.id, fact.kind, null, fact.kind === 'failed' ? fact.reason : null);
  if (fact.kind === 'failed' && row.origin === 'auto') await turnOffAfterUnpaid(tx, row.account_id, fact.reason, step.notifyHolders);
}

/** Voided by the provider: before a credit it just fails; after one, what is left of the credit is taken back. */
async function applyInvalidated(step: Step, row: TopUpRow, fact: Extract<PaymentFact, { kind: 'invalidated' }>): Promise<void> {
  const { tx } = step;
  const id = row.id;
  if (UNPAID.has(row.state)) {
    await setState(tx, id, 'failed');
    const paid = fact.paidCents ?? 0;
    await event(tx, id, 'invalidated', paid > 0 ? paid : null, `${fact.reason}: nothing credited${paid > 0 ? '; support returns what arrived' : ''}`);
    return;
  }
  if (!PAID.has(row.state)) return;
  // Credited, then voided (a double spend): whatever of the credit refunds and holds left is taken back.
  const { reversed, held } = await withdrawn(tx, id);
  const take = Number(row.credit_cents) - reversed - held;
  if (take > 0) await debit(step, { accountId: row.account_id, kind: 'reversal', amount: centsToMicros(take), idempotencyKey: `invalidated:${id}`, reference: id, memo: `top-up ${id} voided by the provider` });
  await event(tx, id, 'reversed', take, `${fact.reason}: the payment no longer counts, ${formatCents(take)} USD of credit taken back`);
  await setState(tx, id, 'reversed');
}

/** The refunded total changed: settled now, or, while a dispute holds the credit, when it closes. */
async function applyRefunded(step: Step, row: TopUpRow, fact: Extract<PaymentFact, { kind: 'refunded' }>): Promise<void> {
  if (!PAID.has(row.state)) return;
  const refunded = await refundedNow(step, row, fact.refundedCents);
  if (row.state !== 'disputed') return settleRefunds(step, row, refunded);
  // A dispute holds what refunds left: a change of refunds waits for its outcome (won: settled then at
  // the latest total; lost: the credit stays taken), so the order of events cannot matter.
  await step.tx.query('UPDATE top_ups SET refunded_cents = $2, updated_at = now() WHERE id = $1', [row.id, refunded]);
  const { reversed } = await withdrawn(step.tx, row.id);
  if (Math.min(refunded, Number(row.credit_cents)) !== reversed) await event(step.tx, row.id, 'refund_deferred', refunded, 'a dispute holds the credit: this refund is settled when the dispute closes (if it is won)');
}

/** A dispute's first event (opened, or closed arriving first) holds what is left of the credit; its outcome is final. */
async function applyDispute(step: Step, row: TopUpRow, fact: Extract<PaymentFact, { kind: 'dispute_opened' | 'dispute_closed' }>): Promise<void> {
  const { tx } = step;
  const id = row.id;
  if (!PAID.has(row.state)) return;
  const dispute = fact.disputeId;
  let held = (await disputeEvent(tx, id, 'disputed', dispute))?.cents;
  if (held === undefined) {
    const before = await withdrawn(tx, id);
    held = Math.max(0, Number(row.credit_cents) - before.reversed - before.held);
    if (held > 0) await debit(step, { accountId: row.account_id, kind: 'dispute_hold', amount: centsToMicros(held), idempotencyKey: `dispute_hold:${dispute}`, reference: id, memo: `dispute ${dispute}` });
    await event(tx, id, 'disputed', held, `dispute ${dispute}: ${formatCents(held)} USD of the credit is held until it closes`);
    await setState(tx, id, 'disputed');
  }
  if (fact.kind === 'dispute_opened') return;
  if ((await disputeEvent(tx, id, 'dispute_won', dispute)) !== undefined || (await disputeEvent(tx, id, 'dispute_lost', dispute)) !== undefined) return;
  if (!fact.won) {
    await event(tx, id, 'dispute_lost', held, `dispute ${dispute}: the held credit stays taken`);
    return;
  }
  await releaseDispute(step, row, fact, held);
}

/** A dispute won (or an inquiry closed): the hold is released, and a refund that waited for it is taken now. */
async function releaseDispute(step: Step, row: TopUpRow, fact: Extract<PaymentFact, { kind: 'dispute_closed' }>, held: Cents): Promise<void> {
  const { tx } = step;
  const id = row.id;
  const dispute = fact.disputeId;
  if (held > 0) await credit(step, { accountId: row.account_id, kind: 'dispute_release', amount: centsToMicros(held), idempotencyKey: `dispute_release:${dispute}`, reference: id, memo: `dispute ${dispute} ${fact.inquiry === true ? 'was an inquiry' : 'won'}` });
  await event(tx, id, 'dispute_won', held, `dispute ${dispute}: ${fact.inquiry === true ? 'an inquiry, closed without a chargeback' : 'won'}; the held credit is back on the balance`);
  const after = await withdrawn(tx, id);
  await setState(tx, id, after.reversed > 0 ? 'refunded' : 'credited');
  // A refund reported while the dispute held the credit is taken now (at the provider's latest total).
  const latest = (await tx.query<{ refunded_cents: number | null }>('SELECT refunded_cents FROM top_ups WHERE id = $1', [id])).rows[0]?.refunded_cents;
  if (latest !== null && latest !== undefined) {
    const fresh = (await tx.query<TopUpRow>(`SELECT ${COLUMNS} FROM top_ups WHERE id = $1`, [id])).rows[0];
    if (fresh !== undefined) await settleRefunds(step, fresh, Number(latest));
  }
}
