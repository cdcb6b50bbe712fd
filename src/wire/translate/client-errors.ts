/** Bodies the gateway itself writes to a client: translation refusals and stream heartbeats. */
import type { WireFormat } from '../format.js';
import type { TranslationError } from './errors.js';

/** The client-format error body for a request the translation refused (status is `err.status`). */
export function translationErrorBody(err: TranslationError, client: WireFormat): Record<string, unknown> {
  return client === 'anthropic'
    ? { type: 'error', error: { type: 'invalid_request_error', message: err.message } }
    : { error: { message: err.message, type: 'invalid_request_error', param: err.param, code: null } };
}

/** Keeps idle streams open through proxies: an SSE comment for OpenAI clients (the SDK skips it), `ping` for Anthropic. */
export function streamHeartbeat(client: WireFormat): string {
  return client === 'anthropic' ? 'event: ping\ndata: {"type":"ping"}\n\n' : ': keep-alive\n\n';
}
