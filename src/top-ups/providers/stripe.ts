// Card top-ups through Stripe Checkout with the official client: a Checkout Session in payment mode
// with the credit and the service fee as separate line items, created under an idempotency key per
// top-up; webhooks verified by the client's own constructEvent (HMAC-SHA256 of the raw body with a
// timestamp tolerance). Credited on checkout.session.completed when paid and on
// async_payment_succeeded; async_payment_failed and expired only change the top-up's state. Refund
// events are signals: the refunded total is read back from Stripe's refunds (a refund can fail after
// charge.refunded reported it, and events come in any order); a dispute's outcome is final, and only
// `lost` keeps the credit (an inquiry closed as warning_closed moved no money).
import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { startFakeStripe } from '../fakes/fake-stripe.js';
import { envSettings, type ProviderModule } from '../provider-module.js';
import type { CheckoutRequest, PaymentFact, PaymentProvider, ProviderEvent, SavedCards } from '../provider.js';
import { describeUnpaidCharge, WebhookRejected } from '../provider.js';

const NAME = 'stripe';
const LABEL = 'Card';

export interface StripeSettings {
  secretKey: string;
  webhookSecret: string;
  /** Another API address (the test-mode fake): https://api.stripe.com when unset. */
  apiBase?: string;
  /** Seconds a webhook's signed timestamp may be old. */
  toleranceSeconds?: number;
}

const HANDLED = [
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'checkout.session.async_payment_failed',
  'checkout.session.expired',
  'charge.refunded',
  'charge.refund.updated',
  'charge.dispute.created',
  'charge.dispute.closed',
  'payment_intent.succeeded',
  'payment_intent.payment_failed',
] as const;

const idOf = (v: string | { id: string } | null | undefined): string | undefined => (v === null || v === undefined ? undefined : typeof v === 'string' ? v : v.id);

function sessionFact(s: Stripe.Checkout.Session, type: string): PaymentFact {
  if (type === 'checkout.session.expired' || s.status === 'expired') return { kind: 'expired' };
  if (type === 'checkout.session.async_payment_failed') return { kind: 'failed', reason: 'the payment method failed after checkout' };
  if (s.payment_status !== 'paid') return { kind: 'processing' };
  const paymentRef = idOf(s.payment_intent);
  return { kind: 'paid', paidCents: s.amount_total ?? 0, currency: s.currency ?? '', mode: s.mode, ...(paymentRef === undefined ? {} : { paymentRef }) };
}

/** Our view of one Stripe event; undefined for events that say nothing about a top-up. */
function toProviderEvent(e: Stripe.Event): ProviderEvent | undefined {
  const type = e.type as string;
  if (type.startsWith('checkout.session.')) {
    const s = e.data.object as Stripe.Checkout.Session;
    return { eventId: e.id, type, ref: { checkout: s.id }, fact: sessionFact(s, type) };
  }
  if (type === 'payment_intent.succeeded' || type === 'payment_intent.payment_failed') {
    // Only an automatic top-up's own payment: a checkout's payment is followed through its session.
    const pi = e.data.object as Stripe.PaymentIntent;
    const topUp = pi.metadata?.top_up_id;
    if (pi.metadata?.tollgate_auto !== '1' || topUp === undefined || topUp === '') return undefined;
    const error = pi.last_payment_error;
    const fact: PaymentFact =
      type === 'payment_intent.succeeded'
        ? { kind: 'paid', paidCents: pi.amount_received, currency: pi.currency, paymentRef: pi.id }
        : { kind: 'failed', reason: describeUnpaidCharge(error?.code === 'authentication_required' ? 'authentication' : 'declined', error?.message ?? 'no reason given') };
    return { eventId: e.id, type, ref: { topUp }, fact };
  }
  if (type === 'charge.refunded') {
    const c = e.data.object as Stripe.Charge;
    const payment = idOf(c.payment_intent);
    return payment === undefined ? undefined : { eventId: e.id, type, ref: { payment }, fact: { kind: 'refunded', refundedCents: c.amount_refunded } };
  }
  if (type === 'charge.refund.updated') {
    // A refund changed state (failed, cancelled): the total is read back from Stripe when applied.
    const r = e.data.object as Stripe.Refund;
    const payment = idOf(r.payment_intent);
    const counts = r.status !== 'failed' && r.status !== 'canceled';
    return payment === undefined ? undefined : { eventId: e.id, type, ref: { payment }, fact: { kind: 'refunded', refundedCents: counts ? r.amount : 0 } };
  }
  if (type === 'charge.dispute.created' || type === 'charge.dispute.closed') {
    const d = e.data.object as Stripe.Dispute;
    const payment = idOf(d.payment_intent);
    if (payment === undefined) return undefined;
    const fact: PaymentFact =
      type === 'charge.dispute.created'
        ? { kind: 'dispute_opened', disputeId: d.id }
        : { kind: 'dispute_closed', disputeId: d.id, won: d.status !== 'lost', ...(d.status === 'warning_closed' ? { inquiry: true } : {}) };
    return { eventId: e.id, type, ref: { payment }, fact };
  }
  return undefined;
}

/** The official client, pointed at `apiBase` when set (the test-mode fake). */
function stripeClient(settings: StripeSettings): Stripe {
  const base = new URL(settings.apiBase ?? 'https://api.stripe.com');
  return new Stripe(settings.secretKey, {
    host: base.hostname,
    port: base.port === '' ? (base.protocol === 'http:' ? 80 : 443) : Number(base.port),
    protocol: base.protocol === 'http:' ? 'http' : 'https',
    maxNetworkRetries: 2,
    telemetry: false,
  });
}

/** Starting a Checkout Session for a quote, and closing one the payer left. */
function checkouts(stripe: Stripe): Pick<PaymentProvider, 'startCheckout' | 'cancelCheckout'> {
  return {
    async startCheckout(req: CheckoutRequest) {
      const line = (name: string, cents: number) => ({ quantity: 1, price_data: { currency: 'usd', unit_amount: cents, product_data: { name } } });
      const session = await stripe.checkout.sessions.create(
        {
          mode: 'payment',
          line_items: [line('Tollgate credit', req.creditCents), line('Service fee (3.5% + 0.30)', req.feeCents)],
          client_reference_id: req.topUpId,
          metadata: { top_up_id: req.topUpId, account_id: req.accountId },
          success_url: req.successUrl,
          cancel_url: req.cancelUrl,
        },
        { idempotencyKey: `tollgate-top-up-${req.topUpId}` },
      );
      if (session.url === null || session.url === undefined) throw new Error('Stripe returned a checkout session without a URL');
      return { checkoutRef: session.id, checkoutUrl: session.url };
    },
    async cancelCheckout(checkoutRef) {
      const s = await stripe.checkout.sessions.retrieve(checkoutRef);
      if (s.status === 'expired') return true;
      if (s.status === 'complete') return false;
      try {
        await stripe.checkout.sessions.expire(checkoutRef);
        return true;
      } catch (err) {
        // Paid in another tab between the two calls: Stripe refuses to expire a completed session.
        if ((await stripe.checkout.sessions.retrieve(checkoutRef)).status === 'complete') return false;
        throw err;
      }
    },
  };
}

/** Events: a webhook checked by the client's constructEvent, and the recent ones listed (the catch-up). */
function events(stripe: Stripe, settings: StripeSettings): Pick<PaymentProvider, 'verifyWebhook' | 'recentEvents'> {
  const tolerance = settings.toleranceSeconds ?? 300;
  return {
    async verifyWebhook(rawBody, header) {
      const signature = header('stripe-signature');
      if (signature === undefined) throw new WebhookRejected('missing Stripe-Signature header');
      let event: Stripe.Event;
      try {
        event = stripe.webhooks.constructEvent(rawBody, signature, settings.webhookSecret, tolerance);
      } catch (err) {
        throw new WebhookRejected(`Stripe signature check failed: ${err instanceof Error ? err.message : String(err)}`);
      }
      const mine = toProviderEvent(event);
      return mine === undefined ? [] : [mine];
    },
    async recentEvents(since) {
      const found: ProviderEvent[] = [];
      for await (const e of stripe.events.list({ created: { gte: since }, types: [...HANDLED], limit: 100 })) {
        const mine = toProviderEvent(e);
        if (mine !== undefined) found.push(mine);
      }
      // Listed newest first.
      return found.reverse();
    },
  };
}

/** A payment's state now, as Stripe says it: the session, its refunded total, the session of a payment. */
function paymentState(stripe: Stripe): Pick<PaymentProvider, 'currentFact' | 'refundedCents' | 'checkoutOfPayment'> {
  return {
    async currentFact(checkoutRef) {
      const s = await stripe.checkout.sessions.retrieve(checkoutRef);
      return sessionFact(s, s.status === 'expired' ? 'checkout.session.expired' : 'checkout.session.completed');
    },
    async refundedCents(paymentRef) {
      let cents = 0;
      for await (const r of stripe.refunds.list({ payment_intent: paymentRef, limit: 100 })) if (r.status !== 'failed' && r.status !== 'canceled') cents += r.amount;
      return cents;
    },
    async checkoutOfPayment(paymentRef) {
      const found = await stripe.checkout.sessions.list({ payment_intent: paymentRef, limit: 1 });
      return found.data[0]?.id;
    },
  };
}

/** A card saved through Checkout in setup mode, and charged off-session (automatic top-ups). */
function savedCards(stripe: Stripe): SavedCards {
  return {
    async startCardSetup(req) {
      const customerRef =
        req.customerRef ?? (await stripe.customers.create({ metadata: { account_id: req.accountId } }, { idempotencyKey: `tollgate-customer-${req.accountId}` })).id;
      const session = await stripe.checkout.sessions.create({
        mode: 'setup',
        currency: 'usd',
        customer: customerRef,
        success_url: req.successUrl,
        cancel_url: req.cancelUrl,
        metadata: { account_id: req.accountId, purpose: 'automatic top-ups' },
      });
      if (session.url === null || session.url === undefined) throw new Error('Stripe returned a setup session without a URL');
      return { customerRef, checkoutRef: session.id, checkoutUrl: session.url };
    },
    async savedCard(checkoutRef) {
      const s = await stripe.checkout.sessions.retrieve(checkoutRef, { expand: ['setup_intent'] });
      if (s.status !== 'complete') return undefined;
      const intent = typeof s.setup_intent === 'string' ? await stripe.setupIntents.retrieve(s.setup_intent) : s.setup_intent;
      const pm = idOf(intent?.payment_method);
      const customer = idOf(s.customer);
      if (pm === undefined || customer === undefined) return undefined;
      const method = await stripe.paymentMethods.retrieve(pm);
      return { customerRef: customer, paymentMethodRef: pm, label: method.card === undefined || method.card === null ? 'saved card' : `${method.card.brand} ending ${method.card.last4}` };
    },
    async chargeSavedCard(req) {
      try {
        const pi = await stripe.paymentIntents.create(
          {
            amount: req.totalCents,
            currency: 'usd',
            customer: req.card.customerRef,
            payment_method: req.card.paymentMethodRef,
            off_session: true,
            confirm: true,
            description: 'Tollgate automatic top-up',
            metadata: { top_up_id: req.topUpId, account_id: req.accountId, tollgate_auto: '1' },
          },
          { idempotencyKey: `tollgate-auto-top-up-${req.topUpId}` },
        );
        return { ok: true, paymentRef: pi.id };
      } catch (err) {
        // A decline, or a bank that wants the holder present (authentication_required): no charge.
        if (err instanceof Stripe.errors.StripeCardError) return { ok: false, why: err.code === 'authentication_required' ? 'authentication' : 'declined', message: err.message };
        // Refused as asked (a card no longer attached, a key reused with other parameters): sending it
        // again would be refused again. Anything else (a 5xx, a timeout) leaves the outcome unknown.
        if (err instanceof Stripe.errors.StripeInvalidRequestError || err instanceof Stripe.errors.StripeIdempotencyError) return { ok: false, why: 'refused', message: err.message };
        throw err;
      }
    },
  };
}

export function stripeProvider(settings: StripeSettings): PaymentProvider {
  const stripe = stripeClient(settings);
  return {
    name: NAME,
    label: LABEL,
    checkoutOrigin: settings.apiBase === undefined ? 'https://checkout.stripe.com' : new URL(settings.apiBase).origin,
    ...checkouts(stripe),
    ...events(stripe, settings),
    ...paymentState(stripe),
    savedCards: savedCards(stripe),
  };
}

/** Stripe in the registry: STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET (STRIPE_API_BASE for a test double). */
export const stripeModule: ProviderModule = {
  name: NAME,
  label: LABEL,
  title: 'Stripe',
  webhookPath: '/webhooks/stripe',
  fromEnv(env) {
    const s = envSettings(env, 'Stripe', ['STRIPE_SECRET_KEY', 'STRIPE_WEBHOOK_SECRET']);
    if (s === undefined) return undefined;
    const apiBase = env.STRIPE_API_BASE;
    return stripeProvider({ secretKey: s.STRIPE_SECRET_KEY, webhookSecret: s.STRIPE_WEBHOOK_SECRET, ...(apiBase === undefined || apiBase === '' ? {} : { apiBase }) });
  },
  async startTestMode(host) {
    const webhookSecret = `whsec_${randomBytes(16).toString('hex')}`;
    const fake = await startFakeStripe({ webhookSecret, host });
    return {
      provider: stripeProvider({ secretKey: `sk_test_${randomBytes(12).toString('hex')}`, webhookSecret, apiBase: fake.url }),
      url: fake.url,
      deliverTo: (webhookUrl) => fake.setWebhookUrl(webhookUrl),
      close: () => fake.close(),
    };
  },
};
