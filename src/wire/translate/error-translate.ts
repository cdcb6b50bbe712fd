/** Upstream error status/body -> the client's error format (wire-formats A.7, B.5, C.10). */
import type { WireFormat } from '../format.js';
import { isRecord, str } from './json.js';

export interface TranslatedError {
  status: number;
  body: Record<string, unknown>;
}

const ANTHROPIC_TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error', 403: 'permission_error',
  404: 'not_found_error', 409: 'conflict_error', 413: 'request_too_large', 429: 'rate_limit_error',
  500: 'api_error', 504: 'timeout_error', 529: 'overloaded_error',
};

const OPENAI_TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 402: 'insufficient_quota', 403: 'permission_error',
  404: 'invalid_request_error', 409: 'conflict_error', 413: 'invalid_request_error', 429: 'rate_limit_error',
  500: 'server_error', 503: 'service_unavailable_error', 504: 'timeout_error',
};

const MAX_MESSAGE = 1000;
// Keys and bearer tokens an upstream may echo back ("Incorrect API key provided: sk-…").
const CREDENTIAL = /\b(?:sk|pk|rk|tg|key)[-_][A-Za-z0-9_-]{8,}|\bBearer\s+\S+|\bx-api-key:\s*\S+/gi;

export function redactCredentials(message: string): string {
  return message.replace(CREDENTIAL, '[redacted]');
}

/**
 * An upstream's error text as it may be shown to a client: credentials it echoes redacted, and cut to
 * MAX_MESSAGE characters. Every relayed upstream message goes through here (status errors, in-band
 * stream errors, both formats).
 */
export function relayableUpstreamMessage(message: string): string {
  // Cut first (with room for a credential straddling the cut), so a huge message costs no more than a short one.
  return redactCredentials(message.slice(0, MAX_MESSAGE * 2)).slice(0, MAX_MESSAGE);
}

interface UpstreamError { message: string; type?: string; code?: string; param?: string }

function readUpstreamError(status: number, body: unknown): UpstreamError {
  let parsed = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return { message: body.trim() || `Upstream returned HTTP ${status}` };
    }
  }
  const err = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : isRecord(parsed) ? parsed : {};
  const message = str(err.message) ?? (typeof parsed === 'string' ? parsed : undefined) ?? `Upstream returned HTTP ${status}`;
  const out: UpstreamError = { message };
  const type = str(err.type);
  if (type) out.type = type;
  const code = str(err.code);
  if (code) out.code = code;
  const param = str(err.param);
  if (param) out.param = param;
  return out;
}

/** `from` is the upstream's format, `to` the client's. */
export function translateError(status: number, body: unknown, _from: WireFormat, to: WireFormat): TranslatedError {
  const e = readUpstreamError(status, body);
  const message = relayableUpstreamMessage(e.message);
  const quotaExhausted = status === 429 && (e.code === 'insufficient_quota' || e.type === 'insufficient_quota');

  if (to === 'anthropic') {
    // OpenAI's "quota exhausted" 429 is not retryable; Anthropic clients know that as 402 billing_error.
    const outStatus = quotaExhausted ? 402 : status === 503 ? 529 : status;
    const type = ANTHROPIC_TYPES[outStatus] ?? (outStatus >= 500 ? 'api_error' : 'invalid_request_error');
    return { status: outStatus, body: { type: 'error', error: { type, message } } };
  }
  // Anthropic-only 529 overloaded -> 503, which OpenAI clients retry just the same.
  const outStatus = status === 529 ? 503 : status;
  const type = quotaExhausted ? 'insufficient_quota' : OPENAI_TYPES[outStatus] ?? (outStatus >= 500 ? 'server_error' : 'invalid_request_error');
  const code = quotaExhausted ? 'insufficient_quota' : outStatus === 503 ? 'server_is_overloaded' : e.code ?? null;
  return { status: outStatus, body: { error: { message, type, param: e.param ?? null, code } } };
}
