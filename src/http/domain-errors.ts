// The HTTP edge's reading of the errors the layers below raise in their own terms: a request its
// decoder refused or its upstream's format cannot express, a ledger that cannot serve now, usage
// records that cannot be saved. Each becomes
// the gateway error (status, code, retry-after) the client is answered with; anything else is a bug.
import { LedgerUnavailableError } from '../billing/ledger-health.js';
import { InvalidRequest } from '../decode/invalid-request.js';
import { JournalBehindError } from '../record/journaled-ledger.js';
import { GatewayError } from '../request/gateway-error.js';
import { TranslationError } from '../translate/index.js';

/** Seconds a client waits before retrying while usage records cannot be saved. */
const JOURNAL_RETRY_AFTER_SECONDS = 5;

/** The gateway error `err` is answered with, or undefined for an unexpected error (a 500). */
export function gatewayErrorOf(err: unknown): GatewayError | undefined {
  if (err instanceof GatewayError) return err;
  if (err instanceof InvalidRequest) return new GatewayError(400, err.message, { code: err.code, ...(err.param === undefined ? {} : { param: err.param }) });
  if (err instanceof TranslationError) return new GatewayError(err.status, err.message, { code: 'invalid_request', ...(err.param === null ? {} : { param: err.param }) });
  // Nothing was sent upstream and nothing charged: retryable.
  if (err instanceof LedgerUnavailableError) return new GatewayError(503, err.message, { code: 'ledger_unavailable', retryAfterSeconds: err.retryAfterSeconds });
  // Money the gateway could not record is money it must not serve.
  if (err instanceof JournalBehindError) {
    return new GatewayError(503, 'Usage records cannot be saved right now, so no new requests are served; try again shortly.', { code: 'usage_records_unavailable', retryAfterSeconds: JOURNAL_RETRY_AFTER_SECONDS });
  }
  return undefined;
}
