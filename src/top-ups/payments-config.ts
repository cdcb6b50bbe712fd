// Which payment providers a Tollgate offers, from its environment: real ones when their settings are
// set (Kubernetes Secrets in the chart), or, for the local run, the test-mode fakes on loopback, clearly
// labelled on every page they serve and in the start-up banner. Both come from the registry
// (providers/index.ts): each provider's module reads its own settings and starts its own fake.
import { checkedRegistry, type Env, type ProviderModule, type TestModeProvider } from './provider-module.js';
import type { PaymentProvider } from './provider.js';
import { PROVIDERS } from './providers/index.js';

/** The real providers configured in `env`; an incomplete configuration is an error at start, not at checkout. */
export function paymentProvidersFromEnv(env: Env, registry: readonly ProviderModule[] = PROVIDERS): PaymentProvider[] {
  return checkedRegistry(registry).flatMap((m) => {
    const p = m.fromEnv(env);
    return p === undefined ? [] : [p];
  });
}

export interface TestModePayments {
  providers: PaymentProvider[];
  /** Each fake's hosted pages, for the banner: "Stripe" at its address. */
  fakes: Array<{ title: string; url: string }>;
  /** Where the fakes send their webhooks: the dashboard's address (each to its provider's path), once it listens. */
  deliverTo(dashboardUrl: string): void;
  close(): Promise<void>;
}

/** Every registered provider's fake on loopback with fresh secrets, and the real clients pointed at them. */
export async function startTestModePayments(host = '127.0.0.1', registry: readonly ProviderModule[] = PROVIDERS): Promise<TestModePayments> {
  const started: Array<{ module: ProviderModule; fake: TestModeProvider }> = [];
  try {
    for (const module of checkedRegistry(registry)) if (module.startTestMode !== undefined) started.push({ module, fake: await module.startTestMode(host) });
  } catch (err) {
    await Promise.all(started.map((s) => s.fake.close()));
    throw err;
  }
  return {
    providers: started.map((s) => s.fake.provider),
    fakes: started.map((s) => ({ title: s.module.title, url: s.fake.url })),
    deliverTo(dashboardUrl) {
      const base = dashboardUrl.replace(/\/$/, '');
      for (const s of started) s.fake.deliverTo(`${base}${s.module.webhookPath}`);
    },
    close: async () => {
      for (const s of started) await s.fake.close();
    },
  };
}
