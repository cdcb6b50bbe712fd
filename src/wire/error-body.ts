// Error bodies in each wire format (wire-formats.md A.7 and B.5).
import type { WireFormat } from './format.js';

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

export function openaiErrorType(status: number): string {
  return OPENAI_TYPE[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
}

export function anthropicErrorType(status: number): string {
  return ANTHROPIC_TYPE[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

export interface ErrorFields {
  status: number;
  message: string;
  code: string;
  param?: string | undefined;
  details?: Record<string, unknown> | undefined;
}

export function errorBody(format: WireFormat, e: ErrorFields): Record<string, unknown> {
  if (format === 'anthropic') {
    return { type: 'error', error: { type: anthropicErrorType(e.status), message: e.message, code: e.code, ...e.details } };
  }
  return {
    error: { message: e.message, type: openaiErrorType(e.status), param: e.param ?? null, code: e.code, ...e.details },
  };
}
