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

/** One payment method of an invoice (on-chain, Lightning, ...) as Greenfield reports it. */
export interface GreenfieldPaymentMethod {
  paymentMethodId?: string;
  /** What arrived by this method, in its currency. */
  paymentMethodPaid?: string;
  /**
   * What arrived by ALL methods, converted to this method's currency: summing it over methods counts
   * one payment once per method offered, so it is never used for amounts.
   */
  totalPaid?: string;
  /** USD per unit of that currency. */
  rate: string;
  payments?: Array<{ id?: string; value?: string; status?: string }>;
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

  getPaymentMethods(id: string): Promise<GreenfieldPaymentMethod[]> {
    return this.call('GET', `/invoices/${encodeURIComponent(id)}/payment-methods`);
  }

  /** Invoices created since `since` (unix s). */
  listInvoices(since: number): Promise<GreenfieldInvoice[]> {
    return this.call('GET', `/invoices?startDate=${since}`);
  }
}
