// Messages' error body (docs/wire-formats.md B.5): {"type": "error", "error": {"type", "message"}}.
import type { JsonObject } from '../../representation/index.js';
import type { ErrorFields } from '../types.js';

const ANTHROPIC_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicErrorType(status: number): string {
  return ANTHROPIC_TYPE[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

export function anthropicErrorBody(e: ErrorFields): JsonObject {
  return { type: 'error', error: { type: anthropicErrorType(e.status), message: e.message, code: e.code, ...e.details } };
}
