// A stand-in for a BTCPay Server store's Greenfield API on loopback, for tests and the local run's
// labelled test mode: invoices in USD offered by two payment methods (on-chain and Lightning, both BTC
// at a fixed test rate), their payments, a hosted payment page that pays the exact amount, more or
// less, and webhooks signed as BTCPay signs them (BTCPay-Sig: sha256=<HMAC-SHA256 of the raw body>),
// retried until answered 2xx; redeliveries keep the original delivery's id. As Greenfield does, each
// method reports `paymentMethodPaid` (what arrived by it) and `totalPaid` (what arrived by every
// method, in its currency). Tests also void a settled invoice (Invalid), mark one settled by hand, and
// hold deliveries back to send them late, twice or in any order.
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { close, deliver, escape, listen, readBody, sendJson, sendPage, type Delivery } from './fake-http.js';

/** USD per BTC in test mode: 50,000.00, so one cent is exactly 20 satoshis and back. */
export const TEST_BTC_RATE = '50000.00';
const SATS_PER_CENT = 20n;

export interface FakeInvoice {
  id: string;
  status: 'New' | 'Processing' | 'Settled' | 'Expired' | 'Invalid';
  additionalStatus: 'None' | 'PaidPartial' | 'PaidOver';
  amount: string;
  currency: string;
  checkoutLink: string;
  createdTime: number;
  metadata: Record<string, unknown>;
  checkout: { redirectURL?: string };
  paidSats: bigint;
  /** What arrived by each payment method. */
  paidByMethod: Map<PaymentMethodId, bigint>;
}

export type PaymentMethodId = 'BTC-CHAIN' | 'BTC-LN';
const METHODS: readonly PaymentMethodId[] = ['BTC-CHAIN', 'BTC-LN'];

const btc = (sats: bigint): string => `${sats / 100_000_000n}.${String(sats % 100_000_000n).padStart(8, '0')}`;

function centsOf(amount: string): bigint {
  const [whole = '0', frac = ''] = amount.split('.');
  return BigInt(whole) * 100n + BigInt(frac.padEnd(2, '0').slice(0, 2));
}

export interface FakeBtcpayOptions {
  apiKey: string;
  storeId: string;
  webhookSecret: string;
  webhookUrl?: string;
  port?: number;
  host?: string;
}

export async function startFakeBtcpay(opts: FakeBtcpayOptions) {
  const invoices = new Map<string, FakeInvoice>();
  const deliveries: Delivery[] = [];
  const requests: Array<{ method: string; path: string }> = [];
  const held: Delivery[] = [];
  const state = { webhookUrl: opts.webhookUrl ?? '', hold: false };
  let base = '';

  const view = (i: FakeInvoice) => ({ id: i.id, status: i.status, additionalStatus: i.additionalStatus, amount: i.amount, currency: i.currency, checkoutLink: i.checkoutLink, createdTime: i.createdTime, metadata: i.metadata });

  async function emit(i: FakeInvoice, type: string): Promise<Delivery> {
    const deliveryId = randomBytes(10).toString('hex');
    const body = JSON.stringify({ deliveryId, webhookId: 'wh_test', originalDeliveryId: deliveryId, isRedelivery: false, type, timestamp: Math.floor(Date.now() / 1000), storeId: opts.storeId, invoiceId: i.id, metadata: i.metadata });
    const d: Delivery = { url: state.webhookUrl, body, headers: { 'btcpay-sig': `sha256=${createHmac('sha256', opts.webhookSecret).update(body).digest('hex')}` }, attempts: [] };
    deliveries.push(d);
    if (state.hold) held.push(d);
    else if (d.url !== '') await deliver(d);
    return d;
  }

  function invoice(id: string): FakeInvoice {
    const i = invoices.get(id);
    if (i === undefined) throw new Error(`no such invoice ${id}`);
    return i;
  }

  /** The payer sends `fraction` of the amount due (1 exact, above 1 over, below 1 under), by one method. */
  async function pay(id: string, fraction: 'exact' | 'over' | 'under', method: PaymentMethodId = 'BTC-CHAIN'): Promise<FakeInvoice> {
    const i = invoice(id);
    const due = centsOf(i.amount) * SATS_PER_CENT;
    return paySats(i, fraction === 'exact' ? due : fraction === 'over' ? due + due / 10n : due / 2n, method);
  }

  /** `sats` arrive by `method`; the invoice settles once everything due has arrived. */
  async function paySats(i: FakeInvoice, sats: bigint, method: PaymentMethodId): Promise<FakeInvoice> {
    const due = centsOf(i.amount) * SATS_PER_CENT;
    i.paidSats += sats;
    i.paidByMethod.set(method, (i.paidByMethod.get(method) ?? 0n) + sats);
    await emit(i, 'InvoiceReceivedPayment');
    if (i.paidSats >= due) {
      i.status = 'Processing';
      i.additionalStatus = i.paidSats > due ? 'PaidOver' : 'None';
      await emit(i, 'InvoiceProcessing');
      i.status = 'Settled';
      await emit(i, 'InvoiceSettled');
    } else i.additionalStatus = 'PaidPartial';
    return i;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    const method = req.method ?? 'GET';
    requests.push({ method, path: url.pathname });
    const api = /^\/api\/v1\/stores\/([^/]+)\/invoices(?:\/([^/]+))?(\/payment-methods)?$/.exec(url.pathname);
    if (api !== null) {
      if (req.headers.authorization !== `token ${opts.apiKey}`) return sendJson(res, 401, { code: 'unauthenticated', message: 'Authentication is required for accessing this endpoint' });
      if (api[1] !== opts.storeId) return sendJson(res, 404, { code: 'store-not-found', message: 'The store was not found' });
      if (method === 'POST' && api[2] === undefined) {
        const b = JSON.parse((await readBody(req)) || '{}') as { amount?: string; currency?: string; metadata?: Record<string, unknown>; checkout?: { redirectURL?: string } };
        if (typeof b.amount !== 'string' || !/^\d+(\.\d{1,2})?$/.test(b.amount)) return sendJson(res, 422, [{ path: 'amount', message: 'Amount should be a decimal string' }]);
        const id = randomBytes(9).toString('base64url');
        const i: FakeInvoice = { id, status: 'New', additionalStatus: 'None', amount: b.amount, currency: b.currency ?? 'USD', checkoutLink: `${base}/i/${id}`, createdTime: Math.floor(Date.now() / 1000), metadata: b.metadata ?? {}, checkout: b.checkout ?? {}, paidSats: 0n, paidByMethod: new Map() };
        invoices.set(id, i);
        return sendJson(res, 200, view(i));
      }
      if (method === 'GET' && api[2] === undefined) {
        const since = Number(url.searchParams.get('startDate') ?? 0);
        return sendJson(res, 200, [...invoices.values()].filter((i) => i.createdTime >= since).map(view));
      }
      const i = invoices.get(decodeURIComponent(api[2] ?? ''));
      if (i === undefined) return sendJson(res, 404, { code: 'invoice-not-found', message: 'The invoice was not found' });
      if (api[3] !== undefined) {
        const due = centsOf(i.amount) * SATS_PER_CENT;
        return sendJson(
          res,
          200,
          METHODS.map((m) => ({
            paymentMethodId: m,
            currency: 'BTC',
            rate: TEST_BTC_RATE,
            amount: btc(due),
            paymentMethodPaid: btc(i.paidByMethod.get(m) ?? 0n),
            // Greenfield: every method's payments, in this method's currency.
            totalPaid: btc(i.paidSats),
            due: `${i.paidSats > due ? '-' : ''}${btc(i.paidSats > due ? i.paidSats - due : due - i.paidSats)}`,
            payments: (i.paidByMethod.get(m) ?? 0n) > 0n ? [{ id: `${i.id}-${m}`, value: btc(i.paidByMethod.get(m) ?? 0n), status: 'Settled' }] : [],
          })),
        );
      }
      return sendJson(res, 200, view(i));
    }
    const page = /^\/i\/([^/]+)$/.exec(url.pathname);
    if (page !== null) {
      const i = invoices.get(decodeURIComponent(page[1] ?? ''));
      if (i === undefined) return sendPage(res, 'Not found', '<h1>No such invoice</h1>');
      if (method === 'GET') {
        const sats = centsOf(i.amount) * SATS_PER_CENT;
        return sendPage(
          res,
          'Pay · Fake BTCPay',
          `<h1>Pay ${escape(i.amount)} ${escape(i.currency)}</h1><p>${btc(sats)} BTC at ${TEST_BTC_RATE} USD (test rate)</p>
<form method="post"><button name="pay" value="exact">Send ${btc(sats)} BTC</button><button name="pay" value="over">Send 10% more</button><button name="pay" value="under">Send half</button></form>`,
        );
      }
      const choice = new URLSearchParams(await readBody(req)).get('pay');
      await pay(i.id, choice === 'over' ? 'over' : choice === 'under' ? 'under' : 'exact');
      res.writeHead(303, { location: i.checkout.redirectURL ?? '/' });
      return void res.end();
    }
    sendJson(res, 404, { code: 'not-found', message: `No route ${method} ${url.pathname}` });
  }

  const { server, url } = await listen(handle, opts.port ?? 0, opts.host);
  base = url;
  return {
    url,
    invoices,
    deliveries,
    requests,
    setWebhookUrl: (u: string): void => {
      state.webhookUrl = u;
    },
    pay,
    /** The invoice runs out of time: Expired (with PaidPartial when something arrived). */
    async expire(id: string): Promise<void> {
      const i = invoice(id);
      i.status = 'Expired';
      await emit(i, 'InvoiceExpired');
    },
    /** Cents more arrive by one method (a payment split across on-chain and Lightning). */
    payCents: (id: string, cents: number, method: PaymentMethodId): Promise<FakeInvoice> => paySats(invoice(id), BigInt(cents) * SATS_PER_CENT, method),
    /** The merchant marks the invoice settled by hand, whatever arrived. */
    async markSettled(id: string): Promise<void> {
      const i = invoice(id);
      i.status = 'Settled';
      i.additionalStatus = i.paidSats < centsOf(i.amount) * SATS_PER_CENT ? 'PaidPartial' : 'None';
      await emit(i, 'InvoiceSettled');
    },
    /** A settled payment is voided (a 0-confirmation double spend): the invoice turns Invalid. */
    async invalidate(id: string): Promise<void> {
      const i = invoice(id);
      i.status = 'Invalid';
      await emit(i, 'InvoiceInvalid');
    },
    /** Hold deliveries instead of sending them; takeHeld hands them to the caller to send in any order. */
    holdDeliveries: (on: boolean): void => {
      state.hold = on;
    },
    takeHeld: (): Delivery[] => held.splice(0),
    /** Sends one delivery now, once, exactly as it was (a late, repeated or reordered delivery). */
    send: (d: Delivery): Promise<boolean> => deliver({ ...d, url: state.webhookUrl, attempts: [] }, 1),
    /** Sends a delivery again with a new delivery id and the original's (as BTCPay's redeliver does). */
    async redeliver(d: Delivery): Promise<Delivery> {
      const parsed = JSON.parse(d.body) as Record<string, unknown>;
      const body = JSON.stringify({ ...parsed, deliveryId: randomBytes(10).toString('hex'), isRedelivery: true, timestamp: Math.floor(Date.now() / 1000) });
      const again: Delivery = { url: state.webhookUrl, body, headers: { 'btcpay-sig': `sha256=${createHmac('sha256', opts.webhookSecret).update(body).digest('hex')}` }, attempts: [] };
      await deliver(again, 1);
      return again;
    },
    close: () => close(server),
  };
}

export type FakeBtcpay = Awaited<ReturnType<typeof startFakeBtcpay>>;
