// Automatic top-ups by a saved card (issue 32, item 5; issue 37, item 3): a holder saves a card through
// Stripe Checkout in setup mode and sets a threshold, an amount and a monthly maximum of what the card is
// charged; when spending leaves the balance of record below the threshold, one off-session
// PaymentIntent is made (at most one per crossing however many passes run, the top-up's id as its
// idempotency key, the usual fee) and credited by its webhook like any top-up. The holder decides:
// turning it off, cancelling or saving another card stops what is not charged yet; a charge that got no
// answer is sent again with the same key and the same card, or abandoned. A decline, a bank that wants
// the holder present, or a payment that fails later turns it off and mails the holder. Real gateway and
// official openai client for the spending, Redis hot path, journal to a real PostgreSQL, the real
// `stripe` client against the fake Stripe (saved cards, off-session payments, declines, calls that get
// no answer), webhooks signed as Stripe signs them into the dashboard, and passes in processes of their
// own like two gateways.
import OpenAI from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { recordMovement } from '../../src/record/money-movement.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { AutoTopUps, type AutoTopUpOptions } from '../../src/top-ups/auto-top-up.js';
import { startFakeStripe, type FakeStripe } from '../../src/top-ups/fakes/fake-stripe.js';
import type { PaymentProvider, SavedCards } from '../../src/top-ups/provider.js';
import { TopUpService } from '../../src/top-ups/service.js';
import { topUpWebhooks } from '../../src/top-ups/webhooks.js';
import { stripeProvider } from '../../src/top-ups/providers/stripe.js';
import { until } from '../e2e/e2e-support.js';
import { startPassProcess, type PassProcess } from '../helpers/auto-top-up-pass.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { freePort } from '../helpers/redis-server.js';
import { useTestDatabase } from '../helpers/test-database.js';

const testDb = useTestDatabase('auto_top_ups');
const SECRET = 'whsec_test_auto';
const MICROS = 10_000;
const UNPAID = 'Your automatic Tollgate top-up was not paid';
let h: Harness;
let stripe: FakeStripe;
let provider: PaymentProvider & { savedCards: SavedCards };
let auto: AutoTopUps;
let topUps: TopUpService;
let dashboard: { close(): Promise<void> };
let dashService: DashboardService;
let dashUrl = '';
/** Two more passes, each in a process of its own (two gateways with a dashboard port). */
let gatewayA: PassProcess;
let gatewayB: PassProcess;

const notifyHolders: NonNullable<AutoTopUpOptions['notifyHolders']> = async (tx, accountId, subject, text) => {
  const users = await tx.query<{ email: string }>('SELECT email FROM dashboard_users WHERE account_id = $1', [accountId]);
  for (const u of users.rows) await tx.query('INSERT INTO email_outbox (recipient, subject, body) VALUES ($1, $2, $3)', [u.email, subject, text]);
};

beforeAll(async () => {
  // A dear model, so a few requests spend dollars: about 0.01 USD a token.
  h = await startHarness({ ledger: 'redis', record: testDb.db, balanceMicros: 6_000_000, models: (models) => models.map((m) => ({ ...m, pricing: { input: '9999', output: '9999' } })) });
  stripe = await startFakeStripe({ webhookSecret: SECRET });
  const port = await freePort();
  dashUrl = `http://127.0.0.1:${port}`;
  provider = stripeProvider({ secretKey: 'sk_test_auto', webhookSecret: SECRET, apiBase: stripe.url }) as PaymentProvider & { savedCards: SavedCards };
  const ledger = h.backend.ledger as RecordedLedger;
  const accounts = new AccountService({ accounts: h.backend.accounts, ledger, applyCommitted: (m, r) => ledger.applyCommitted(m, r) });
  topUps = new TopUpService({ db: testDb.db, providers: [provider], accounts, publicUrl: dashUrl, notifyHolders });
  auto = new AutoTopUps({ db: testDb.db, provider, publicUrl: () => dashUrl, notifyHolders });
  dashService = new DashboardService({ db: testDb.db, accounts, signUp: true, sessionTtlMs: 3_600_000 });
  dashboard = await startDashboard({ service: dashService, secureCookie: false, topUps, webhooks: topUpWebhooks(topUps), autoTopUps: auto }, port, '127.0.0.1');
  stripe.setWebhookUrl(`${dashUrl}/webhooks/stripe`);
  const gateway = (): Promise<PassProcess> => startPassProcess({ databaseUrl: testDb.url, stripeUrl: stripe.url, webhookSecret: SECRET });
  [gatewayA, gatewayB] = await Promise.all([gateway(), gateway()]);
}, 60_000);
afterAll(async () => {
  await gatewayA?.close();
  await gatewayB?.close();
  await dashboard.close();
  await stripe.close();
  await h.close();
});

async function balances(accountId: string): Promise<{ record: number; hot: number }> {
  const r = await testDb.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [accountId]);
  return { record: Number(r.rows[0]?.balance ?? 0), hot: (await h.backend.ledger.balance(accountId)).balance };
}

/** Saves a card of the given behaviour for the account, as a holder would on the fake's hosted page. */
async function saveCard(accountId: string, behaviour: 'ok' | 'decline' | 'authenticate' | 'later'): Promise<string> {
  const checkoutUrl = await auto.startCardSetup(accountId);
  const pm = await stripe.saveCard(checkoutUrl.split('/').pop() ?? '', behaviour);
  const setup = await testDb.db.query<{ id: string }>('SELECT id FROM card_setups WHERE account_id = $1 ORDER BY created_at DESC LIMIT 1', [accountId]);
  expect(await auto.completeCardSetup(accountId, setup.rows[0]?.id ?? '')).toBe(true);
  return pm;
}

/** Spends through the gateway until the balance of record is below `belowMicros`. */
async function spendBelow(key: string, accountId: string, belowMicros: number): Promise<void> {
  const client = new OpenAI({ apiKey: key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
  for (let i = 0; i < 30 && (await balances(accountId)).record >= belowMicros; i++) {
    await client.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
    await h.settled();
    await h.journal?.flush();
  }
  expect((await balances(accountId)).record).toBeLessThan(belowMicros);
}

let movements = 0;
/** Takes the balance of record (and the hot path's) to `micros`, as usage postings would. */
async function setBalance(accountId: string, micros: number): Promise<void> {
  const now = (await balances(accountId)).record;
  if (now === micros) return;
  const m = { accountId, kind: 'adjustment' as const, amount: micros - now, idempotencyKey: `auto-test-${accountId}-${++movements}`, memo: 'spending' };
  const recorded = await testDb.db.transaction((tx) => recordMovement(tx, m));
  await (h.backend.ledger as RecordedLedger).applyCommitted(m, recorded);
}

/** A holder with an account at `balanceMicros`, a saved card and automatic top-ups on: threshold 5.00, amount 10.00. */
async function holder(name: string, behaviour: 'ok' | 'decline' | 'authenticate' | 'later' = 'ok', monthlyMaxCents = 100_000): Promise<{ accountId: string; email: string; pm: string }> {
  const account = await h.backend.accounts.createAccount(name);
  await setBalance(account.id, 6_000_000);
  const email = `${name}@example.com`;
  await dashService.provisioning.upsertUser(email, 'a long password', account.id);
  const pm = await saveCard(account.id, behaviour);
  await auto.configure(account.id, { enabled: true, thresholdCents: 500, amountCents: 1000, monthlyMaxCents });
  return { accountId: account.id, email, pm };
}

async function autoTopUpsOf(accountId: string) {
  return (await testDb.db.query<{ id: string; state: string; credit_cents: number; total_cents: number }>(`SELECT id, state, credit_cents, total_cents FROM top_ups WHERE account_id = $1 AND origin = 'auto' ORDER BY created_at`, [accountId])).rows;
}

/** The PaymentIntents the fake Stripe made for the account, in order. */
function intentsOf(accountId: string): Array<{ id: string; topUpId: string; paymentMethod: string }> {
  return [...stripe.paymentIntents.values()]
    .filter((pi) => (pi.metadata as Record<string, string>).account_id === accountId)
    .map((pi) => ({ id: String(pi.id), topUpId: (pi.metadata as Record<string, string>).top_up_id ?? '', paymentMethod: String(pi.payment_method) }));
}

async function eventsOf(topUpId: string): Promise<string[]> {
  return (await testDb.db.query<{ kind: string }>('SELECT kind FROM top_up_events WHERE top_up_id = $1 ORDER BY id', [topUpId])).rows.map((r) => r.kind);
}

async function mailsTo(email: string): Promise<string[]> {
  return (await testDb.db.query<{ subject: string }>('SELECT subject FROM email_outbox WHERE recipient = $1 ORDER BY id', [email])).rows.map((m) => m.subject);
}

/** As if the provider's last answer was `minutes` ago: the top-up's quote and its last attempt are moved back. */
async function ageTopUp(topUpId: string, minutes: number): Promise<void> {
  await testDb.db.query(`UPDATE top_ups SET created_at = created_at - make_interval(mins => $2) WHERE id = $1`, [topUpId, minutes]);
  await testDb.db.query(`UPDATE auto_top_up_charges SET last_attempt_at = last_attempt_at - make_interval(mins => $2) WHERE top_up_id = $1`, [topUpId, minutes]);
}

/** The holder signed in to the dashboard (a browser's cookie and CSRF token). */
async function signIn(email: string): Promise<DashboardClient> {
  const c = new DashboardClient(() => dashUrl);
  const r = await c.req('POST', '/api/sign-in', { email, password: 'a long password' });
  expect(r.status).toBe(200);
  c.csrf = (r.json() as { csrf_token: string }).csrf_token;
  return c;
}

describe('automatic top-ups', () => {
  it('a saved card is charged once when spending leaves the balance below the threshold; the credit is the amount, the fee on top', async () => {
    await saveCard(h.accountId, 'ok');
    expect((await auto.settings(h.accountId)).card).toBe('visa ending 4242');
    await auto.configure(h.accountId, { enabled: true, thresholdCents: 500, amountCents: 1000, monthlyMaxCents: 2500 });
    // Above the threshold: nothing.
    expect(await auto.check()).toBe(0);
    await spendBelow(h.key, h.accountId, 5_000_000);
    const before = await balances(h.accountId);
    // Two passes at once (two dashboard replicas): one payment.
    const [a, b] = await Promise.all([auto.check(), auto.check()]);
    expect(a + b).toBe(1);
    const made = await autoTopUpsOf(h.accountId);
    expect(made).toHaveLength(1);
    expect(made[0]).toMatchObject({ credit_cents: 1000, total_cents: 1065 });
    await until('credited by the webhook', async () => ((await balances(h.accountId)).hot === before.record + 1000 * MICROS ? true : undefined), 5_000);
    expect(await balances(h.accountId)).toEqual({ record: before.record + 1000 * MICROS, hot: before.record + 1000 * MICROS });
    expect((await autoTopUpsOf(h.accountId))[0]?.state).toBe('credited');
    // The payment Stripe made carries the top-up's id as its idempotency key: one PaymentIntent.
    expect([...stripe.paymentIntents.values()].filter((pi) => (pi.metadata as Record<string, string>).top_up_id === made[0]?.id)).toHaveLength(1);
    // Above the threshold again: nothing more.
    expect(await auto.check()).toBe(0);
  });

  it('the monthly maximum is never passed', async () => {
    await auto.configure(h.accountId, { enabled: true, thresholdCents: 1_000_000, amountCents: 1000, monthlyMaxCents: 2500 });
    // The threshold is now above any balance: each pass may charge, until the month's 25.00 allows no more.
    for (let i = 0; i < 4; i++) {
      await auto.check();
      await until('the top-up in flight is credited', async () => ((await autoTopUpsOf(h.accountId)).every((t) => t.state !== 'quoted' && t.state !== 'pending') ? true : undefined), 5_000);
    }
    const credited = (await autoTopUpsOf(h.accountId)).filter((t) => t.state === 'credited');
    expect(credited.reduce((n, t) => n + Number(t.credit_cents), 0)).toBe(2000);
    // What the card was charged: two top-ups of 10.00 at 10.65 each.
    expect((await auto.settings(h.accountId)).chargedThisMonthCents).toBe(2130);
  });

  it('the monthly maximum counts what the card is charged (credit + fee), and the form says so', async () => {
    const { accountId, email } = await holder('monthly-charged');
    // 20.00 of credit charges 21.00: a maximum of 20.00 would be passed by the first top-up.
    await expect(auto.configure(accountId, { enabled: true, thresholdCents: 500, amountCents: 2000, monthlyMaxCents: 2000 })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/charges 21\.00 USD/) });
    // 21.00 allows one charge of 10.65 but not two (21.30), though two credits (20.00) would fit.
    await auto.configure(accountId, { enabled: true, thresholdCents: 1_000_000, amountCents: 1000, monthlyMaxCents: 2100 });
    for (let i = 0; i < 3; i++) await auto.check();
    expect((await autoTopUpsOf(accountId)).map((t) => t.state)).toEqual(['credited']);
    expect(intentsOf(accountId)).toHaveLength(1);
    expect((await auto.settings(accountId)).chargedThisMonthCents).toBe(1065);
    const page = await (await signIn(email)).req('GET', '/balance');
    expect(page.text).toContain('At most charged per month, USD (amount + fee)');
    expect(page.text).toContain('This month: $10.65 charged of $21.00');
  });

  it('a declined card turns automatic top-ups off and mails the holder; a bank asking for authentication too', async () => {
    for (const behaviour of ['decline', 'authenticate'] as const) {
      const account = await h.backend.accounts.createAccount(`holder-${behaviour}`);
      await h.backend.ledger.credit(account.id, 6_000_000, `start-${account.id}`);
      const key = await h.backend.accounts.createKey(account.id, { name: 'k' });
      await dashService.provisioning.upsertUser(`${behaviour}@example.com`, 'a long password', account.id);
      await saveCard(account.id, behaviour);
      await auto.configure(account.id, { enabled: true, thresholdCents: 500, amountCents: 1000, monthlyMaxCents: 5000 });
      await spendBelow(key.secret, account.id, 5_000_000);
      const before = await balances(account.id);
      expect(await auto.check()).toBe(0);
      const s = await auto.settings(account.id);
      expect(s.enabled).toBe(false);
      expect(s.disabledReason).toMatch(behaviour === 'decline' ? /declined/ : /bank asked to confirm/);
      expect((await autoTopUpsOf(account.id)).map((t) => t.state)).toEqual(['failed']);
      expect(await balances(account.id)).toEqual(before);
      // Once, though both the charge's answer and its failure event said it.
      expect(await mailsTo(`${behaviour}@example.com`)).toEqual([UNPAID]);
      // Off: later passes charge nothing.
      expect(await auto.check()).toBe(0);
      expect(await autoTopUpsOf(account.id)).toHaveLength(1);
    }
  });

  it('refuses settings a holder cannot mean, and turning it on without a card', async () => {
    const fresh = await h.backend.accounts.createAccount('no-card');
    await expect(auto.configure(fresh.id, { enabled: true, thresholdCents: 500, amountCents: 1000, monthlyMaxCents: 2000 })).rejects.toMatchObject({ status: 409 });
    await expect(auto.configure(fresh.id, { enabled: false, thresholdCents: 500, amountCents: 400, monthlyMaxCents: 2000 })).rejects.toMatchObject({ status: 400 });
    await expect(auto.configure(fresh.id, { enabled: false, thresholdCents: 500, amountCents: 1000, monthlyMaxCents: 900 })).rejects.toMatchObject({ status: 400 });
    // One top-up charges 10.65: a maximum of exactly that is accepted, a cent less is not.
    await expect(auto.configure(fresh.id, { enabled: false, thresholdCents: 500, amountCents: 1000, monthlyMaxCents: 1064 })).rejects.toMatchObject({ status: 400 });
    await expect(auto.configure(fresh.id, { enabled: false, thresholdCents: 500, amountCents: 1000, monthlyMaxCents: 1065 })).resolves.toMatchObject({ monthlyMaxCents: 1065 });
  });
});

describe('one charge per crossing, however many passes run', () => {
  it('passes in two processes and this one, at once, each crossing: one payment per crossing, its webhook landing while the others run', async () => {
    const { accountId } = await holder('three-passes');
    for (let crossing = 1; crossing <= 12; crossing++) {
      await setBalance(accountId, 4_000_000);
      const charged = await Promise.all([gatewayA.pass(), gatewayB.pass(), auto.check()]);
      expect(charged.reduce((a, b) => a + b, 0), `crossing ${crossing}: ${charged.join(', ')}`).toBe(1);
      const made = await autoTopUpsOf(accountId);
      expect(made).toHaveLength(crossing);
      expect(intentsOf(accountId)).toHaveLength(crossing);
      await until('credited by its webhook', async () => ((await autoTopUpsOf(accountId)).every((t) => t.state === 'credited') ? true : undefined), 5_000);
      expect((await balances(accountId)).record).toBe(14_000_000);
    }
  }, 60_000);

  it('a webhook that credits the top-up in flight while another gateway waits for the account does not make a second charge', async () => {
    const { accountId } = await holder('webhook-between');
    await setBalance(accountId, 4_000_000);
    stripe.holdDeliveries(true);
    // This pass charges the card; Stripe's webhook is held back.
    expect(await auto.check()).toBe(1);
    const [first] = await autoTopUpsOf(accountId);
    expect(first?.state).toBe('pending');
    // Another client holds the account's row: the second gateway's pass, which found the account below
    // its threshold, waits for it, its first statement already begun.
    const locker = new pg.Client({ connectionString: testDb.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM auto_top_ups WHERE account_id = $1 FOR UPDATE', [accountId]);
      const second = gatewayB.pass();
      // (Asked outside the locker's transaction, which would see one snapshot of pg_stat_activity.)
      await until('the second pass waits for the account', async () => {
        const r = await testDb.db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM auto_top_ups%FOR UPDATE%'",
        );
        return (r.rows[0]?.n ?? 0) > 0 ? true : undefined;
      }, 10_000);
      // Meanwhile the webhook lands: the top-up is credited and the balance is above the threshold.
      stripe.holdDeliveries(false);
      await stripe.releaseHeld();
      expect((await autoTopUpsOf(accountId)).map((t) => t.state)).toEqual(['credited']);
      expect((await balances(accountId)).record).toBe(14_000_000);
      await locker.query('ROLLBACK');
      expect(await second).toBe(0);
    } finally {
      await locker.end();
      stripe.holdDeliveries(false);
    }
    expect(await autoTopUpsOf(accountId)).toHaveLength(1);
    expect(intentsOf(accountId)).toHaveLength(1);
  });
});

describe('the holder decides what is charged', () => {
  it('turned off: a top-up whose charge got no answer is never sent again, and the holder sees it abandoned', async () => {
    const { accountId } = await holder('off-after-no-answer');
    await setBalance(accountId, 4_000_000);
    stripe.failPaymentIntents(1, 'unanswered');
    expect(await auto.check()).toBe(0);
    const [stuck] = await autoTopUpsOf(accountId);
    expect(stuck?.state).toBe('quoted');
    expect(intentsOf(accountId)).toHaveLength(0);
    await auto.configure(accountId, { enabled: false, thresholdCents: 500, amountCents: 1000, monthlyMaxCents: 100_000 });
    await ageTopUp(stuck?.id ?? '', 10);
    expect(await auto.check()).toBe(0);
    expect(intentsOf(accountId)).toHaveLength(0);
    expect((await autoTopUpsOf(accountId)).map((t) => t.state)).toEqual(['cancelled']);
    expect(await eventsOf(stuck?.id ?? '')).toContain('abandoned');
    expect((await topUps.get(accountId, stuck?.id ?? '')).timeline?.find((e) => e.kind === 'abandoned')?.detail).toMatch(/turned off before it was charged/);
  });

  it('a charge that got no answer is sent again with the same key and the same card: one payment, whether or not Stripe had made it', async () => {
    for (const mode of ['unanswered', 'answer_lost'] as const) {
      const { accountId, pm } = await holder(`retry-${mode.replace('_', '-')}`);
      await setBalance(accountId, 4_000_000);
      stripe.holdDeliveries(true);
      stripe.failPaymentIntents(1, mode);
      expect(await auto.check()).toBe(0);
      const [stuck] = await autoTopUpsOf(accountId);
      expect(stuck?.state).toBe('quoted');
      expect(intentsOf(accountId)).toHaveLength(mode === 'answer_lost' ? 1 : 0);
      // Not before its time.
      expect(await auto.check()).toBe(0);
      await ageTopUp(stuck?.id ?? '', 10);
      expect(await auto.check()).toBe(1);
      stripe.holdDeliveries(false);
      await stripe.releaseHeld();
      await until('credited', async () => ((await autoTopUpsOf(accountId))[0]?.state === 'credited' ? true : undefined), 5_000);
      expect(intentsOf(accountId)).toEqual([{ id: expect.any(String), topUpId: stuck?.id, paymentMethod: pm }]);
      expect(await autoTopUpsOf(accountId)).toHaveLength(1);
      expect((await balances(accountId)).record).toBe(14_000_000);
    }
  });

  it('after "use another card", a charge that got no answer is sent again on the card it was made for, never on the new one; the next crossing charges the new card', async () => {
    const { accountId, pm: oldCard } = await holder('another-card');
    await setBalance(accountId, 4_000_000);
    // Stripe made the payment but its answer was lost (and its webhook is late).
    stripe.holdDeliveries(true);
    stripe.failPaymentIntents(1, 'answer_lost');
    expect(await auto.check()).toBe(0);
    const [stuck] = await autoTopUpsOf(accountId);
    expect(stuck?.state).toBe('quoted');
    const newCard = await saveCard(accountId, 'ok');
    expect(newCard).not.toBe(oldCard);
    await ageTopUp(stuck?.id ?? '', 10);
    // The same key with the same card: Stripe answers with the payment it made; nothing new is charged.
    expect(await auto.check()).toBe(1);
    stripe.holdDeliveries(false);
    await stripe.releaseHeld();
    await until('credited', async () => ((await autoTopUpsOf(accountId))[0]?.state === 'credited' ? true : undefined), 5_000);
    expect(intentsOf(accountId).map((i) => i.paymentMethod)).toEqual([oldCard]);
    // The next crossing is charged on the card saved since.
    await setBalance(accountId, 4_000_000);
    expect(await auto.check()).toBe(1);
    expect(intentsOf(accountId).map((i) => i.paymentMethod)).toEqual([oldCard, newCard]);
    expect((await autoTopUpsOf(accountId)).map((t) => t.state)).toEqual(['credited', 'credited']);
  });

  it('the holder cancels an automatic top-up that is not charged yet, by a POST from its page; one that was charged cannot be', async () => {
    const { accountId, email } = await holder('holder-cancels');
    await setBalance(accountId, 4_000_000);
    stripe.failPaymentIntents(1, 'unanswered');
    expect(await auto.check()).toBe(0);
    const [stuck] = await autoTopUpsOf(accountId);
    const browser = await signIn(email);
    const page = await browser.req('GET', `/top-ups/${stuck?.id ?? ''}`);
    expect(page.text).toContain('Not charged yet');
    expect(page.text).toContain('Cancel this automatic top-up');
    // There is no checkout to re-check: its payment is followed by its events.
    expect(page.text).not.toContain('Re-check payment');
    expect((await browser.api('POST', `/api/top-ups/${stuck?.id ?? ''}/recheck`)).status).toBe(409);
    const done = await browser.req('POST', `/top-ups/${stuck?.id ?? ''}/cancel`, { csrf: browser.csrf }, { form: true });
    expect(done.status).toBe(303);
    expect((await autoTopUpsOf(accountId)).map((t) => t.state)).toEqual(['cancelled']);
    await ageTopUp(stuck?.id ?? '', 10);
    // Cancelled: its slot is free, so the next pass makes a new top-up for the crossing and charges it.
    expect(await auto.check()).toBe(1);
    expect(intentsOf(accountId).map((i) => i.topUpId)).not.toContain(stuck?.id);
    const charged = (await autoTopUpsOf(accountId))[1];
    await until('credited', async () => ((await autoTopUpsOf(accountId))[1]?.state === 'credited' ? true : undefined), 5_000);
    const refused = await browser.api('POST', `/api/top-ups/${charged?.id ?? ''}/cancel`);
    expect(refused.status).toBe(409);
    expect((await autoTopUpsOf(accountId))[1]?.state).toBe('credited');
  });

  it('the checkout cancel return changes nothing by GET: an automatic top-up charged stays charged (and counted); an open checkout is cancelled by a POST only', async () => {
    const { accountId, email } = await holder('cancel-return', 'ok', 5000);
    await setBalance(accountId, 4_000_000);
    stripe.holdDeliveries(true);
    expect(await auto.check()).toBe(1);
    const [charged] = await autoTopUpsOf(accountId);
    expect(charged?.state).toBe('pending');
    const browser = await signIn(email);
    // The provider's "cancel" link is a GET: it cancels nothing, not even with the top-up's id.
    const back = await browser.req('GET', `/balance?top_up=${charged?.id ?? ''}&cancelled=1`);
    expect(back.status).toBe(200);
    expect(back.text).not.toContain('Cancel this top-up');
    expect((await autoTopUpsOf(accountId))[0]?.state).toBe('pending');
    expect((await browser.req('POST', `/top-ups/${charged?.id ?? ''}/cancel`, { csrf: browser.csrf }, { form: true })).status).toBe(409);
    expect((await autoTopUpsOf(accountId))[0]?.state).toBe('pending');
    expect((await auto.settings(accountId)).chargedThisMonthCents).toBe(1065);
    // Still in flight: a second pass makes no second charge.
    expect(await auto.check()).toBe(0);
    stripe.holdDeliveries(false);
    await stripe.releaseHeld();
    await until('credited', async () => ((await autoTopUpsOf(accountId))[0]?.state === 'credited' ? true : undefined), 5_000);

    // A card checkout the payer left: the return page offers a button that POSTs, with the session's CSRF token.
    const { topUp, checkoutUrl } = await topUps.start(accountId, 1000, 'stripe');
    const left = await browser.req('GET', `/balance?top_up=${topUp.id}&cancelled=1`);
    expect(left.text).toContain(`action="/top-ups/${topUp.id}/cancel"`);
    expect(left.text).toContain(checkoutUrl);
    expect((await topUps.get(accountId, topUp.id)).state).toBe('pending');
    expect((await browser.req('POST', `/top-ups/${topUp.id}/cancel`, { csrf: 'not the token' }, { form: true })).status).toBe(403);
    expect((await browser.req('POST', `/top-ups/${topUp.id}/cancel`, { csrf: browser.csrf }, { form: true, headers: { 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect((await topUps.get(accountId, topUp.id)).state).toBe('pending');
    expect((await browser.req('POST', `/top-ups/${topUp.id}/cancel`, { csrf: browser.csrf }, { form: true })).status).toBe(303);
    expect((await topUps.get(accountId, topUp.id)).state).toBe('cancelled');
    expect(stripe.sessions.get(checkoutUrl.split('/').pop() ?? '')?.status).toBe('expired');
    // Finished: a second cancel is refused.
    expect((await browser.api('POST', `/api/top-ups/${topUp.id}/cancel`)).status).toBe(409);
  });

  it('a payment that fails after it was accepted turns automatic top-ups off and mails the holder; no new payment is made', async () => {
    const { accountId, email } = await holder('fails-later', 'later');
    await setBalance(accountId, 4_000_000);
    expect(await auto.check()).toBe(1);
    const [processing] = await autoTopUpsOf(accountId);
    expect(processing?.state).toBe('pending');
    const [intent] = intentsOf(accountId);
    await stripe.settlePaymentIntent(intent?.id ?? '', false);
    await until('failed by its event', async () => ((await autoTopUpsOf(accountId))[0]?.state === 'failed' ? true : undefined), 5_000);
    const s = await auto.settings(accountId);
    expect(s.enabled).toBe(false);
    expect(s.disabledReason).toMatch(/^Turned off: the card was declined \(The bank returned the payment/);
    expect(await mailsTo(email)).toEqual([UNPAID]);
    for (let i = 0; i < 3; i++) expect(await auto.check()).toBe(0);
    expect(intentsOf(accountId)).toHaveLength(1);
  });

  it('a provider that does not answer for the retry window: the top-up is abandoned, automatic top-ups turned off and the holder mailed', async () => {
    const { accountId, email } = await holder('never-answers');
    const patient = new AutoTopUps({ db: testDb.db, provider, publicUrl: () => dashUrl, notifyHolders, retryAfterMs: 60_000, retryForMs: 30 * 60_000 });
    await setBalance(accountId, 4_000_000);
    stripe.failPaymentIntents(1_000, 'unanswered');
    try {
      expect(await patient.check()).toBe(0);
      const [stuck] = await autoTopUpsOf(accountId);
      await ageTopUp(stuck?.id ?? '', 2);
      expect(await patient.check()).toBe(0);
      expect((await testDb.db.query<{ attempts: number }>('SELECT attempts FROM auto_top_up_charges WHERE top_up_id = $1', [stuck?.id ?? ''])).rows[0]?.attempts).toBe(2);
      expect((await autoTopUpsOf(accountId)).map((t) => t.state)).toEqual(['quoted']);
      await ageTopUp(stuck?.id ?? '', 40);
      expect(await patient.check()).toBe(0);
      expect((await autoTopUpsOf(accountId)).map((t) => t.state)).toEqual(['cancelled']);
      const s = await patient.settings(accountId);
      expect(s.enabled).toBe(false);
      expect(s.disabledReason).toMatch(/did not answer for 30 minutes/);
      expect(await mailsTo(email)).toEqual([UNPAID]);
    } finally {
      stripe.failPaymentIntents(0);
    }
    expect(await patient.check()).toBe(0);
    expect(intentsOf(accountId)).toHaveLength(0);
  });
});
