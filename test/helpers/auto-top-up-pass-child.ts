// An automatic top-up pass in a process of its own, as every gateway with a dashboard port runs one: its
// own pool on the test's PostgreSQL and the real `stripe` client against the test's fake Stripe. Reads
// TOLLGATE_TEST_DATABASE_URL, STRIPE_API_BASE and STRIPE_WEBHOOK_SECRET; prints {"ready":true} once
// connected, then runs one pass for each line "pass" on stdin and answers {"charged": n} (or {"error": ...}).
// Run with: node --import tsx test/helpers/auto-top-up-pass-child.ts
import { createInterface } from 'node:readline';
import { openPostgres } from '../../src/record/database.js';
import { AutoTopUps } from '../../src/top-ups/auto-top-up.js';
import type { PaymentProvider, SavedCards } from '../../src/top-ups/provider.js';
import { stripeProvider } from '../../src/top-ups/providers/stripe.js';

const url = process.env.TOLLGATE_TEST_DATABASE_URL;
const apiBase = process.env.STRIPE_API_BASE;
const webhookSecret = process.env.STRIPE_WEBHOOK_SECRET;
if (!url || !apiBase || !webhookSecret) {
  process.stderr.write('auto-top-up-pass-child needs TOLLGATE_TEST_DATABASE_URL, STRIPE_API_BASE and STRIPE_WEBHOOK_SECRET\n');
  process.exit(2);
}

const db = await openPostgres(url, { max: 2 });
const provider = stripeProvider({ secretKey: 'sk_test_child', webhookSecret, apiBase });
const auto = new AutoTopUps({ db, provider: provider as PaymentProvider & { savedCards: SavedCards }, publicUrl: () => 'http://127.0.0.1:1' });
await db.query('SELECT 1');
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() !== 'pass') continue;
  try {
    process.stdout.write(`${JSON.stringify({ charged: await auto.check() })}\n`);
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ error: err instanceof Error ? err.message : String(err) })}\n`);
  }
}
await db.close();
