// The production entry point with real-provider configuration: gateway-main, given DATABASE_URL,
// DASHBOARD_PORT and Stripe's keys (STRIPE_API_BASE pointing at the fake, as a staging setup would point
// at Stripe's test mode), serves the dashboard and the webhook. A holder signs up, tops up 10.00, the
// payment's webhook reaches this process and the balance rises by exactly 10.00 in Redis and the record.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { startFakeStripe } from '../../src/top-ups/fakes/fake-stripe.js';
import { openPostgres } from '../../src/record/database.js';
import { createRedisBackend } from '../../src/billing/backends.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { until } from './e2e-support.js';

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

describe('gateway-main with the dashboard and a payment provider', () => {
  it('serves the dashboard and credits a card top-up through its webhook', async () => {
    const redis = await startRedisServer({});
    cleanups.push(() => redis.stop());
    const database = await createTestDatabase('gwmain');
    cleanups.push(() => database.drop());
    const stripe = await startFakeStripe({ webhookSecret: 'whsec_main_test' });
    cleanups.push(() => stripe.close());
    const { DATABASE_URL: _db, TOLLGATE_CATALOG_FILE: _file, ...env } = process.env;
    const child = spawn(process.execPath, ['--import', 'tsx', new URL('../../src/gateway-main.ts', import.meta.url).pathname], {
      env: {
        ...env,
        REDIS_URL: redis.url,
        DATABASE_URL: database.url,
        PORT: '0',
        METRICS_PORT: '0',
        DASHBOARD_PORT: '0',
        DASHBOARD_SECURE_COOKIE: 'false',
        STRIPE_SECRET_KEY: 'sk_test_main',
        STRIPE_WEBHOOK_SECRET: 'whsec_main_test',
        STRIPE_API_BASE: stripe.url,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    cleanups.push(async () => {
      child.kill('SIGKILL');
    });
    const lines: string[] = [];
    createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
    const started = await until('gateway-main to start', () => lines.find((l) => l.includes('tollgate gateway started')), 30_000);
    const info = JSON.parse(started) as { dashboard?: string; payments?: { real: boolean; providers: string[] } };
    expect(info.payments).toEqual({ real: true, providers: ['stripe'] });
    const dash = info.dashboard ?? '';
    stripe.setWebhookUrl(`${dash}/webhooks/stripe`);

    const signUp = await fetch(`${dash}/api/sign-up`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'main@example.com', password: 'a main password' }) });
    expect(signUp.status).toBe(201);
    const cookie = (signUp.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const { csrf_token: csrf, user } = (await signUp.json()) as { csrf_token: string; user: { account_id: string } };
    // The holder follows the confirmation link mailed through the outbox before adding money.
    const mailDb = await openPostgres(database.url, { max: 1 });
    cleanups.push(() => mailDb.close());
    expect((await fetch(`${dash}/api${await DashboardClient.confirmationPath(mailDb, 'main@example.com')}`, { method: 'POST' })).status).toBe(204);
    const started2 = await fetch(`${dash}/api/top-ups`, {
      method: 'POST',
      headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
      body: JSON.stringify({ amount_usd: '10', provider: 'stripe' }),
    });
    expect(started2.status).toBe(201);
    const { checkout_url: checkoutUrl } = (await started2.json()) as { checkout_url: string };
    const session = checkoutUrl.split('/').pop() ?? '';
    await stripe.pay(session);
    expect(stripe.deliveries[stripe.deliveries.length - 1]?.attempts).toEqual([200]);

    const db = await openPostgres(database.url, { max: 1 });
    cleanups.push(() => db.close());
    const totals = await db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [user.account_id]);
    expect(totals.rows[0]?.balance).toBe(10_000_000);
    const conn = new Redis(redis.url);
    cleanups.push(async () => {
      conn.disconnect();
    });
    const hot = createRedisBackend({ redis: conn });
    await until('the hot path has the credit', async () => ((await hot.ledger.balance(user.account_id)).balance === 10_000_000 ? true : undefined), 10_000);
  }, 60_000);
});
