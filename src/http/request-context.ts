// First middleware: a request id, the error format of the route, and rendering of every error
// in that format. Nothing below it builds an error body by hand.
import { randomUUID } from 'node:crypto';
import type { Next } from 'koa';
import { GatewayError } from '../request/gateway-error.js';
import { gatewayErrorOf } from './domain-errors.js';
import { clientFormat, type ClientFormatName } from '../formats/index.js';
import { UNMATCHED_ROUTE, type GatewayContext } from '../request/state.js';

export interface ErrorReporter {
  (err: unknown, ctx: GatewayContext): void;
}

function routeFormat(path: string, headers: GatewayContext['headers']): ClientFormatName {
  if (path.startsWith('/v1/messages') || path.startsWith('/messages')) return 'anthropic';
  if ((path.startsWith('/v1/models') || path.startsWith('/models')) && headers['anthropic-version'] !== undefined) {
    return 'anthropic';
  }
  return 'openai';
}

/** A request id that sorts by time and is safe in URLs and headers: `req_<base36 ms><random hex>`. */
export function newRequestId(): string {
  // The UUID's first 20 hex digits taken around its dashes (8-4-4-4-…): one string fewer than
  // removing the dashes and then cutting.
  const u = randomUUID();
  return `req_${Date.now().toString(36)}${u.slice(0, 8)}${u.slice(9, 13)}${u.slice(14, 18)}${u.slice(19, 23)}`;
}

export function requestContext(reportUnexpected: ErrorReporter) {
  return async function requestContextMiddleware(ctx: GatewayContext, next: Next): Promise<void> {
    const requestId = newRequestId();
    ctx.state.requestId = requestId;
    ctx.state.startedAt = performance.now();
    ctx.state.format = routeFormat(ctx.path, ctx.headers);
    ctx.state.route = UNMATCHED_ROUTE;
    ctx.set('x-request-id', requestId);
    const idHeader = clientFormat(ctx.state.format).requestIdHeader;
    if (idHeader !== undefined) ctx.set(idHeader, requestId);
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined && ctx.respond !== false) {
        throw new GatewayError(404, `Unknown endpoint ${ctx.method} ${ctx.path}. Tollgate serves POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/responses, GET /v1/models, GET /v1/key, GET /v1/credits and GET /v1/generation?id=.`, { code: 'unknown_url' });
      }
    } catch (err) {
      renderError(ctx, err, reportUnexpected);
    }
  };
}

export function renderError(ctx: GatewayContext, err: unknown, reportUnexpected: ErrorReporter): void {
  const known = gatewayErrorOf(err);
  if (known === undefined) reportUnexpected(err, ctx);
  const gatewayError =
    known ?? new GatewayError(500, `Internal error in the gateway; quote request id ${ctx.state.requestId} to support.`, { code: 'internal_error' });
  if (ctx.headerSent || !ctx.writable) return;
  // Refused before its body was read (a bad key, a body too large, too slow or too deep): close the
  // connection rather than read or wait for the rest.
  if (!ctx.req.complete) ctx.set('connection', 'close');
  ctx.status = gatewayError.status;
  ctx.type = 'application/json';
  if (gatewayError.headers !== undefined) ctx.set(gatewayError.headers);
  if (gatewayError.retryAfterSeconds !== undefined) ctx.set('retry-after', String(gatewayError.retryAfterSeconds));
  // Client errors are final: tell the official SDKs not to retry them.
  if ((gatewayError.status < 500 && gatewayError.status !== 429) || gatewayError.final) ctx.set('x-should-retry', 'false');
  ctx.body = clientFormat(ctx.state.format).errorBody({
    status: gatewayError.status,
    message: gatewayError.message,
    code: gatewayError.code,
    param: gatewayError.param,
    details: gatewayError.details,
  });
  if (ctx.state.outcome) ctx.state.outcome.errorCode = gatewayError.code;
  else ctx.state.outcome = { inputTokens: 0, outputTokens: 0, costMicros: 0, errorCode: gatewayError.code };
}
