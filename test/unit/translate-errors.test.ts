// Error translation between the formats (wire-formats A.7, B.5, C.10).
import { describe, expect, it } from 'vitest';
import { translateError } from '../../src/wire/translate/index.js';

describe('translateError (C.10)', () => {
  it('Anthropic 529 overloaded_error -> OpenAI 503 service_unavailable_error (retried by the SDK)', () => {
    const out = translateError(529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, 'anthropic', 'openai');
    expect(out).toEqual({ status: 503, body: { error: { message: 'Overloaded', type: 'service_unavailable_error', param: null, code: 'server_is_overloaded' } } });
  });

  it('OpenAI 503 -> Anthropic 529 overloaded_error', () => {
    const out = translateError(503, { error: { message: 'busy', type: 'service_unavailable_error', param: null, code: null } }, 'openai', 'anthropic');
    expect(out).toEqual({ status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'busy' } } });
  });

  it('OpenAI 429 insufficient_quota -> Anthropic 402 billing_error (not retryable); a plain 429 stays a rate limit', () => {
    const quota = translateError(429, { error: { message: 'You exceeded your current quota', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } }, 'openai', 'anthropic');
    expect(quota).toEqual({ status: 402, body: { type: 'error', error: { type: 'billing_error', message: 'You exceeded your current quota' } } });
    const rate = translateError(429, { error: { message: 'slow down', type: 'requests', code: 'rate_limit_exceeded' } }, 'openai', 'anthropic');
    expect(rate).toEqual({ status: 429, body: { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } } });
  });

  it.each([[400, 'invalid_request_error'], [401, 'authentication_error'], [403, 'permission_error'], [404, 'not_found_error'], [413, 'request_too_large'], [500, 'api_error'], [502, 'api_error']])(
    'OpenAI %i -> Anthropic %s with the same status', (status, type) => {
      const out = translateError(status, { error: { message: 'm', type: 'x' } }, 'openai', 'anthropic');
      expect(out.status).toBe(status);
      expect((out.body.error as Record<string, unknown>).type).toBe(type);
    });

  it('a foreign Anthropic body reaching an OpenAI client is rewrapped: message is the upstream message, not a JSON dump', () => {
    const out = translateError(404, { type: 'error', error: { type: 'not_found_error', message: 'model: claude-nope' }, request_id: 'req_1' }, 'anthropic', 'openai');
    expect(out).toEqual({ status: 404, body: { error: { message: 'model: claude-nope', type: 'invalid_request_error', param: null, code: null } } });
  });

  it('non-JSON upstream bodies (proxy HTML, plain text) become the message; JSON strings are parsed', () => {
    expect(translateError(502, 'Bad Gateway', 'openai', 'anthropic').body).toEqual({ type: 'error', error: { type: 'api_error', message: 'Bad Gateway' } });
    expect(translateError(400, '{"error":{"message":"bad field","type":"invalid_request_error"}}', 'openai', 'anthropic').body)
      .toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'bad field' } });
    expect((translateError(500, '', 'anthropic', 'openai').body.error as Record<string, unknown>).message).toBe('Upstream returned HTTP 500');
  });

  it('credentials echoed by the upstream never reach the client', () => {
    const out = translateError(401, { error: { message: 'Incorrect API key provided: sk-proj-abcdefghijklmnop1234. Header was Bearer sk-zzz', type: 'invalid_request_error', code: 'invalid_api_key' } }, 'openai', 'anthropic');
    const text = JSON.stringify(out);
    expect(text).not.toContain('abcdefghijklmnop1234');
    expect(text).not.toContain('sk-zzz');
    expect(text).toContain('[redacted]');
    expect(out.status).toBe(401);
  });
});
