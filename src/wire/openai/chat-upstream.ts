// The chat-completions body sent to an OpenAI-format upstream: the client's body with our model name,
// the usage chunk requested, and exactly one output limit, the one the reservation covered.
import type { JsonObject } from '../json-shape.js';
import type { DecodedChatRequest } from './chat-request.js';

/**
 * `outputLimit` is the output token count the worst case was reserved for. It goes upstream under the
 * client's own field (max_tokens when the client gave none), and the other field is dropped, so no
 * upstream can pick a larger limit than the one paid for.
 */
export function openaiChatUpstreamBody(decoded: DecodedChatRequest, upstreamModel: string, outputLimit: number): string {
  return JSON.stringify(openaiChatUpstreamRequest(decoded, upstreamModel, outputLimit));
}

/** The same body as an object (measured for the reservation before it is sent). */
export function openaiChatUpstreamRequest(decoded: DecodedChatRequest, upstreamModel: string, outputLimit: number): JsonObject {
  // A shallow copy: the body of one upstream must not change another's (model, limit fields).
  const body = { ...decoded.body };
  body.model = upstreamModel;
  if (decoded.stream) {
    const options = typeof body.stream_options === 'object' && body.stream_options !== null ? body.stream_options : {};
    body.stream_options = { ...options, include_usage: true };
  }
  if (decoded.outputLimitField === 'max_completion_tokens') {
    delete body.max_tokens;
    body.max_completion_tokens = outputLimit;
  } else {
    delete body.max_completion_tokens;
    body.max_tokens = outputLimit;
  }
  return body;
}
