// Which payment providers a Tollgate offers, from its environment: real ones when their keys are set
// (Kubernetes Secrets in the chart), or, for the local run, the test-mode fakes on loopback, clearly
// labelled on every page they serve and in the start-up banner.
import { randomBytes } from 'node:crypto';
import { btcpayProvider } from './btcpay-provider.js';
import { startFakeBtcpay } from './fakes/fake-btcpay.js';
import { startFakeStripe } from './fakes/fake-stripe.js';
import type { PaymentProvider } from './provider.js';
import { stripeProvider } from './stripe-provider.js';

type Env = Record<string, string | undefined>;

const set = (v: string | undefined): v is string => v !== undefined && v !== '';

/** The real providers configured in `env`; an incomplete configuration is an error at start, not at checkout. */
export function paymentProvidersFromEnv(env: Env): PaymentProvider[] {
  const providers: PaymentProvider[] = [];
  if (set(env.STRIPE_SECRET_KEY) || set(env.STRIPE_WEBHOOK_SECRET)) {
    if (!set(env.STRIPE_SECRET_KEY) || !set(env.STRIPE_WEBHOOK_SECRET)) throw new Error('Stripe needs both STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET');
    providers.push(stripeProvider({ secretKey: env.STRIPE_SECRET_KEY, webhookSecret: env.STRIPE_WEBHOOK_SECRET, ...(set(env.STRIPE_API_BASE) ? { apiBase: env.STRIPE_API_BASE } : {}) }));
  }
  const btc = [env.BTCPAY_URL, env.BTCPAY_API_KEY, env.BTCPAY_STORE_ID, env.BTCPAY_WEBHOOK_SECRET];
  if (btc.some(set)) {
    if (!btc.every(set)) throw new Error('BTCPay needs BTCPAY_URL, BTCPAY_API_KEY, BTCPAY_STORE_ID and BTCPAY_WEBHOOK_SECRET');
    providers.push(btcpayProvider({ url: env.BTCPAY_URL as string, apiKey: env.BTCPAY_API_KEY as string, storeId: env.BTCPAY_STORE_ID as string, webhookSecret: env.BTCPAY_WEBHOOK_SECRET as string }));
  }
  return providers;
}

export interface TestModePayments {
  providers: PaymentProvider[];
  stripeUrl: string;
  btcpayUrl: string;
  /** Where the fakes send their webhooks: the dashboard's address, once it listens. */
  deliverTo(dashboardUrl: string): void;
  close(): Promise<void>;
}

/** Both fakes on loopback with fresh secrets, and providers (the real clients) pointed at them. */
export async function startTestModePayments(host = '127.0.0.1'): Promise<TestModePayments> {
  const stripeSecret = `whsec_${randomBytes(16).toString('hex')}`;
  const btcpaySecret = randomBytes(16).toString('hex');
  const btcpayKey = randomBytes(16).toString('hex');
  const stripe = await startFakeStripe({ webhookSecret: stripeSecret, host });
  const btcpay = await startFakeBtcpay({ apiKey: btcpayKey, storeId: 'test-store', webhookSecret: btcpaySecret, host });
  return {
    providers: [
      stripeProvider({ secretKey: `sk_test_${randomBytes(12).toString('hex')}`, webhookSecret: stripeSecret, apiBase: stripe.url }),
      btcpayProvider({ url: btcpay.url, apiKey: btcpayKey, storeId: 'test-store', webhookSecret: btcpaySecret }),
    ],
    stripeUrl: stripe.url,
    btcpayUrl: btcpay.url,
    deliverTo(dashboardUrl) {
      stripe.setWebhookUrl(`${dashboardUrl}/webhooks/stripe`);
      btcpay.setWebhookUrl(`${dashboardUrl}/webhooks/btcpay`);
    },
    close: async () => {
      await stripe.close();
      await btcpay.close();
    },
  };
}
