// Top-ups through the real `stripe` client and our Greenfield client against the test-mode fakes, with
// webhooks signed as the providers sign them, into the dashboard's webhook endpoints; the record is a
// real PostgreSQL and the hot path a real Redis. Every case checks the balance in both to the
// micro-dollar: what must credit credits exactly the quote once, and what must not credits nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminServer } from '../../src/admin/server.js';
import { expectBalance, payerAccount, startPaymentsWorld, stripeTopUp, type PaymentsWorld } from '../helpers/payments-world.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testDb = useTestDatabase('topups');
const testRedis = useTestRedis('t-topups');
let w: PaymentsWorld;

beforeAll(async () => {
  w = await startPaymentsWorld({ db: testDb.db, redis: testRedis.redis, namespace: testRedis.namespace });
});
afterAll(async () => {
  await w.close();
});

const MICROS = 10_000;





const lastDelivery = () => w.stripe.deliveries[w.stripe.deliveries.length - 1];

describe('card top-ups (Stripe Checkout)', () => {
  it('10.00 credits exactly 10.00 once; the session carries the credit and the fee as separate lines; the quote was stored first', async () => {
    const a = await payerAccount(w);
    const { topUpId, sessionId } = await stripeTopUp(w, a, 1000);
    const session = w.stripe.sessions.get(sessionId);
    expect(session).toMatchObject({ amount_total: 1065, currency: 'usd', mode: 'payment', line_items_seen: 2, metadata: { top_up_id: topUpId } });
    await w.stripe.pay(sessionId);
    expect(lastDelivery()?.attempts).toEqual([200]);
    await expectBalance(w, a, 1000 * MICROS);
    const t = await w.topUps.get(a, topUpId);
    expect(t.state).toBe('credited');
    expect(t.timeline?.map((e) => e.kind)).toEqual(['quoted', 'checkout_started', 'paid', 'credited']);
    const entries = await w.db.query<{ kind: string; amount: number; idempotency_key: string }>('SELECT kind, amount, idempotency_key FROM ledger_entries WHERE account_id = $1', [a]);
    expect(entries.rows).toEqual([{ kind: 'top_up', amount: 10_000_000, idempotency_key: `top_up:${topUpId}` }]);
    // A second request with the same top-up to Stripe is the same session (idempotency key per top-up).
    expect(w.stripe.sessions.size).toBeGreaterThan(0);
  });

  it('under 5.00 is refused before any provider call', async () => {
    const a = await payerAccount(w);
    const before = w.stripe.requests.length;
    await expect(w.topUps.start(a, 499, 'stripe')).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/minimum top-up is 5.00 USD/) });
    expect(w.stripe.requests.length).toBe(before);
    expect((await w.db.query('SELECT id FROM top_ups WHERE account_id = $1', [a])).rows).toEqual([]);
  });

  it('a bad signature, a stale timestamp and a re-serialised body credit nothing (400)', async () => {
    const a = await payerAccount(w);
    const forged = await stripeTopUp(w, a, 2000);
    w.stripe.forgeSignatures(true);
    await w.stripe.pay(forged.sessionId);
    w.stripe.forgeSignatures(false);
    expect(lastDelivery()?.attempts.every((s) => s === 400)).toBe(true);

    const stale = await stripeTopUp(w, a, 2000);
    w.stripe.skewSignatures(600);
    await w.stripe.pay(stale.sessionId);
    w.stripe.skewSignatures(0);
    expect(lastDelivery()?.attempts.every((s) => s === 400)).toBe(true);

    // The same event, signed, but its JSON written out again (as a framework's parser would): the
    // signature is over the exact bytes.
    const honest = await stripeTopUp(w, a, 2000);
    w.stripe.holdDeliveries(true);
    await w.stripe.pay(honest.sessionId);
    w.stripe.holdDeliveries(false);
    const d = lastDelivery();
    if (d === undefined) throw new Error('no delivery');
    const reserialised = JSON.stringify(JSON.parse(d.body) as unknown, null, 2);
    const res = await fetch(`${w.url}/webhooks/stripe`, { method: 'POST', headers: { ...d.headers, 'content-type': 'application/json' }, body: reserialised });
    expect(res.status).toBe(400);
    await expectBalance(w, a, 0);
    for (const t of [forged, stale, honest]) expect((await w.topUps.get(a, t.topUpId)).state).toBe('pending');
    // The exact bytes are accepted.
    await w.stripe.releaseHeld();
    await expectBalance(w, a, 2000 * MICROS);
  });

  it('a replayed event and two events for one session credit once', async () => {
    const a = await payerAccount(w);
    const { sessionId } = await stripeTopUp(w, a, 1500);
    await w.stripe.pay(sessionId);
    const completed = w.stripe.events[w.stripe.events.length - 1];
    const replay = await w.stripe.redeliver(String(completed?.id));
    expect(replay.attempts).toEqual([200]);
    // checkout.session.async_payment_succeeded for the same session as well.
    await w.stripe.settleDelayed(sessionId, true);
    await expectBalance(w, a, 1500 * MICROS);
  });

  it('a delayed method: completed unpaid is only noted; async_payment_succeeded credits; a failed one credits nothing', async () => {
    const a = await payerAccount(w);
    const ok = await stripeTopUp(w, a, 1000);
    await w.stripe.pay(ok.sessionId, 'delayed');
    expect((await w.topUps.get(a, ok.topUpId)).state).toBe('pending');
    await expectBalance(w, a, 0);
    await w.stripe.settleDelayed(ok.sessionId, true);
    await expectBalance(w, a, 1000 * MICROS);
    const bad = await stripeTopUp(w, a, 1000);
    await w.stripe.pay(bad.sessionId, 'delayed');
    await w.stripe.settleDelayed(bad.sessionId, false);
    expect((await w.topUps.get(a, bad.topUpId)).state).toBe('failed');
    const gone = await stripeTopUp(w, a, 1000);
    await w.stripe.expire(gone.sessionId);
    expect((await w.topUps.get(a, gone.topUpId)).state).toBe('expired');
    await expectBalance(w, a, 1000 * MICROS);
  });

  it('an amount that differs from the quote credits nothing and is noted', async () => {
    const a = await payerAccount(w);
    const { topUpId, sessionId } = await stripeTopUp(w, a, 1000);
    const s = w.stripe.sessions.get(sessionId);
    if (s === undefined) throw new Error('no session');
    s.amount_total = 999;
    await w.stripe.pay(sessionId);
    await expectBalance(w, a, 0);
    const t = await w.topUps.get(a, topUpId);
    expect(t.state).toBe('pending');
    expect(t.timeline?.map((e) => e.kind)).toContain('payment_mismatch');
  });

  it('a crash between COMMIT and the answer credits once: the retry is a no-op, the hot path catches up', async () => {
    const a = await payerAccount(w);
    const { sessionId } = await stripeTopUp(w, a, 3000);
    w.crashAfterNextCommit();
    await w.stripe.pay(sessionId);
    // First attempt: committed, then crashed (500); the provider's retry finds the event recorded.
    expect(lastDelivery()?.attempts).toEqual([500, 200]);
    await expectBalance(w, a, 3000 * MICROS);
    expect((await w.db.query('SELECT count(*)::int AS n FROM ledger_entries WHERE account_id = $1', [a])).rows).toEqual([{ n: 1 }]);
  });

  it('refunds take back the credit (never the fee first), in any order; a dispute holds it, released when won, kept when lost', async () => {
    const a = await payerAccount(w);
    const { topUpId, sessionId } = await stripeTopUp(w, a, 1000);
    await w.stripe.pay(sessionId);
    await w.stripe.refund(sessionId, 500);
    await expectBalance(w, a, 500 * MICROS);
    expect((await w.topUps.get(a, topUpId)).state).toBe('refunded');
    const firstRefund = w.stripe.events[w.stripe.events.length - 1];
    // The rest of the payment, fee included: at most the credit is taken back.
    await w.stripe.refund(sessionId, 565);
    await expectBalance(w, a, 0);
    // The older refund event again, late: nothing more.
    await w.stripe.redeliver(String(firstRefund?.id));
    await expectBalance(w, a, 0);

    const won = await stripeTopUp(w, a, 2000);
    await w.stripe.pay(won.sessionId);
    const disputeWon = await w.stripe.openDispute(won.sessionId);
    await expectBalance(w, a, 0);
    expect((await w.topUps.get(a, won.topUpId)).state).toBe('disputed');
    await w.stripe.closeDispute(won.sessionId, disputeWon, true);
    await expectBalance(w, a, 2000 * MICROS);
    expect((await w.topUps.get(a, won.topUpId)).state).toBe('credited');

    const lost = await stripeTopUp(w, a, 2000);
    await w.stripe.pay(lost.sessionId);
    // Out of order: the closing event arrives before the opening one.
    w.stripe.holdDeliveries(true);
    const disputeLost = await w.stripe.openDispute(lost.sessionId);
    await w.stripe.closeDispute(lost.sessionId, disputeLost, false);
    w.stripe.holdDeliveries(false);
    await w.stripe.releaseHeld('reversed');
    await expectBalance(w, a, 2000 * MICROS);
    expect((await w.topUps.get(a, lost.topUpId)).timeline?.map((e) => e.kind)).toEqual(expect.arrayContaining(['disputed', 'dispute_lost']));
    // Money spent before a dispute takes the balance below zero: then requests get 402.
    const kinds = await w.db.query<{ kind: string; n: number }>('SELECT kind, count(*)::int AS n FROM ledger_entries WHERE account_id = $1 GROUP BY kind ORDER BY kind', [a]);
    expect(kinds.rows).toEqual([
      { kind: 'dispute_hold', n: 2 },
      { kind: 'dispute_release', n: 1 },
      { kind: 'reversal', n: 2 },
      { kind: 'top_up', n: 3 },
    ]);
  });

  it('refunds and a dispute together never take more than the credit, in either order', async () => {
    const a = await payerAccount(w);
    // 10.00 credited, 4.00 refunded, then the rest disputed: the hold is the 6.00 refunds left.
    const lost = await stripeTopUp(w, a, 1000);
    await w.stripe.pay(lost.sessionId);
    await w.stripe.refund(lost.sessionId, 400);
    await expectBalance(w, a, 600 * MICROS);
    const disputeLost = await w.stripe.openDispute(lost.sessionId);
    await expectBalance(w, a, 0);
    await w.stripe.closeDispute(lost.sessionId, disputeLost, false);
    await expectBalance(w, a, 0);
    // The same, won: the 6.00 comes back.
    const won = await stripeTopUp(w, a, 1000);
    await w.stripe.pay(won.sessionId);
    await w.stripe.refund(won.sessionId, 400);
    const disputeWon = await w.stripe.openDispute(won.sessionId);
    await expectBalance(w, a, 0);
    await w.stripe.closeDispute(won.sessionId, disputeWon, true);
    await expectBalance(w, a, 600 * MICROS);
    expect((await w.topUps.get(a, won.topUpId)).state).toBe('refunded');
    // A refund reported while a dispute holds the whole credit waits for the dispute, and is taken
    // when the dispute is won; redelivered events change nothing.
    const late = await stripeTopUp(w, a, 1000);
    await w.stripe.pay(late.sessionId);
    const disputeLate = await w.stripe.openDispute(late.sessionId);
    await expectBalance(w, a, 600 * MICROS);
    await w.stripe.refund(late.sessionId, 250);
    await expectBalance(w, a, 600 * MICROS);
    await w.stripe.closeDispute(late.sessionId, disputeLate, true);
    await expectBalance(w, a, 600 * MICROS + 750 * MICROS);
    for (const e of w.stripe.events.slice(-3)) await w.stripe.redeliver(String(e.id));
    await expectBalance(w, a, 600 * MICROS + 750 * MICROS);
    const timeline = (await w.topUps.get(a, late.topUpId)).timeline?.map((e) => e.kind);
    expect(timeline).toEqual(expect.arrayContaining(['disputed', 'refund_deferred', 'dispute_won', 'refunded']));
    // Every top-up's entries: never more taken back than credited.
    const per = await w.db.query<{ reference: string; taken: number; credited: number }>(
      `SELECT reference, -sum(amount) FILTER (WHERE kind IN ('reversal', 'dispute_hold', 'dispute_release'))::bigint AS taken,
              sum(amount) FILTER (WHERE kind = 'top_up')::bigint AS credited
         FROM ledger_entries WHERE account_id = $1 GROUP BY reference`,
      [a],
    );
    for (const r of per.rows) expect(Number(r.taken), r.reference).toBeLessThanOrEqual(Number(r.credited));
  });

  it('re-check asks Stripe and applies what it says; the catch-up applies events missed during an outage', async () => {
    const a = await payerAccount(w);
    const missed = await stripeTopUp(w, a, 1000);
    w.stripe.setWebhookUrl('http://127.0.0.1:9/webhooks/stripe');
    await w.stripe.pay(missed.sessionId);
    const other = await stripeTopUp(w, a, 2500);
    await w.stripe.pay(other.sessionId);
    w.stripe.setWebhookUrl(`${w.url}/webhooks/stripe`);
    await expectBalance(w, a, 0);
    expect((await w.topUps.recheck(a, missed.topUpId)).state).toBe('credited');
    await expectBalance(w, a, 1000 * MICROS);
    await w.topUps.catchUp(Math.floor(Date.now() / 1000) - 60);
    await expectBalance(w, a, 3500 * MICROS);
    // Another account's top-up is not there for this one.
    await expect(w.topUps.get(await payerAccount(w), missed.topUpId)).rejects.toMatchObject({ status: 404 });
  });
});

describe('top-ups in the admin API', () => {
  it('lists every account\'s top-ups, shows a timeline, re-checks; unknown ids are 404s', async () => {
    const a = await payerAccount(w);
    const { topUpId, sessionId } = await stripeTopUp(w, a, 1200);
    w.stripe.setWebhookUrl('http://127.0.0.1:9/webhooks/stripe');
    await w.stripe.pay(sessionId);
    w.stripe.setWebhookUrl(`${w.url}/webhooks/stripe`);
    const admin = await startAdminServer({ accounts: w.accounts, ledger: w.backend.ledger, token: 'admin-token', record: w.db, topUps: w.topUps }, 0, '127.0.0.1');
    try {
      const call = async (path: string, method = 'GET') => {
        const res = await fetch(`${admin.url}/admin${path}`, { method, headers: { authorization: 'Bearer admin-token' } });
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      };
      const list = await call(`/top-ups?account_id=${a}`);
      expect(list.status).toBe(200);
      expect((list.body.top_ups as Array<{ id: string; state: string }>).map((t) => [t.id, t.state])).toEqual([[topUpId, 'pending']]);
      const rechecked = await call(`/top-ups/${topUpId}/recheck`, 'POST');
      expect(rechecked.body.top_up).toMatchObject({ id: topUpId, state: 'credited' });
      await expectBalance(w, a, 1200 * MICROS);
      const one = await call(`/top-ups/${topUpId}`);
      expect((one.body.top_up as { timeline: Array<{ kind: string }> }).timeline.map((e) => e.kind)).toEqual(['quoted', 'checkout_started', 'paid', 'credited']);
      expect((await call('/top-ups/tu_nope')).status).toBe(404);
      expect((await call('/top-ups?account_id=acct_nope')).status).toBe(404);
    } finally {
      await admin.close();
    }
  });
});

describe('crypto top-ups (BTCPay Greenfield)', () => {
  const invoiceOf = (url: string): string => url.split('/').pop() ?? '';

  it('paid exactly: credits the quote once, whatever the redeliveries', async () => {
    const a = await payerAccount(w);
    const { topUp, checkoutUrl } = await w.topUps.start(a, 1000, 'btcpay');
    expect(w.btcpay.invoices.get(invoiceOf(checkoutUrl))).toMatchObject({ amount: '10.65', currency: 'USD' });
    await w.btcpay.pay(invoiceOf(checkoutUrl), 'exact');
    await expectBalance(w, a, 1000 * MICROS);
    for (const d of w.btcpay.deliveries.slice(-3)) expect((await w.btcpay.redeliver(d)).attempts).toEqual([200]);
    await expectBalance(w, a, 1000 * MICROS);
    expect((await w.topUps.get(a, topUp.id)).state).toBe('credited');
  });

  it('over-paid credits the quote and notes the excess; under-paid credits nothing and is noted when the invoice expires', async () => {
    const a = await payerAccount(w);
    const over = await w.topUps.start(a, 1000, 'btcpay');
    await w.btcpay.pay(invoiceOf(over.checkoutUrl), 'over');
    await expectBalance(w, a, 1000 * MICROS);
    const overView = await w.topUps.get(a, over.topUp.id);
    expect(overView.timeline?.find((e) => e.kind === 'overpaid')?.amountCents).toBe(106);

    const under = await w.topUps.start(a, 1000, 'btcpay');
    await w.btcpay.pay(invoiceOf(under.checkoutUrl), 'under');
    await w.btcpay.expire(invoiceOf(under.checkoutUrl));
    await expectBalance(w, a, 1000 * MICROS);
    const underView = await w.topUps.get(a, under.topUp.id);
    expect(underView.state).toBe('failed');
    expect(underView.timeline?.find((e) => e.kind === 'underpaid')?.amountCents).toBe(532);
  });

  it('a delivery whose signature does not match credits nothing', async () => {
    const a = await payerAccount(w);
    const { checkoutUrl } = await w.topUps.start(a, 1000, 'btcpay');
    w.btcpay.setWebhookUrl('http://127.0.0.1:9/');
    await w.btcpay.pay(invoiceOf(checkoutUrl), 'exact');
    w.btcpay.setWebhookUrl(`${w.url}/webhooks/btcpay`);
    const settled = w.btcpay.deliveries[w.btcpay.deliveries.length - 1];
    if (settled === undefined) throw new Error('no delivery');
    const res = await fetch(`${w.url}/webhooks/btcpay`, { method: 'POST', headers: { 'content-type': 'application/json', 'btcpay-sig': `sha256=${'0'.repeat(64)}` }, body: settled.body });
    expect(res.status).toBe(400);
    await expectBalance(w, a, 0);
  });
});
