// One interface for every way to pay: a provider starts a hosted checkout for a stored quote, turns a
// webhook into a verified event (signature checked on the raw bytes before anything is parsed), and can
// be asked for a payment's current state (a re-check, and BTCPay's every event: its amounts are re-read,
// never taken from the webhook) and for its recent events (the catch-up after an outage). Providers do
// not promise order, so every fact is either final (a dispute's outcome) or a reading of the provider's
// current truth (the refunded total, an invoice's state), never a step relative to an earlier event.
import type { Cents } from './quote.js';

/** A registered provider's name (providers/index.ts lists them): 'stripe', 'btcpay'. */
export type ProviderName = string;

/** What happened to a payment, in our terms. */
export type PaymentFact =
  /** Paid in full: credit the quote. */
  | { kind: 'paid'; paidCents: Cents; currency: string; paymentRef?: string; mode?: string; overpaidCents?: Cents }
  /** Started but not final (a delayed card method, a crypto payment awaiting confirmations, or part of a crypto invoice paid). */
  | { kind: 'processing'; paidCents?: Cents }
  | { kind: 'failed'; reason: string }
  | { kind: 'expired' }
  /** Less than the total arrived (crypto): nothing is credited. */
  | { kind: 'underpaid'; paidCents: Cents }
  /**
   * The payer's refunds changed: `refundedCents` in all as the event reported it (cumulative). A provider
   * that can say the refunded total now (refundedCents below) is asked instead, since a refund can fail
   * after it was reported and events arrive in any order.
   */
  | { kind: 'refunded'; refundedCents: Cents }
  | { kind: 'dispute_opened'; disputeId: string }
  /** `inquiry`: it was an inquiry closed without a chargeback (no money moved); it releases like a win. */
  | { kind: 'dispute_closed'; disputeId: string; won: boolean; inquiry?: boolean }
  /** A payment that counted was voided afterwards (a crypto invoice turned Invalid after Settled). */
  | { kind: 'invalidated'; reason: string; paidCents?: Cents };

export interface ProviderEvent {
  /** The provider's event id: a repeat of it is a no-op. */
  eventId: string;
  type: string;
  /**
   * Which payment: the checkout session / invoice id, (refunds, disputes) the payment id, or (an
   * automatic top-up's off-session payment, made with the top-up's id) the top-up itself.
   */
  ref: { checkout: string } | { payment: string } | { topUp: string };
  fact: PaymentFact;
}

export interface CheckoutRequest {
  topUpId: string;
  accountId: string;
  creditCents: Cents;
  feeCents: Cents;
  totalCents: Cents;
  successUrl: string;
  cancelUrl: string;
}

/** A card saved with the provider for automatic top-ups. */
export interface SavedCard {
  customerRef: string;
  paymentMethodRef: string;
  /** For pages: "visa ending 4242". */
  label: string;
}

/**
 * Why an off-session charge was not paid: the card was declined, the bank wants the holder present, or
 * the provider refused the request itself (a card no longer attached, say). Each is final for that
 * top-up; a call that got no answer is none of them (the provider's call throws, and it is retried).
 */
export type UnpaidCharge = 'declined' | 'authentication' | 'refused';

/** An off-session charge of a saved card: made (the payment's id), or not paid (why, and the provider's words). */
export type OffSessionCharge = { ok: true; paymentRef: string } | { ok: false; why: UnpaidCharge; message: string };

/** An unpaid charge in the holder's words: the same whether the charge's answer or its event said it first. */
export function describeUnpaidCharge(why: UnpaidCharge, message: string): string {
  switch (why) {
    case 'authentication':
      return 'your bank asked to confirm the payment with you present';
    case 'declined':
      return `the card was declined (${message})`;
    case 'refused':
      return `the payment provider refused the charge (${message})`;
  }
}

/** What a provider that keeps cards offers: saving one through its hosted page, and charging it later. */
export interface SavedCards {
  startCardSetup(req: { accountId: string; customerRef: string | undefined; successUrl: string; cancelUrl: string }): Promise<{ customerRef: string; checkoutRef: string; checkoutUrl: string }>;
  /** The card a finished setup saved; undefined while it is not finished. */
  savedCard(checkoutRef: string): Promise<SavedCard | undefined>;
  /**
   * Charges the card without the holder present, once per top-up (its id is the idempotency key: a
   * retry must send the same card and amount). Throws when the answer is unknown (a timeout, a 5xx).
   */
  chargeSavedCard(req: { topUpId: string; accountId: string; card: SavedCard; totalCents: Cents }): Promise<OffSessionCharge>;
}

export interface PaymentProvider {
  readonly name: ProviderName;
  /** A human name for pages: "Card", "Crypto". */
  readonly label: string;
  /** Where the payer's browser is sent; its origin is allowed as a form target by the dashboard. */
  readonly checkoutOrigin: string;
  startCheckout(req: CheckoutRequest): Promise<{ checkoutRef: string; checkoutUrl: string }>;
  /** Throws WebhookRejected for anything not provably from the provider (or too old). */
  verifyWebhook(rawBody: Buffer, header: (name: string) => string | undefined): Promise<ProviderEvent[]>;
  /** The payment's state now, asked of the provider. */
  currentFact(checkoutRef: string): Promise<PaymentFact>;
  /** Events since `since` (unix s), oldest first. */
  recentEvents(since: number): Promise<ProviderEvent[]>;
  /** The payment's refunded total now (cents, refunds that failed or were cancelled left out). */
  refundedCents?(paymentRef: string): Promise<Cents>;
  /** The checkout that made this payment, for an event that arrived before the payment's own. */
  checkoutOfPayment?(paymentRef: string): Promise<string | undefined>;
  /** Closes a checkout the payer left, so it can no longer be paid; false when it was paid meanwhile. */
  cancelCheckout?(checkoutRef: string): Promise<boolean>;
  /** Saved cards and off-session charges (automatic top-ups), where the provider has them. */
  readonly savedCards?: SavedCards;
}

/** A webhook we will not act on: answered 400 (the provider shows it to its operator), nothing done. */
export class WebhookRejected extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookRejected';
  }
}
