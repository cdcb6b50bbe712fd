// A stand-in for the Stripe API on loopback, for tests and the local run's labelled test mode. The real
// `stripe` client talks to it (host, port and protocol options): it creates and retrieves Checkout
// Sessions (idempotency keys honoured), lists events, and serves a hosted "pay" page whose button pays
// the session and sends checkout.session.completed, signed as Stripe signs (Stripe-Signature:
// t=<unix s>,v1=<HMAC-SHA256 of "t.body">), retried until answered 2xx. Tests also drive refunds (each
// a Refund object that can fail later, listed by payment intent), disputes and inquiries, delayed
// methods, expiring a session, redeliveries, stale or forged signatures, and deliveries held back to be
// sent late, twice or in any order.
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { close, deliver, escape, listen, readBody, sendJson, sendPage, type Delivery } from './fake-http.js';

type Json = Record<string, unknown>;

export interface FakeStripeSession extends Json {
  id: string;
  amount_total: number;
  currency: string;
  mode: string;
  payment_status: 'paid' | 'unpaid' | 'no_payment_required';
  status: 'open' | 'complete' | 'expired';
  url: string;
  success_url: string;
  cancel_url: string;
  payment_intent: string | null;
  metadata: Record<string, string>;
}

/** `a[b][0][c]=v` form fields (how stripe-node encodes parameters) as nested objects and arrays. */
export function parseStripeForm(text: string): Json {
  const root: Json = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const path = key.split(/\[|\]\[|\]/).filter((p) => p !== '');
    let node: Json = root;
    path.forEach((part, i) => {
      if (i === path.length - 1) node[part] = value;
      // Arrays come as objects keyed 0, 1, ...: listOf reads them in order.
      else node = (node[part] ??= {}) as Json;
    });
  }
  return root;
}

const listOf = (v: unknown): Json[] => (v === undefined || v === null ? [] : Object.values(v as Json) as Json[]);
const rand = (prefix: string): string => `${prefix}_test_${randomBytes(12).toString('base64url')}`;

export interface FakeStripeOptions {
  webhookSecret: string;
  /** Where events go; may be set later (the dashboard starts after the fake). */
  webhookUrl?: string;
  port?: number;
  host?: string;
}

export async function startFakeStripe(opts: FakeStripeOptions) {
  const sessions = new Map<string, FakeStripeSession>();
  const idempotent = new Map<string, FakeStripeSession>();
  const events: Json[] = [];
  const deliveries: Delivery[] = [];
  const requests: Array<{ method: string; path: string }> = [];
  const held: Delivery[] = [];
  const state = { webhookUrl: opts.webhookUrl ?? '', hold: false, clockSkewSeconds: 0, forge: false };
  let base = '';

  const sign = (payload: string, at: number): string => {
    const secret = state.forge ? 'whsec_not_the_secret' : opts.webhookSecret;
    return `t=${at},v1=${createHmac('sha256', secret).update(`${at}.${payload}`).digest('hex')}`;
  };

  /** Records an event and sends it (or holds it, for out-of-order tests); resolves when answered. */
  async function emit(type: string, object: Json): Promise<Json> {
    const event: Json = { id: rand('evt'), object: 'event', api_version: '2026-10-28.endive', created: Math.floor(Date.now() / 1000), type, livemode: false, pending_webhooks: 1, data: { object: structuredClone(object) } };
    events.push(event);
    const body = JSON.stringify(event);
    const d: Delivery = { url: state.webhookUrl, body, headers: { 'stripe-signature': sign(body, Math.floor(Date.now() / 1000) + state.clockSkewSeconds) }, attempts: [] };
    deliveries.push(d);
    if (state.hold) held.push(d);
    else if (d.url !== '') await deliver(d);
    return event;
  }

  function session(id: string): FakeStripeSession {
    const s = sessions.get(id);
    if (s === undefined) throw new Error(`no such checkout session: ${id}`);
    return s;
  }

  /** The payer pays: at once (a card) or, with `delayed`, completed unpaid and settled later. */
  async function pay(id: string, outcome: 'paid' | 'delayed' = 'paid'): Promise<FakeStripeSession> {
    const s = session(id);
    s.status = 'complete';
    s.payment_intent = s.payment_intent ?? rand('pi');
    s.payment_status = outcome === 'paid' ? 'paid' : 'unpaid';
    await emit('checkout.session.completed', s);
    return s;
  }

  interface FakeRefund extends Json {
    id: string;
    amount: number;
    status: 'succeeded' | 'failed';
    payment_intent: string | null;
  }
  const refunds: FakeRefund[] = [];
  /**
   * Saved cards (payment methods) and how each behaves when charged off-session: paid, declined, the
   * bank asking for the holder, or (`later`) accepted as processing and settled by a later event.
   */
  type CardBehaviour = 'ok' | 'decline' | 'authenticate' | 'later';
  const paymentMethods = new Map<string, { id: string; behaviour: CardBehaviour; customer: string | null }>();
  const setupIntents = new Map<string, Json>();
  const customers = new Set<string>();
  const paymentIntents = new Map<string, Json>();
  /** Stripe keeps an idempotent request's parameters with its answer, and refuses the key with others. */
  const intentByKey = new Map<string, { params: string; status: number; body: Json }>();
  /**
   * Off-session charges that get no usable answer: `unanswered` fails before Stripe does anything,
   * `answer_lost` charges and then fails (the answer is kept for the key, as Stripe keeps it).
   */
  const failing = { count: 0, mode: 'unanswered' as 'unanswered' | 'answer_lost' };
  /** What the payment's refunds add up to now: failed ones no longer count (Stripe lowers amount_refunded). */
  const refundedOf = (s: FakeStripeSession): number => refunds.filter((r) => r.payment_intent === s.payment_intent && r.status === 'succeeded').reduce((t, r) => t + r.amount, 0);

  /** The holder saves a card on a setup-mode session: a SetupIntent with a payment method attached to its customer. */
  async function saveCard(id: string, behaviour: CardBehaviour = 'ok'): Promise<string> {
    const s = session(id);
    const pm = { id: rand('pm'), behaviour, customer: (s.customer as string | null) ?? null };
    paymentMethods.set(pm.id, pm);
    const intent: Json = { id: rand('seti'), object: 'setup_intent', status: 'succeeded', payment_method: pm.id, customer: pm.customer, usage: 'off_session' };
    setupIntents.set(String(intent.id), intent);
    s.status = 'complete';
    s.setup_intent = String(intent.id);
    s.payment_status = 'no_payment_required' as FakeStripeSession['payment_status'];
    await emit('checkout.session.completed', s);
    return pm.id;
  }

  const charge = (s: FakeStripeSession, refunded: number): Json => ({ id: `ch_for_${s.payment_intent}`, object: 'charge', amount: s.amount_total, amount_refunded: refunded, currency: s.currency, payment_intent: s.payment_intent, refunded: refunded >= s.amount_total });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    const method = req.method ?? 'GET';
    requests.push({ method, path: url.pathname });
    if (url.pathname.startsWith('/v1/')) {
      if (!/^Bearer sk_test_/.test(req.headers.authorization ?? '')) return sendJson(res, 401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided.' } });
    }
    if (method === 'POST' && url.pathname === '/v1/checkout/sessions') {
      const key = req.headers['idempotency-key'];
      const again = typeof key === 'string' ? idempotent.get(key) : undefined;
      if (again !== undefined) return sendJson(res, 200, again);
      const p = parseStripeForm(await readBody(req));
      const items = listOf(p.line_items);
      const amount = items.reduce((t, it) => t + Number((it.price_data as Json | undefined)?.unit_amount ?? 0) * Number(it.quantity ?? 1), 0);
      const currency = String((items[0]?.price_data as Json | undefined)?.currency ?? 'usd');
      const id = rand('cs');
      const s: FakeStripeSession = {
        id,
        object: 'checkout.session',
        amount_total: amount,
        currency,
        mode: String(p.mode ?? 'payment'),
        payment_status: 'unpaid',
        status: 'open',
        url: `${base}/pay/${id}`,
        success_url: String(p.success_url ?? ''),
        cancel_url: String(p.cancel_url ?? ''),
        client_reference_id: p.client_reference_id ?? null,
        metadata: (p.metadata ?? {}) as Record<string, string>,
        payment_intent: null,
        customer: p.customer ?? null,
        setup_intent: null,
        line_items_seen: items.length,
      };
      sessions.set(id, s);
      if (typeof key === 'string') idempotent.set(key, s);
      return sendJson(res, 200, s);
    }
    if (method === 'POST' && url.pathname === '/v1/customers') {
      const key = req.headers['idempotency-key'];
      const id = typeof key === 'string' ? `cus_for_${key.replace(/[^A-Za-z0-9_]/g, '_')}` : rand('cus');
      customers.add(id);
      await readBody(req);
      return sendJson(res, 200, { id, object: 'customer' });
    }
    const si = /^\/v1\/setup_intents\/([^/]+)$/.exec(url.pathname);
    if (method === 'GET' && si !== null) {
      const found = setupIntents.get(decodeURIComponent(si[1] ?? ''));
      return found === undefined ? sendJson(res, 404, { error: { type: 'invalid_request_error', message: 'No such setupintent' } }) : sendJson(res, 200, found);
    }
    const pmMatch = /^\/v1\/payment_methods\/([^/]+)$/.exec(url.pathname);
    if (method === 'GET' && pmMatch !== null) {
      const pm = paymentMethods.get(decodeURIComponent(pmMatch[1] ?? ''));
      if (pm === undefined) return sendJson(res, 404, { error: { type: 'invalid_request_error', message: 'No such PaymentMethod' } });
      const last4 = { ok: '4242', decline: '0341', authenticate: '3155', later: '1117' }[pm.behaviour];
      return sendJson(res, 200, { id: pm.id, object: 'payment_method', type: 'card', customer: pm.customer, card: { brand: 'visa', last4 } });
    }
    if (method === 'POST' && url.pathname === '/v1/payment_intents') {
      // Off-session charges of a saved card; the idempotency key returns the first answer again, for
      // the same parameters only.
      const key = req.headers['idempotency-key'];
      const body = await readBody(req);
      const params = [...new URLSearchParams(body)].map(([k, v]) => `${k}=${v}`).sort().join('&');
      const fail = (): void => {
        failing.count--;
        // What Stripe sends with a 500 its idempotency layer would replay: the client does not retry it.
        res.writeHead(500, { 'content-type': 'application/json', 'stripe-should-retry': 'false' });
        res.end(JSON.stringify({ error: { type: 'api_error', message: 'An unknown error occurred (injected).' } }));
      };
      if (failing.count > 0 && failing.mode === 'unanswered') return fail();
      const again = typeof key === 'string' ? intentByKey.get(key) : undefined;
      if (again !== undefined && again.params !== params) {
        return sendJson(res, 400, {
          error: { type: 'idempotency_error', message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${String(key)}' if you meant to execute a different request.` },
        });
      }
      if (again !== undefined) return failing.count > 0 ? fail() : sendJson(res, again.status, again.body);
      const p = parseStripeForm(body);
      const pm = paymentMethods.get(String(p.payment_method ?? ''));
      const amount = Number(p.amount ?? 0);
      const pi: Json = { id: rand('pi'), object: 'payment_intent', amount, amount_received: 0, currency: String(p.currency ?? 'usd'), customer: p.customer ?? null, payment_method: p.payment_method ?? null, metadata: (p.metadata ?? {}) as Json, status: 'requires_payment_method', last_payment_error: null };
      paymentIntents.set(String(pi.id), pi);
      let answer: { status: number; body: Json };
      if (pm === undefined || pm.customer !== (p.customer ?? null)) {
        answer = { status: 400, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: 'No such PaymentMethod for this customer.' } } };
      } else if (pm.behaviour === 'ok') {
        pi.status = 'succeeded';
        pi.amount_received = amount;
        answer = { status: 200, body: pi };
        await emit('payment_intent.succeeded', pi);
      } else if (pm.behaviour === 'later') {
        pi.status = 'processing';
        answer = { status: 200, body: structuredClone(pi) };
      } else {
        const auth = pm.behaviour === 'authenticate';
        const error = { type: 'card_error', code: auth ? 'authentication_required' : 'card_declined', ...(auth ? {} : { decline_code: 'insufficient_funds' }), message: auth ? 'This payment requires authentication.' : 'Your card has insufficient funds.', payment_intent: pi };
        pi.status = auth ? 'requires_action' : 'requires_payment_method';
        pi.last_payment_error = { code: error.code, message: error.message };
        answer = { status: 402, body: { error } };
        await emit('payment_intent.payment_failed', pi);
      }
      if (typeof key === 'string') intentByKey.set(key, { params, ...answer });
      if (failing.count > 0) return fail();
      return sendJson(res, answer.status, answer.body);
    }
    if (method === 'GET' && url.pathname === '/v1/checkout/sessions') {
      const pi = url.searchParams.get('payment_intent');
      const data = [...sessions.values()].filter((x) => pi === null || x.payment_intent === pi);
      return sendJson(res, 200, { object: 'list', url: '/v1/checkout/sessions', has_more: false, data });
    }
    if (method === 'GET' && url.pathname === '/v1/refunds') {
      const pi = url.searchParams.get('payment_intent');
      const data = refunds.filter((r) => pi === null || r.payment_intent === pi).reverse();
      return sendJson(res, 200, { object: 'list', url: '/v1/refunds', has_more: false, data });
    }
    const expire = /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/.exec(url.pathname);
    if (method === 'POST' && expire !== null) {
      const s = sessions.get(decodeURIComponent(expire[1] ?? ''));
      if (s === undefined) return sendJson(res, 404, { error: { type: 'invalid_request_error', message: 'No such checkout.session' } });
      if (s.status !== 'open') return sendJson(res, 400, { error: { type: 'invalid_request_error', message: `Only Checkout Sessions with a status in ["open"] can be expired. This Checkout Session has a status of "${s.status}".` } });
      s.status = 'expired';
      await emit('checkout.session.expired', s);
      return sendJson(res, 200, s);
    }
    const m = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(url.pathname);
    if (method === 'GET' && m !== null) {
      const s = sessions.get(decodeURIComponent(m[1] ?? ''));
      if (s === undefined) return sendJson(res, 404, { error: { type: 'invalid_request_error', message: 'No such checkout.session' } });
      const expand = listOf((parseStripeForm(url.search.slice(1)).expand ?? {}) as Json).map(String);
      const intent = typeof s.setup_intent === 'string' ? setupIntents.get(s.setup_intent) : undefined;
      return sendJson(res, 200, expand.includes('setup_intent') && intent !== undefined ? { ...s, setup_intent: intent } : s);
    }
    if (method === 'GET' && url.pathname === '/v1/events') {
      const q = parseStripeForm(url.search.slice(1));
      const since = Number((q.created as Json | undefined)?.gte ?? 0);
      const types = new Set(listOf(q.types).map(String));
      const data = events.filter((e) => Number(e.created) >= since && (types.size === 0 || types.has(String(e.type)))).reverse();
      return sendJson(res, 200, { object: 'list', url: '/v1/events', has_more: false, data });
    }
    const pageMatch = /^\/pay\/([^/]+)$/.exec(url.pathname);
    if (pageMatch !== null) {
      const s = sessions.get(decodeURIComponent(pageMatch[1] ?? ''));
      if (s === undefined) return sendPage(res, 'Not found', '<h1>No such checkout</h1>');
      if (s.mode === 'setup') {
        if (method === 'GET') {
          return sendPage(
            res,
            'Save a card · Fake Stripe',
            `<h1>Save a card for later payments</h1><form method="post"><button name="card" value="ok">Save card ending 4242</button>
<button name="card" value="decline">Save card ending 0341 (declines later)</button><button name="card" value="authenticate">Save card ending 3155 (bank asks to authenticate)</button></form><p><a href="${escape(s.cancel_url)}">Cancel and go back</a></p>`,
          );
        }
        const choice = new URLSearchParams(await readBody(req)).get('card');
        await saveCard(s.id, choice === 'decline' ? 'decline' : choice === 'authenticate' ? 'authenticate' : 'ok');
        res.writeHead(303, { location: s.success_url });
        return void res.end();
      }
      if (method === 'GET') {
        const total = `${Math.floor(s.amount_total / 100)}.${String(s.amount_total % 100).padStart(2, '0')}`;
        return sendPage(
          res,
          'Pay · Fake Stripe',
          `<h1>Pay ${total} ${escape(s.currency.toUpperCase())}</h1><p>Card ending 4242 (test)</p>
<form method="post"><button name="outcome" value="paid">Pay ${total} ${escape(s.currency.toUpperCase())}</button>
<button name="outcome" value="delayed">Pay by bank debit (settles later)</button></form><p><a href="${escape(s.cancel_url)}">Cancel and go back</a></p>`,
        );
      }
      const form = new URLSearchParams(await readBody(req));
      await pay(s.id, form.get('outcome') === 'delayed' ? 'delayed' : 'paid');
      res.writeHead(303, { location: s.success_url });
      return void res.end();
    }
    sendJson(res, 404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${url.pathname})` } });
  }

  const { server, url } = await listen(handle, opts.port ?? 0, opts.host);
  base = url;
  return {
    url,
    sessions,
    events,
    deliveries,
    requests,
    setWebhookUrl: (u: string): void => {
      state.webhookUrl = u;
    },
    /** Hold deliveries instead of sending them (released with releaseHeld, in any order). */
    holdDeliveries: (on: boolean): void => {
      state.hold = on;
    },
    async releaseHeld(order: 'sent' | 'reversed' = 'sent'): Promise<void> {
      const list = held.splice(0);
      if (order === 'reversed') list.reverse();
      for (const d of list) await deliver({ ...d, url: state.webhookUrl });
    },
    /** The held deliveries, taken out of the queue: the caller sends them when and as often as it likes. */
    takeHeld: (): Delivery[] => held.splice(0),
    /** Sends one delivery now, once (a late, repeated or reordered delivery). */
    send: (d: Delivery): Promise<boolean> => deliver({ ...d, url: state.webhookUrl, attempts: [] }, 1),
    /** Sign later deliveries this many seconds in the past (a stale timestamp), or with the wrong secret. */
    skewSignatures: (seconds: number): void => {
      state.clockSkewSeconds = -seconds;
    },
    forgeSignatures: (on: boolean): void => {
      state.forge = on;
    },
    pay,
    saveCard,
    paymentIntents,
    /** The next `count` off-session charges get a 500: before charging (`unanswered`) or after (`answer_lost`). */
    failPaymentIntents(count: number, mode: 'unanswered' | 'answer_lost' = 'unanswered'): void {
      failing.count = count;
      failing.mode = mode;
    },
    /** A processing off-session payment (a `later` card) settles: payment_intent.succeeded or payment_failed. */
    async settlePaymentIntent(id: string, ok: boolean): Promise<void> {
      const pi = paymentIntents.get(id);
      if (pi === undefined) throw new Error(`no such payment intent ${id}`);
      if (ok) {
        pi.status = 'succeeded';
        pi.amount_received = pi.amount;
      } else {
        pi.status = 'requires_payment_method';
        pi.last_payment_error = { code: 'card_declined', decline_code: 'insufficient_funds', message: 'The bank returned the payment: insufficient funds.' };
      }
      await emit(ok ? 'payment_intent.succeeded' : 'payment_intent.payment_failed', pi);
    },
    async settleDelayed(id: string, ok: boolean): Promise<void> {
      const s = session(id);
      s.payment_status = ok ? 'paid' : 'unpaid';
      await emit(ok ? 'checkout.session.async_payment_succeeded' : 'checkout.session.async_payment_failed', s);
    },
    async expire(id: string): Promise<void> {
      const s = session(id);
      s.status = 'expired';
      await emit('checkout.session.expired', s);
    },
    /** Refunds `cents` more of the session's payment (charge.refunded carries the cumulative amount); the refund's id. */
    async refund(id: string, cents: number): Promise<string> {
      const s = session(id);
      const amount = Math.min(cents, s.amount_total - refundedOf(s));
      const r: FakeRefund = { id: rand('re'), object: 'refund', amount, status: 'succeeded', payment_intent: s.payment_intent, charge: `ch_for_${s.payment_intent}`, currency: s.currency };
      refunds.push(r);
      await emit('charge.refunded', charge(s, refundedOf(s)));
      return r.id;
    },
    /** A refund fails after it was reported (the bank returned it): charge.refund.updated, and it no longer counts. */
    async failRefund(refundId: string): Promise<void> {
      const r = refunds.find((x) => x.id === refundId);
      if (r === undefined) throw new Error(`no such refund ${refundId}`);
      r.status = 'failed';
      r.failure_reason = 'expired_or_canceled_card';
      await emit('charge.refund.updated', r);
    },
    /** The payment's refunded total as Stripe would report it now. */
    refundedCents: (id: string): number => refundedOf(session(id)),
    /** A dispute, or with `inquiry` an inquiry (warning_needs_response), which moves no money unless it escalates. */
    async openDispute(id: string, inquiry = false): Promise<string> {
      const s = session(id);
      const disputeId = rand('dp');
      await emit('charge.dispute.created', { id: disputeId, object: 'dispute', amount: s.amount_total, charge: `ch_for_${s.payment_intent}`, payment_intent: s.payment_intent, status: inquiry ? 'warning_needs_response' : 'needs_response' });
      return disputeId;
    },
    /** Closes a dispute: won (true), lost (false), or an inquiry closed without a chargeback ('warning_closed'). */
    async closeDispute(id: string, disputeId: string, outcome: boolean | 'warning_closed'): Promise<void> {
      const s = session(id);
      const status = outcome === 'warning_closed' ? 'warning_closed' : outcome ? 'won' : 'lost';
      await emit('charge.dispute.closed', { id: disputeId, object: 'dispute', amount: s.amount_total, charge: `ch_for_${s.payment_intent}`, payment_intent: s.payment_intent, status });
    },
    /** Sends an already sent event again, exactly as it was (a redelivery, or a replay). */
    async redeliver(eventId: string): Promise<Delivery> {
      const d = deliveries.find((x) => (JSON.parse(x.body) as Json).id === eventId);
      if (d === undefined) throw new Error(`no such event ${eventId}`);
      const again: Delivery = { ...d, url: state.webhookUrl, attempts: [] };
      await deliver(again, 1);
      return again;
    },
    close: () => close(server),
  };
}

export type FakeStripe = Awaited<ReturnType<typeof startFakeStripe>>;
