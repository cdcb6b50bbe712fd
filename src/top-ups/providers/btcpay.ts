// Crypto top-ups through BTCPay Server: an invoice in USD for the quote's total; webhooks verified by
// their BTCPay-Sig (HMAC-SHA256 of the raw body) and the delivery's timestamp, and then only used as a
// signal: the invoice and its payments are read back from the server, never taken from the webhook.
// One rule for what arrives: the quote is credited when the invoice is settled with at least its total
// paid (an over-payment credits the quote, the excess is noted on the top-up's timeline for support to
// return); anything less (an invoice that expired or went invalid part-paid) credits nothing and is
// noted. What arrived is summed per payment method (each method's own paid amount at its rate), never
// from `totalPaid`, which Greenfield reports as the total over all methods in each method's currency.
// An invoice that turns Invalid after it was Settled (a double-spent payment) takes the credit back.
// Redeliveries share the original delivery's id, so a replay is a no-op.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { startFakeBtcpay } from '../fakes/fake-btcpay.js';
import { envSettings, type ProviderModule } from '../provider-module.js';
import { centsToDecimal, sumOfProductsToCents, usdToCents } from '../decimal.js';
import { GreenfieldClient, type GreenfieldInvoice, type GreenfieldPaymentMethod } from '../greenfield-client.js';
import type { CheckoutRequest, PaymentFact, PaymentProvider, ProviderEvent } from '../provider.js';
import { WebhookRejected } from '../provider.js';

const NAME = 'btcpay';
const LABEL = 'Crypto';

export interface BtcpaySettings {
  url: string;
  apiKey: string;
  storeId: string;
  webhookSecret: string;
  toleranceSeconds?: number;
  now?: () => number;
}

interface Delivery {
  deliveryId?: string;
  originalDeliveryId?: string;
  type?: string;
  timestamp?: number;
  invoiceId?: string;
}

/** USD cents that arrived, over every payment method: each method's own paid amount at its own rate. */
export function paidByMethods(methods: readonly GreenfieldPaymentMethod[]): number {
  const pairs: Array<[string, string]> = [];
  for (const m of methods) {
    if (typeof m.paymentMethodPaid === 'string') pairs.push([m.paymentMethodPaid, m.rate]);
    // Older servers: the method's own payments, less the invalid ones.
    else for (const p of m.payments ?? []) if (typeof p.value === 'string' && p.status !== 'Invalid') pairs.push([p.value, m.rate]);
  }
  return sumOfProductsToCents(pairs) ?? 0;
}

export function btcpayProvider(settings: BtcpaySettings): PaymentProvider {
  const client = new GreenfieldClient(settings.url, settings.apiKey, settings.storeId);
  const tolerance = settings.toleranceSeconds ?? 300;
  const now = settings.now ?? Date.now;

  async function factOf(invoice: GreenfieldInvoice): Promise<PaymentFact> {
    const paidCents = paidByMethods(await client.getPaymentMethods(invoice.id));
    const totalCents = usdToCents(invoice.amount) ?? 0;
    if (invoice.status === 'New' || invoice.status === 'Processing') return paidCents > 0 ? { kind: 'processing', paidCents } : { kind: 'processing' };
    if (invoice.status === 'Settled' && paidCents >= totalCents) return { kind: 'paid', paidCents: totalCents, currency: invoice.currency.toLowerCase(), ...(paidCents > totalCents ? { overpaidCents: paidCents - totalCents } : {}) };
    if (invoice.status === 'Invalid') return { kind: 'invalidated', reason: `the invoice turned invalid${invoice.additionalStatus !== undefined && invoice.additionalStatus !== 'None' ? ` (${invoice.additionalStatus})` : ''}`, ...(paidCents > 0 ? { paidCents } : {}) };
    if (paidCents > 0) return { kind: 'underpaid', paidCents };
    return invoice.status === 'Expired' ? { kind: 'expired' } : { kind: 'failed', reason: `invoice ${invoice.status.toLowerCase()}` };
  }

  return {
    name: NAME,
    label: LABEL,
    checkoutOrigin: new URL(settings.url).origin,
    async startCheckout(req: CheckoutRequest) {
      const invoice = await client.createInvoice({
        amount: centsToDecimal(req.totalCents),
        currency: 'USD',
        metadata: { orderId: req.topUpId, topUpId: req.topUpId, accountId: req.accountId },
        checkout: { redirectURL: req.successUrl, redirectAutomatically: true },
      });
      if (invoice.checkoutLink === undefined) throw new Error('BTCPay returned an invoice without a checkout link');
      return { checkoutRef: invoice.id, checkoutUrl: invoice.checkoutLink };
    },
    async verifyWebhook(rawBody, header) {
      const sig = header('btcpay-sig') ?? '';
      const expected = `sha256=${createHmac('sha256', settings.webhookSecret).update(rawBody).digest('hex')}`;
      const a = Buffer.from(sig);
      const b = Buffer.from(expected);
      if (a.length !== b.length || !timingSafeEqual(a, b)) throw new WebhookRejected('BTCPay-Sig does not match the body');
      let d: Delivery;
      try {
        d = JSON.parse(rawBody.toString('utf8')) as Delivery;
      } catch {
        throw new WebhookRejected('the webhook body is not JSON');
      }
      if (typeof d.timestamp !== 'number' || Math.abs(now() / 1000 - d.timestamp) > tolerance) throw new WebhookRejected('the delivery is too old (or its timestamp is missing)');
      const id = d.originalDeliveryId ?? d.deliveryId;
      if (typeof id !== 'string' || typeof d.invoiceId !== 'string') return [];
      if (!(d.type ?? '').startsWith('Invoice')) return [];
      // The webhook says only "look at this invoice": its state and amounts come from the server.
      const fact = await factOf(await client.getInvoice(d.invoiceId));
      return [{ eventId: id, type: d.type ?? '', ref: { checkout: d.invoiceId }, fact }];
    },
    async currentFact(checkoutRef) {
      return factOf(await client.getInvoice(checkoutRef));
    },
    async recentEvents(since) {
      const found: ProviderEvent[] = [];
      for (const invoice of await client.listInvoices(since)) {
        const fact = await factOf(invoice);
        found.push({ eventId: `invoice:${invoice.id}:${invoice.status}:${fact.kind}`, type: `Invoice${invoice.status}`, ref: { checkout: invoice.id }, fact });
      }
      return found;
    },
  };
}

/** BTCPay Server in the registry: BTCPAY_URL, BTCPAY_API_KEY, BTCPAY_STORE_ID and BTCPAY_WEBHOOK_SECRET. */
export const btcpayModule: ProviderModule = {
  name: NAME,
  label: LABEL,
  title: 'BTCPay',
  webhookPath: '/webhooks/btcpay',
  fromEnv(env) {
    const s = envSettings(env, 'BTCPay', ['BTCPAY_URL', 'BTCPAY_API_KEY', 'BTCPAY_STORE_ID', 'BTCPAY_WEBHOOK_SECRET']);
    return s === undefined ? undefined : btcpayProvider({ url: s.BTCPAY_URL, apiKey: s.BTCPAY_API_KEY, storeId: s.BTCPAY_STORE_ID, webhookSecret: s.BTCPAY_WEBHOOK_SECRET });
  },
  async startTestMode(host) {
    const webhookSecret = randomBytes(16).toString('hex');
    const apiKey = randomBytes(16).toString('hex');
    const fake = await startFakeBtcpay({ apiKey, storeId: 'test-store', webhookSecret, host });
    return {
      provider: btcpayProvider({ url: fake.url, apiKey, storeId: 'test-store', webhookSecret }),
      url: fake.url,
      deliverTo: (webhookUrl) => fake.setWebhookUrl(webhookUrl),
      close: () => fake.close(),
    };
  },
};
