// The payment providers Tollgate knows, one line each. A provider is its module (name, label, webhook
// path, settings from the environment, optional test-mode fake: top-ups/provider-module.ts) plus its
// line here; the webhook routes, the configuration, the test mode and the pages are derived from this.
import { checkedRegistry, type ProviderModule } from '../provider-module.js';
import { btcpayModule } from './btcpay.js';
import { stripeModule } from './stripe.js';

export const PROVIDERS: readonly ProviderModule[] = checkedRegistry([stripeModule, btcpayModule]);
