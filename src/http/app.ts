// The gateway's Koa application: small middleware composed in the order of the request flow
// (docs/design.md): request id -> no cross-origin -> key -> size- and time-limited JSON body -> route.
// The key comes before the body: it is in the headers, and an anonymous client must not make the
// gateway read (or wait minutes for) a body of up to maxBodyBytes.
import { createResponse, deleteResponse, getResponse, listInputItems, type ResponsesDeps } from './routes/responses.js';
import Koa from 'koa';
import Router from '@koa/router';
import type { CatalogSource } from '../catalog/snapshot.js';
import type { ExchangeDeps } from '../exchange/exchange.js';
import { authenticate, type KeyAuthenticator } from '../authenticate/authenticate.js';
import { RefusalThrottle } from '../authenticate/refusal-throttle.js';
import { jsonBody } from '../decode/json-body.js';
import { refuseCrossOrigin } from './no-cross-origin.js';
import { requestContext, type ErrorReporter } from './request-context.js';
import { chatCompletions } from './routes/chat-completions.js';
import { messages, countMessageTokens } from './routes/messages.js';
import { getModel, listModels } from './routes/models.js';
import { credits, currentKey, generation, type AccountInfoDeps } from './routes/account-info.js';
import { UNMATCHED_ROUTE, type GatewayContext, type GatewayState } from '../request/state.js';
import type { Next } from 'koa';
import type { Tracing } from '../telemetry/tracing.js';

export interface GatewayAppDeps {
  catalog: CatalogSource;
  authenticator: KeyAuthenticator;
  exchange: ExchangeDeps;
  keyMarker: string;
  /** Refusals of unrecognised keys per client address per minute before 429 (0: no limit). */
  keyRefusalsPerMinute: number;
  /** The client address is the hop a trusted proxy appended to X-Forwarded-For, not the socket's peer. */
  trustProxy: boolean;
  maxBodyBytes: number;
  /** The whole body must arrive within this long of the key being accepted (408 after). */
  bodyReadTimeoutMs: number;
  reportUnexpected: ErrorReporter;
  /** Called once per finished request (the request log line and request metrics). */
  requestFinished: (ctx: GatewayContext) => void;
  /** Readiness: false while the ledger or catalog is not usable. */
  ready: () => boolean;
  tracing: Tracing;
  /** The Responses API's store and reasoning-envelope key. */
  responses: ResponsesDeps;
  /** What GET /v1/key, /v1/credits and /v1/generation read. */
  accountInfo: AccountInfoDeps;
}

/** The probes: liveness always, readiness while the ledger and the catalog are usable. */
function healthRouter(deps: GatewayAppDeps): Router<GatewayState> {
  const health = new Router<GatewayState>();
  health.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  health.get('/readyz', (ctx) => {
    const ready = deps.ready();
    ctx.status = ready ? 200 : 503;
    ctx.body = { status: ready ? 'ready' : 'not ready' };
  });
  return health;
}

type CompletionRoute = { route: string; handle: (ctx: GatewayContext) => Promise<void> };

/**
 * The API's routes, and the two completion endpoints by exact path: they carry nearly all traffic, and
 * an exact-path lookup reaches them without the general router's matching; the router still lists
 * them, for the route template of a request refused before it got there.
 */
function apiRouter(deps: GatewayAppDeps): { api: Router<GatewayState>; completionRoutes: Map<string, CompletionRoute> } {
  const api = new Router<GatewayState>();
  const current = (): ReturnType<CatalogSource['current']> => deps.catalog.current();
  const routeName = (route: string) => async (ctx: GatewayContext, next: Next) => {
    ctx.state.route = route;
    await next();
  };
  const completionRoutes = new Map<string, CompletionRoute>();
  const chat = { route: '/v1/chat/completions', handle: chatCompletions(deps.catalog, deps.exchange) };
  const message = { route: '/v1/messages', handle: messages(deps.catalog, deps.exchange) };
  // Balance and usage with the API key, also under OpenRouter's /api/v1 (its clients' base path).
  for (const prefix of ['/v1', '/api/v1']) {
    api.get(`${prefix}/key`, routeName('/v1/key'), currentKey(deps.accountInfo));
    api.get(`${prefix}/credits`, routeName('/v1/credits'), credits(deps.accountInfo));
    api.get(`${prefix}/generation`, routeName('/v1/generation'), generation(deps.accountInfo));
  }
  for (const prefix of ['/v1', '']) {
    completionRoutes.set(`${prefix}/chat/completions`, chat);
    completionRoutes.set(`${prefix}/messages`, message);
    api.get(`${prefix}/models`, routeName('/v1/models'), listModels(current));
    api.get(`${prefix}/models/:id`, routeName('/v1/models/:id'), getModel(current));
    api.post(`${prefix}/chat/completions`, routeName(chat.route), chat.handle);
    api.post(`${prefix}/messages`, routeName(message.route), message.handle);
    api.post(`${prefix}/messages/count_tokens`, routeName('/v1/messages/count_tokens'), countMessageTokens(deps.catalog));
    api.post(`${prefix}/responses`, routeName('/v1/responses'), createResponse(deps.catalog, deps.exchange, deps.responses));
    api.get(`${prefix}/responses/:id`, routeName('/v1/responses/:id'), getResponse(deps.responses));
    api.delete(`${prefix}/responses/:id`, routeName('/v1/responses/:id'), deleteResponse(deps.responses));
    api.get(`${prefix}/responses/:id/input_items`, routeName('/v1/responses/:id/input_items'), listInputItems(deps.responses));
  }
  return { api, completionRoutes };
}

export function createGatewayApp(deps: GatewayAppDeps): Koa<GatewayState> {
  const app = new Koa<GatewayState>();
  app.proxy = true;
  // ctx.ip is then the last X-Forwarded-For hop (the one the trusted proxy appended), never one a client wrote.
  app.maxIpsCount = 1;
  app.silent = true;
  const health = healthRouter(deps);
  const { api, completionRoutes } = apiRouter(deps);

  /**
   * The route template of a request the API routes did not name (refused before routing, a health
   * check, an unknown path): what the routers would match, prefix-less API paths under `/v1`, else
   * `unmatched`. Never the raw path, which would make one metric series or span name per URL.
   */
  const templateOf = (ctx: GatewayContext): string => {
    const matched = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
    if (typeof matched === 'string') return matched;
    for (const [router, isApi] of [[health, false], [api, true]] as const) {
      const layer = router.match(ctx.path, ctx.method).pathAndMethod.find((l) => l.methods.length > 0);
      if (layer !== undefined && typeof layer.path === 'string') return isApi && !layer.path.startsWith('/v1/') ? `/v1${layer.path}` : layer.path;
    }
    return UNMATCHED_ROUTE;
  };

  const finished = async (ctx: GatewayContext, next: Next): Promise<void> => {
    try {
      await next();
    } finally {
      // Only requests that never reached a named route pay for the lookup.
      if (ctx.state.route === UNMATCHED_ROUTE) ctx.state.route = templateOf(ctx);
      deps.requestFinished(ctx);
    }
  };

  const traceRequest = async (ctx: GatewayContext, next: Next): Promise<void> => {
    // Named by the route template once it is known (requestFinished), never by the raw path.
    ctx.state.span = deps.tracing.startRequestSpan({ requestId: ctx.state.requestId, incomingHeaders: ctx.headers, method: ctx.method, format: ctx.state.format });
    await next();
  };

  // The health checks are GETs: any other request (every completion) passes without the router's
  // matching, its not-found event and its bookkeeping on the context.
  const healthRoutes = health.routes();
  const healthChecks = (ctx: GatewayContext, next: Next): Promise<unknown> =>
    ctx.method === 'GET' || ctx.method === 'HEAD' ? healthRoutes(ctx as Parameters<typeof healthRoutes>[0], next) : next();

  const completions = async (ctx: GatewayContext, next: Next): Promise<void> => {
    const hit = ctx.method === 'POST' ? completionRoutes.get(ctx.path) : undefined;
    if (hit === undefined) return next();
    ctx.state.route = hit.route;
    await hit.handle(ctx);
  };

  app.use(finished);
  app.use(requestContext(deps.reportUnexpected));
  // Tracing is on or off for the process's life: off, no middleware (and no async step) per request.
  if (deps.tracing.enabled) app.use(traceRequest);
  app.use(healthChecks);
  app.use(refuseCrossOrigin);
  const keyRefusals = new RefusalThrottle(deps.keyRefusalsPerMinute);
  const clientAddress = (ctx: GatewayContext): string => (deps.trustProxy ? ctx.ip : (ctx.req.socket.remoteAddress ?? ''));
  app.use(authenticate(deps.authenticator, deps.keyMarker, keyRefusals, clientAddress));
  app.use(jsonBody({ limitBytes: deps.maxBodyBytes, readTimeoutMs: deps.bodyReadTimeoutMs }));
  app.use(completions);
  app.use(api.routes());
  return app;
}
