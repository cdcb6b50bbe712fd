// Automatic top-ups by a saved card (issue 32, item 5): a holder saves a card through Stripe Checkout in
// setup mode and sets a threshold, an amount and a monthly maximum; when spending leaves the balance of
// record below the threshold, one off-session PaymentIntent is made (at most one in flight, the top-up's
// id as its idempotency key, the usual fee) and credited by its webhook like any top-up. A decline, or a
// bank that wants the holder present, turns it off and mails the holder. Real gateway and official
// openai client for the spending, Redis hot path, journal to a real PostgreSQL, the real `stripe`
// client against the fake Stripe (saved cards, off-session payments, declines), webhooks signed as
// Stripe signs them into the dashboard.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/accounts/service.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { AutoTopUps } from '../../src/top-ups/auto-top-up.js';
import { startFakeStripe, type FakeStripe } from '../../src/top-ups/fakes/fake-stripe.js';
import type { PaymentProvider, SavedCards } from '../../src/top-ups/provider.js';
import { TopUpService } from '../../src/top-ups/service.js';
import { topUpWebhooks } from '../../src/top-ups/webhooks.js';
import { stripeProvider } from '../../src/top-ups/providers/stripe.js';
import { until } from '../e2e/e2e-support.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { freePort } from '../helpers/redis-server.js';
import { useTestDatabase } from '../helpers/test-database.js';

const testDb = useTestDatabase('auto_top_ups');
const SECRET = 'whsec_test_auto';
const MICROS = 10_000;
let h: Harness;
let stripe: FakeStripe;
let auto: AutoTopUps;
let dashboard: { close(): Promise<void> };
let dashService: DashboardService;

beforeAll(async () => {
  // A dear model, so a few requests spend dollars: about 0.01 USD a token.
  h = await startHarness({ ledger: 'redis', record: testDb.db, balanceMicros: 6_000_000, models: (models) => models.map((m) => ({ ...m, pricing: { input: '9999', output: '9999' } })) });
  stripe = await startFakeStripe({ webhookSecret: SECRET });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const provider = stripeProvider({ secretKey: 'sk_test_auto', webhookSecret: SECRET, apiBase: stripe.url });
  const ledger = h.backend.ledger as RecordedLedger;
  const topUps = new TopUpService({ db: testDb.db, providers: [provider], accounts: new AccountService({ accounts: h.backend.accounts, ledger, applyCommitted: (m, r) => ledger.applyCommitted(m, r) }), publicUrl: url });
  auto = new AutoTopUps({
    db: testDb.db,
    provider: provider as PaymentProvider & { savedCards: SavedCards },
    publicUrl: () => url,
    notifyHolders: async (tx, accountId, subject, text) => {
      const users = await tx.query<{ email: string }>('SELECT email FROM dashboard_users WHERE account_id = $1', [accountId]);
      for (const u of users.rows) await tx.query('INSERT INTO email_outbox (recipient, subject, body) VALUES ($1, $2, $3)', [u.email, subject, text]);
    },
  });
  dashService = new DashboardService({ db: testDb.db, accounts: h.backend.accounts, ledger: h.backend.ledger, signUp: true, sessionTtlMs: 3_600_000 });
  dashboard = await startDashboard({ service: dashService, secureCookie: false, topUps, webhooks: topUpWebhooks(topUps), autoTopUps: auto }, port, '127.0.0.1');
  stripe.setWebhookUrl(`${url}/webhooks/stripe`);
});
afterAll(async () => {
  await dashboard.close();
  await stripe.close();
  await h.close();
});

async function balances(accountId: string): Promise<{ record: number; hot: number }> {
  const r = await testDb.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [accountId]);
  return { record: Number(r.rows[0]?.balance ?? 0), hot: (await h.backend.ledger.balance(accountId)).balance };
}

/** Saves a card of the given behaviour for the account, as a holder would on the fake's hosted page. */
async function saveCard(accountId: string, behaviour: 'ok' | 'decline' | 'authenticate'): Promise<void> {
  const checkoutUrl = await auto.startCardSetup(accountId);
  await stripe.saveCard(checkoutUrl.split('/').pop() ?? '', behaviour);
  const setup = await testDb.db.query<{ id: string }>('SELECT id FROM card_setups WHERE account_id = $1 ORDER BY created_at DESC LIMIT 1', [accountId]);
  expect(await auto.completeCardSetup(accountId, setup.rows[0]?.id ?? '')).toBe(true);
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

async function autoTopUpsOf(accountId: string) {
  return (await testDb.db.query<{ id: string; state: string; credit_cents: number; total_cents: number }>(`SELECT id, state, credit_cents, total_cents FROM top_ups WHERE account_id = $1 AND origin = 'auto' ORDER BY created_at`, [accountId])).rows;
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
    expect((await auto.settings(h.accountId)).thisMonthCents).toBe(2000);
  });

  it('a declined card turns automatic top-ups off and mails the holder; a bank asking for authentication too', async () => {
    for (const behaviour of ['decline', 'authenticate'] as const) {
      const account = await h.backend.accounts.createAccount(`holder-${behaviour}`);
      await h.backend.ledger.credit(account.id, 6_000_000, `start-${account.id}`);
      const key = await h.backend.accounts.createKey(account.id, { name: 'k' });
      await dashService.upsertUser(`${behaviour}@example.com`, 'a long password', account.id);
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
      const mail = await testDb.db.query<{ subject: string }>('SELECT subject FROM email_outbox WHERE recipient = $1', [`${behaviour}@example.com`]);
      expect(mail.rows.map((m) => m.subject)).toContain('Your automatic Tollgate top-up was not paid');
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
  });
});
