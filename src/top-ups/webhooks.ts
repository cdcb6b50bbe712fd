// The providers' webhook endpoints, one per registered provider at the path its module declares
// (POST /webhooks/stripe, /webhooks/btcpay). The raw bytes are read and handed to the provider's check
// (its verifyWebhook) before anything is parsed; the answer is 2xx only once the event
// is committed (or known already), 400 for what is not provably the provider's (it is not sent again),
// and 500 for a failure of ours, so the provider retries.
import type Koa from 'koa';
import getRawBody from 'raw-body';
import { asActor } from '../record/change-actor.js';
import type { ProviderName } from './provider.js';
import { WebhookRejected } from './provider.js';
import type { TopUpService } from './service.js';

/** The routes of the registry the service was built with: a registered provider that is not configured answers 400. */
export function topUpWebhooks(service: TopUpService, log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Koa.Middleware {
  const paths = new Map<string, ProviderName>(service.registry.map((m) => [m.webhookPath, m.name]));
  return async (ctx, next) => {
    const provider = paths.get(ctx.path);
    if (provider === undefined) return next();
    if (ctx.method !== 'POST') {
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      ctx.body = { error: { message: 'Webhooks are POSTed.' } };
      return;
    }
    let raw: Buffer;
    try {
      raw = await getRawBody(ctx.req, { limit: '1mb' });
    } catch {
      ctx.status = 400;
      ctx.body = { error: { message: 'The webhook body could not be read (or is over 1 MB).' } };
      return;
    }
    try {
      // The audit log names the provider's webhook as the author of what the event changes.
      const applied = await asActor({ kind: 'system', label: `${provider} webhook`, address: ctx.ip }, () =>
        service.receiveWebhook(provider, raw, (name) => {
          const v = ctx.get(name);
          return v === '' ? undefined : v;
        }),
      );
      ctx.status = 200;
      ctx.body = { received: true, applied };
    } catch (err) {
      if (err instanceof WebhookRejected) {
        log(`top-ups: ${provider} webhook refused: ${err.message}`);
        ctx.status = 400;
        ctx.body = { error: { message: err.message } };
        return;
      }
      log(`top-ups: ${provider} webhook failed, the provider will retry: ${err instanceof Error ? err.message : String(err)}`);
      ctx.status = 500;
      ctx.body = { error: { message: 'The event could not be applied now; send it again.' } };
    }
  };
}
