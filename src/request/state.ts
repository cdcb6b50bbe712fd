// What the middleware chain learns about a request, passed down on ctx.state.
import type { ParameterizedContext } from 'koa';
import type { ClientFormatName } from '../formats/index.js';
import type { ApiKeyRecord } from '../accounts/account-store.js';
import type { RequestSpan } from '../telemetry/tracing.js';
import type { ClientBody } from './client-body.js';

/** The route of a request no route template matched (an unknown path or method). */
export const UNMATCHED_ROUTE = 'unmatched';

export interface GatewayState {
  requestId: string;
  /** The wire format errors are rendered in (decided by the route, or the anthropic-version header on /v1/models). */
  format: ClientFormatName;
  /** performance.now() at arrival. */
  startedAt: number;
  /** Parsed JSON body of POST routes. */
  body?: unknown;
  /** The body's bytes as received, and where its top-level members sit (same-format pairs edit them). */
  rawBody?: ClientBody;
  key?: ApiKeyRecord;
  /** The model id the client asked for, once known (logs and metrics). */
  modelId?: string;
  /** Route template for metrics, e.g. `/v1/chat/completions`. */
  route: string;
  /** The request's trace span (a no-op span when tracing is off). */
  span?: RequestSpan;
  /** Facts the exchange reports for the request log. */
  outcome?: RequestOutcome;
  /** The client hung up before its response was complete (recorded as status 499). */
  clientClosed?: boolean;
}

export interface RequestOutcome {
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
  errorCode?: string;
}

export type GatewayContext = ParameterizedContext<GatewayState>;
