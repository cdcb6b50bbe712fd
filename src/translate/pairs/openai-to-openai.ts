// OpenAI client, OpenAI-format upstream: the client's body with the upstream's model name, the usage
// chunk asked for, and the reserved output limit; the reply relayed with only id and model rewritten.
import { upstreamFormat } from '../../upstream/formats/index.js';
import { openaiJsonRelay, openaiStreamRelay } from '../../relay/openai-relay.js';
import type { DecodedChatRequest } from '../../decode/chat-request.js';
import type { JsonObject } from '../../wire/json-shape.js';
import type { FormatPair, PairRequest } from '../pair.js';

export function openaiToOpenai(req: PairRequest & { decoded: DecodedChatRequest }): FormatPair {
  const { decoded } = req;
  const relayOptions = { completionId: `chatcmpl-${req.requestId}`, clientModel: req.model.id, includeUsage: decoded.includeUsage };
  const relay = decoded.stream ? openaiStreamRelay(relayOptions) : openaiJsonRelay(relayOptions);
  return {
    request: (upstream, outputLimit) => openaiChatUpstreamRequest(decoded, upstream.upstreamModel, outputLimit),
    headers: () => upstreamFormat('openai').protocolHeaders(),
    relay: () => relay,
  };
}

/**
 * The chat-completions body sent to an OpenAI-format upstream: the client's body with our model name,
 * the usage chunk requested, and exactly one output limit, the one the reservation covered. It goes
 * upstream under the client's own field (max_tokens when the client gave none), and the other field is
 * dropped, so no upstream can pick a larger limit than the one paid for.
 */
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
