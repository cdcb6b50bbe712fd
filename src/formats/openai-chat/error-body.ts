// Chat completions' error body (docs/wire-formats.md A.7): {"error": {"message", "type", "param", "code"}}.
import type { JsonObject } from '../../representation/index.js';
import type { ErrorFields } from '../types.js';

const OPENAI_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'invalid_request_error',
  405: 'invalid_request_error',
  413: 'invalid_request_error',
  429: 'rate_limit_error',
  503: 'service_unavailable_error',
  504: 'timeout_error',
};

export function openaiErrorType(status: number): string {
  return OPENAI_TYPE[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
}

export function openaiErrorBody(e: ErrorFields): JsonObject {
  return {
    error: { message: e.message, type: openaiErrorType(e.status), param: e.param ?? null, code: e.code, ...e.details },
  };
}
