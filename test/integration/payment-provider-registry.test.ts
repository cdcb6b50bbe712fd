// A payment provider is its module plus one registry line (issue 31): the webhook routes, the
// configuration from the environment, the test mode, the pages' labels and the record all follow the
// registry. Proven with a provider that exists only in this file ("voucher": a hosted page somewhere,
// webhooks signed with HMAC-SHA256), registered next to Stripe and BTCPay and run through the real
// top-ups wiring, the real dashboard over HTTP, a real PostgreSQL record and a real Redis hot path.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { createRedisBackend } from '../../src/billing/backends.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { recordedBackend, type RecordedBackend } from '../../src/record/recorded-backend.js';
import { paymentProvidersFromEnv, startTestModePayments } from '../../src/top-ups/payments-config.js';
import { checkedRegistry, envSettings, type ProviderModule } from '../../src/top-ups/provider-module.js';
import { WebhookRejected, type PaymentProvider } from '../../src/top-ups/provider.js';
import { PROVIDERS } from '../../src/top-ups/providers/index.js';
import { startTopUps, type RunningTopUps } from '../../src/top-ups/run.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testDb = useTestDatabase('registry');
const testRedis = useTestRedis('t-registry');

const sign = (secret: string, body: string): string => createHmac('sha256', secret).update(body).digest('hex');

/** The whole of a provider Tollgate did not know: a hosted page, and webhooks signed with its secret. */
function voucherProvider(secret: string, pageBase = 'https://vouchers.example'): PaymentProvider {
  return {
    name: 'voucher',
    label: 'Voucher',
    checkoutOrigin: new URL(pageBase).origin,
    startCheckout: (req) => Promise.resolve({ checkoutRef: `vc_${req.topUpId}`, checkoutUrl: `${pageBase}/redeem/vc_${req.topUpId}` }),
    verifyWebhook(rawBody, header) {
      const a = Buffer.from(header('voucher-signature') ?? '');
      const b = Buffer.from(sign(secret, rawBody.toString('utf8')));
      if (a.length !== b.length || !timingSafeEqual(a, b)) return Promise.reject(new WebhookRejected('the voucher signature does not match'));
      const e = JSON.parse(rawBody.toString('utf8')) as { id: string; checkout: string; paid_cents: number };
      return Promise.resolve([{ eventId: e.id, type: 'voucher.redeemed', ref: { checkout: e.checkout }, fact: { kind: 'paid', paidCents: e.paid_cents, currency: 'usd' } }]);
    },
    currentFact: () => Promise.resolve({ kind: 'processing' }),
    recentEvents: () => Promise.resolve([]),
  };
}

/** Its module, as a new provider's file would declare it; delivered test-mode webhooks are noted in `delivered`. */
function voucherModule(delivered: string[] = []): ProviderModule {
  return {
    name: 'voucher',
    label: 'Voucher',
    title: 'Voucher Co',
    webhookPath: '/webhooks/voucher',
    fromEnv(env) {
      const s = envSettings(env, 'Voucher Co', ['VOUCHER_WEBHOOK_SECRET', 'VOUCHER_PAGE_URL']);
      return s === undefined ? undefined : voucherProvider(s.VOUCHER_WEBHOOK_SECRET, s.VOUCHER_PAGE_URL);
    },
    startTestMode: () =>
      Promise.resolve({
        provider: voucherProvider('test-secret', 'http://127.0.0.1:9'),
        url: 'http://127.0.0.1:9',
        deliverTo: (url) => void delivered.push(url),
        close: () => Promise.resolve(),
      }),
  };
}

describe('the registry is the one list of providers', () => {
  it('configuration comes from each registered module: none, a complete one, an incomplete one', () => {
    const registry = [...PROVIDERS, voucherModule()];
    expect(paymentProvidersFromEnv({}, registry)).toEqual([]);
    const configured = paymentProvidersFromEnv({ VOUCHER_WEBHOOK_SECRET: 's', VOUCHER_PAGE_URL: 'https://v.example', STRIPE_SECRET_KEY: 'sk_test_x', STRIPE_WEBHOOK_SECRET: 'whsec_x' }, registry);
    expect(configured.map((p) => [p.name, p.label])).toEqual([
      ['stripe', 'Card'],
      ['voucher', 'Voucher'],
    ]);
    expect(() => paymentProvidersFromEnv({ VOUCHER_WEBHOOK_SECRET: 's' }, registry)).toThrow('Voucher Co needs VOUCHER_WEBHOOK_SECRET and VOUCHER_PAGE_URL');
    expect(() => paymentProvidersFromEnv({ BTCPAY_URL: 'https://b.example' }, registry)).toThrow('BTCPay needs BTCPAY_URL, BTCPAY_API_KEY, BTCPAY_STORE_ID and BTCPAY_WEBHOOK_SECRET');
  });

  it('refuses a name the record would refuse, and two providers with one name or one webhook path', () => {
    expect(() => checkedRegistry([...PROVIDERS, { ...voucherModule(), name: 'Voucher Co' }])).toThrow(/must match/);
    expect(() => checkedRegistry([...PROVIDERS, { ...voucherModule(), name: 'stripe' }])).toThrow('two payment providers are named stripe');
    expect(() => checkedRegistry([...PROVIDERS, { ...voucherModule(), webhookPath: '/webhooks/btcpay' }])).toThrow('two payment providers take webhooks at /webhooks/btcpay');
  });

  it('test mode starts every registered fake and points each at its own webhook path', async () => {
    const delivered: string[] = [];
    const payments = await startTestModePayments('127.0.0.1', [...PROVIDERS, voucherModule(delivered)]);
    try {
      expect(payments.providers.map((p) => p.name)).toEqual(['stripe', 'btcpay', 'voucher']);
      expect(payments.fakes.map((f) => f.title)).toEqual(['Stripe', 'BTCPay', 'Voucher Co']);
      payments.deliverTo('http://127.0.0.1:4000/');
      expect(delivered).toEqual(['http://127.0.0.1:4000/webhooks/voucher']);
    } finally {
      await payments.close();
    }
  });
});

describe('a provider registered only in this test', () => {
  const SECRET = 'voucher-webhook-secret';
  let backend: RecordedBackend;
  let running: RunningTopUps;
  let dashboard: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    backend = recordedBackend(createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-1` }), testDb.db, 'tg', { rebuildWindowMs: 0, movementSweepMs: 200, movementSweepGraceMs: 0 });
    const accounts = new AccountService({ accounts: backend.accounts, ledger: backend.ledger, applyCommitted: (m, r) => backend.ledger.applyCommitted(m, r) });
    const started = await startTopUps({
      db: testDb.db,
      accounts,
      env: { VOUCHER_WEBHOOK_SECRET: SECRET, VOUCHER_PAGE_URL: 'https://vouchers.example' },
      registry: [...PROVIDERS, voucherModule()],
      testModePayments: false,
      host: '127.0.0.1',
    });
    if (started === undefined) throw new Error('top-ups did not start with the voucher configured');
    running = started;
    const service = new DashboardService({ db: testDb.db, accounts, signUp: true, sessionTtlMs: 3_600_000 });
    dashboard = await startDashboard({ service, secureCookie: false, topUps: running.topUps, webhooks: running.webhooks }, 0, '127.0.0.1');
    running.servedAt(dashboard.url);
  });
  afterAll(async () => {
    await dashboard.close();
    await running.close();
    await backend.ledger.close();
  });

  it('is offered with its label, takes its webhooks at its path and credits its payment once, exactly', async () => {
    expect(running.payments).toEqual({ real: true, providers: ['voucher'] });
    const holder = new DashboardClient(() => dashboard.url);
    await holder.signUpConfirmed(testDb.db, 'voucher-holder@example.com');
    const accountId = (await testDb.db.query<{ account_id: string }>('SELECT account_id FROM dashboard_users WHERE email = $1', [holder.email])).rows[0]?.account_id ?? '';

    // The quote page offers it by its label.
    const quote = await holder.req('POST', '/balance/quote', { amount_usd: '10', csrf: holder.csrf }, { form: true });
    expect(quote.status).toBe(200);
    expect(quote.text).toContain('value="voucher"');
    expect(quote.text).toMatch(/Pay \$10\.65 by voucher/);

    const started = await holder.api('POST', '/api/top-ups', { amount_usd: '10', provider: 'voucher' });
    expect(started.status).toBe(201);
    const { top_up: topUp, checkout_url: checkoutUrl } = started.json() as { top_up: { id: string; provider: string; total_cents: number }; checkout_url: string };
    expect(topUp).toMatchObject({ provider: 'voucher', total_cents: 1065 });
    expect(checkoutUrl).toBe(`https://vouchers.example/redeem/vc_${topUp.id}`);

    // Its webhook route exists: a GET is told to POST, a forged signature is refused, nothing credited.
    const hook = `${dashboard.url}/webhooks/voucher`;
    expect((await fetch(hook)).status).toBe(405);
    const body = JSON.stringify({ id: 'ev_1', checkout: `vc_${topUp.id}`, paid_cents: topUp.total_cents });
    const forged = await fetch(hook, { method: 'POST', headers: { 'voucher-signature': sign('not the secret', body) }, body });
    expect(forged.status).toBe(400);
    expect(await running.topUps.get(accountId, topUp.id)).toMatchObject({ state: 'pending' });

    const paid = await fetch(hook, { method: 'POST', headers: { 'voucher-signature': sign(SECRET, body) }, body });
    expect(paid.status).toBe(200);
    expect(await paid.json()).toEqual({ received: true, applied: 1 });
    const again = await fetch(hook, { method: 'POST', headers: { 'voucher-signature': sign(SECRET, body) }, body });
    expect(await again.json()).toEqual({ received: true, applied: 0 });

    // Credited once, in the record and on the hot path, under the top-up's own idempotency key.
    const entries = await testDb.db.query<{ kind: string; amount: number; idempotency_key: string }>('SELECT kind, amount, idempotency_key FROM ledger_entries WHERE account_id = $1', [accountId]);
    expect(entries.rows).toEqual([{ kind: 'top_up', amount: 10_000_000, idempotency_key: `top_up:${topUp.id}` }]);
    await until('the hot path has the credit', async () => ((await backend.ledger.balance(accountId)).balance === 10_000_000 ? true : undefined), 5_000);

    // The Balance page and the top-up's own page name the method by its label.
    const balance = await holder.req('GET', '/balance');
    expect(balance.text).toMatch(/<td>Voucher<\/td>/);
    expect((await holder.req('GET', `/top-ups/${topUp.id}`)).text).toContain('Voucher ·');

    // The record takes any registered name, and still refuses one of another shape (migration 033).
    const insert = (provider: string) =>
      testDb.db.query(`INSERT INTO top_ups (id, account_id, provider, credit_cents, fee_cents, total_cents, state) VALUES ($1, $2, $3, 1000, 65, 1065, 'quoted')`, [`tu_${provider.length}`, accountId, provider]);
    await expect(insert('Voucher Co')).rejects.toThrow(/top_ups_provider_name/);
  });

  it('a service built on the default registry has no route for it', async () => {
    const plain = await startTopUps({ db: testDb.db, accounts: new AccountService({ accounts: backend.accounts, ledger: backend.ledger, applyCommitted: (m, r) => backend.ledger.applyCommitted(m, r) }), env: { STRIPE_SECRET_KEY: 'sk_test_x', STRIPE_WEBHOOK_SECRET: 'whsec_x' }, testModePayments: false, host: '127.0.0.1' });
    if (plain === undefined) throw new Error('top-ups did not start with Stripe configured');
    try {
      expect(plain.topUps.registry.map((m) => m.webhookPath)).toEqual(['/webhooks/stripe', '/webhooks/btcpay']);
      // Not one of its routes: the middleware hands the request on.
      let handedOn = false;
      const ctx = { path: '/webhooks/voucher', method: 'POST' } as Parameters<RunningTopUps['webhooks']>[0];
      await plain.webhooks(ctx, () => {
        handedOn = true;
        return Promise.resolve();
      });
      expect(handedOn).toBe(true);
    } finally {
      await plain.close();
    }
  });
});
