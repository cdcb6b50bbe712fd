// The HTTP edge answers the errors billing and the record raise in their own terms: the ledger that
// cannot serve now and the journal that is behind are retryable 503s with the codes clients and
// dashboards key on; neither layer knows about HTTP (the import rules in .dependency-cruiser.cjs).
import { describe, expect, it } from 'vitest';
import { LedgerUnavailableError, ledgerUnavailable } from '../../src/billing/ledger-health.js';
import { InvalidRequest } from '../../src/decode/invalid-request.js';
import { gatewayErrorOf } from '../../src/http/domain-errors.js';
import { JournalBehindError } from '../../src/record/journaled-ledger.js';
import { GatewayError } from '../../src/request/gateway-error.js';
import { TranslationError } from '../../src/translate/index.js';

describe('domain errors at the HTTP edge', () => {
  it('a ledger that cannot serve is a retryable 503 ledger_unavailable with its own message and wait', () => {
    expect(gatewayErrorOf(ledgerUnavailable())).toMatchObject({ status: 503, code: 'ledger_unavailable', retryAfterSeconds: 2, message: expect.stringMatching(/nothing was charged/) as unknown });
    expect(gatewayErrorOf(new LedgerUnavailableError('restoring', 7))).toMatchObject({ status: 503, code: 'ledger_unavailable', retryAfterSeconds: 7, message: 'restoring' });
  });

  it('a journal behind its bound is a retryable 503 usage_records_unavailable', () => {
    expect(gatewayErrorOf(new JournalBehindError(90_000, 60_000))).toMatchObject({ status: 503, code: 'usage_records_unavailable', retryAfterSeconds: 5 });
  });

  it('a request its decoder refused, or its upstream format cannot express, is a 400 naming the field; a gateway error is itself; anything else is unexpected', () => {
    expect(gatewayErrorOf(new InvalidRequest('max_tokens: must be a positive integer', 'max_tokens'))).toMatchObject({ status: 400, param: 'max_tokens' });
    const own = new GatewayError(404, 'no such model', { code: 'model_not_found' });
    expect(gatewayErrorOf(own)).toBe(own);
    expect(gatewayErrorOf(new TranslationError(400, 'n: one choice per request', 'n'))).toMatchObject({ status: 400, code: 'invalid_request', param: 'n' });
    expect(gatewayErrorOf(new TranslationError(400, 'no field to name'))?.param).toBeUndefined();
    expect(gatewayErrorOf(new Error('bug'))).toBeUndefined();
  });
});
