// The service answers servers, scripts and local apps, never browser pages (spec 1.5, 5.5):
// no Access-Control-* header is ever sent, preflights are refused, and a request that a
// browser marks as cross-origin is refused before it can spend anything.
import type { Next } from 'koa';
import { GatewayError } from '../request/gateway-error.js';
import type { GatewayContext } from '../request/state.js';

export async function refuseCrossOrigin(ctx: GatewayContext, next: Next): Promise<void> {
  if (ctx.method === 'OPTIONS') {
    throw new GatewayError(405, 'Cross-origin (CORS) requests are not served: call Tollgate from a server, a script or a local application, not from a browser page.', { code: 'cors_not_supported' });
  }
  const origin = ctx.headers.origin;
  if (origin !== undefined && origin !== `${ctx.protocol}://${ctx.host}`) {
    throw new GatewayError(403, 'Cross-origin requests are not served: keys are not meant for browser pages. Call Tollgate from a server, a script or a local application.', { code: 'cors_not_supported' });
  }
  await next();
}
