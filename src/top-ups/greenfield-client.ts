// A small client for the part of BTCPay Server's Greenfield API that top-ups use: create an invoice,
// read it and its payments, list recent ones. Written here because BTCPay publishes no maintained Node
// client; it is four authenticated JSON calls over fetch.
export interface GreenfieldInvoice {
  id: string;
  status: 'New' | 'Processing' | 'Settled' | 'Expired' | 'Invalid';
  additionalStatus?: string;
  amount: string;
  currency: string;
  checkoutLink?: string;
  createdTime?: number;
  metadata?: Record<string, unknown>;
}

export interface GreenfieldPayment {
  paymentMethodId?: string;
  /** What arrived, in the payment method's currency. */
  totalPaid: string;
  /** USD per unit of that currency. */
  rate: string;
}

export class GreenfieldClient {
  constructor(
    private readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly storeId: string,
  ) {}

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const url = `${this.baseUrl.replace(/\/$/, '')}/api/v1/stores/${encodeURIComponent(this.storeId)}${path}`;
    const res = await fetch(url, {
      method,
      headers: { authorization: `token ${this.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`BTCPay ${method} ${path} answered ${res.status}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as T;
  }

  createInvoice(body: { amount: string; currency: string; metadata: Record<string, unknown>; checkout: { redirectURL: string; redirectAutomatically: boolean } }): Promise<GreenfieldInvoice> {
    return this.call('POST', '/invoices', body);
  }

  getInvoice(id: string): Promise<GreenfieldInvoice> {
    return this.call('GET', `/invoices/${encodeURIComponent(id)}`);
  }

  getPayments(id: string): Promise<GreenfieldPayment[]> {
    return this.call('GET', `/invoices/${encodeURIComponent(id)}/payment-methods`);
  }

  /** Invoices created since `since` (unix s). */
  listInvoices(since: number): Promise<GreenfieldInvoice[]> {
    return this.call('GET', `/invoices?startDate=${since}`);
  }
}
