// Top-ups end to end on loopback: the record (a test database), a Redis hot path, the fake Stripe and
// fake BTCPay with the real `stripe` client and our Greenfield client in front of them, and the
// dashboard (pages, API and the providers' webhooks) on a port of its own.
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { until } from '../e2e/e2e-support.js';
import type { Redis } from 'ioredis';
import { AccountService } from '../../src/account-service/account-service.js';
import { createRedisBackend, type Backend } from '../../src/billing/backends.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import type { Database } from '../../src/record/database.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { btcpayProvider } from '../../src/top-ups/providers/btcpay.js';
import { startFakeBtcpay, type FakeBtcpay } from '../../src/top-ups/fakes/fake-btcpay.js';
import { startFakeStripe, type FakeStripe } from '../../src/top-ups/fakes/fake-stripe.js';
import { TopUpService } from '../../src/top-ups/service.js';
import { topUpWebhooks } from '../../src/top-ups/webhooks.js';
import { AutoTopUps } from '../../src/top-ups/auto-top-up.js';
import type { PaymentProvider, SavedCards } from '../../src/top-ups/provider.js';
import { stripeProvider } from '../../src/top-ups/providers/stripe.js';
import { freePort } from './redis-server.js';

export interface PaymentsWorld {
  db: Database;
  backend: Backend;
  ledger: RecordedLedger;
  /** The world's one account service (top-ups, the dashboard and an admin API share it). */
  accounts: AccountService;
  stripe: FakeStripe;
  btcpay: FakeBtcpay;
  topUps: TopUpService;
  /** Automatic top-ups by a saved card (the Stripe provider's); `check()` is one pass. */
  autoTopUps: AutoTopUps;
  dashboard: DashboardService;
  url: string;
  /** Crashes the next webhook right after its COMMIT (before the hot path and the answer). */
  crashAfterNextCommit(): void;
  close(): Promise<void>;
}

export const STRIPE_WEBHOOK_SECRET = 'whsec_test_tollgate';
export const BTCPAY_WEBHOOK_SECRET = 'btcpay-test-secret';

export async function startPaymentsWorld(opts: { db: Database; redis: Redis; namespace: string }): Promise<PaymentsWorld> {
  const hot = createRedisBackend({ redis: opts.redis, namespace: `${opts.namespace}-${randomBytes(3).toString('hex')}` });
  const backend = recordedBackend(hot, opts.db, 'tg', { rebuildWindowMs: 0, movementSweepMs: 200, movementSweepGraceMs: 0 });
  const ledger = backend.ledger;
  const stripe = await startFakeStripe({ webhookSecret: STRIPE_WEBHOOK_SECRET });
  const btcpay = await startFakeBtcpay({ apiKey: 'btcpay-test-key', storeId: 'store-test', webhookSecret: BTCPAY_WEBHOOK_SECRET });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let crash = false;
  const card = stripeProvider({ secretKey: 'sk_test_tollgate', webhookSecret: STRIPE_WEBHOOK_SECRET, apiBase: stripe.url });
  // The world's one account service: top-ups and the dashboard both change accounts through it.
  const accounts = new AccountService({ accounts: backend.accounts, ledger, applyCommitted: (m, r) => ledger.applyCommitted(m, r) });
  const topUps = new TopUpService({
    db: opts.db,
    providers: [card, btcpayProvider({ url: btcpay.url, apiKey: 'btcpay-test-key', storeId: 'store-test', webhookSecret: BTCPAY_WEBHOOK_SECRET })],
    accounts,
    publicUrl: url,
    afterCommit: () => {
      if (!crash) return;
      crash = false;
      throw new Error('crashed right after COMMIT (injected)');
    },
  });
  const autoTopUps = new AutoTopUps({ db: opts.db, provider: card as PaymentProvider & { savedCards: SavedCards }, publicUrl: () => url });
  const dashboard = new DashboardService({ db: opts.db, accounts, signUp: true, sessionTtlMs: 3_600_000 });
  const server = await startDashboard({ service: dashboard, secureCookie: false, topUps, webhooks: topUpWebhooks(topUps), autoTopUps }, port, '127.0.0.1');
  stripe.setWebhookUrl(`${url}/webhooks/stripe`);
  btcpay.setWebhookUrl(`${url}/webhooks/btcpay`);
  return {
    db: opts.db,
    backend,
    ledger,
    accounts,
    stripe,
    btcpay,
    topUps,
    autoTopUps,
    dashboard,
    url,
    crashAfterNextCommit: () => {
      crash = true;
    },
    close: async () => {
      await server.close();
      await stripe.close();
      await btcpay.close();
      await ledger.close();
    },
  };
}

/** A fresh account to pay into. */
export async function payerAccount(w: PaymentsWorld): Promise<string> {
  return (await w.backend.accounts.createAccount('payer')).id;
}

/** The balance of record and the hot path's, which must agree once the hot path has caught up. */
export async function balancesOf(w: PaymentsWorld, accountId: string): Promise<{ record: number; hot: number }> {
  const r = await w.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [accountId]);
  return { record: Number(r.rows[0]?.balance ?? 0), hot: (await w.backend.ledger.balance(accountId)).balance };
}

/** Both balances equal `micros`, once the hot path has taken the movements (waits up to 5 s). */
export async function expectBalance(w: PaymentsWorld, accountId: string, micros: number): Promise<void> {
  await until('the hot path has the movements', async () => {
    const b = await balancesOf(w, accountId);
    return b.hot === micros && b.record === micros ? true : undefined;
  }, 5_000).catch(() => undefined);
  expect(await balancesOf(w, accountId)).toEqual({ record: micros, hot: micros });
}

/** A card top-up started for `cents` of credit: its id and the fake Stripe's session id. */
export async function stripeTopUp(w: PaymentsWorld, accountId: string, cents: number): Promise<{ topUpId: string; sessionId: string }> {
  const { topUp, checkoutUrl } = await w.topUps.start(accountId, cents, 'stripe');
  return { topUpId: topUp.id, sessionId: checkoutUrl.split('/').pop() ?? '' };
}
