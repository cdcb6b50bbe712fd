// OpenAI client, OpenAI-format upstream: the client's bytes with the upstream's model name, the usage
// chunk asked for, and the reserved output limit; the reply relayed with only id and model rewritten.
import { upstreamFormat } from '../../formats/index.js';
import { openaiJsonRelay, openaiStreamRelay } from '../../relay/openai-relay.js';
import type { DecodedChatRequest } from '../../decode/chat-request.js';
import type { JsonObject } from '../../wire/json-shape.js';
import type { ClientBody } from '../../request/client-body.js';
import { editTopLevel } from '../body-edit.js';
import { serialised, type FormatPair, type PairRequest } from '../pair.js';

export function openaiToOpenai(req: PairRequest & { decoded: DecodedChatRequest; clientBody?: ClientBody | undefined }): FormatPair {
  const { decoded, clientBody } = req;
  const relayOptions = { completionId: `chatcmpl-${req.requestId}`, clientModel: req.model.id, includeUsage: decoded.includeUsage };
  const relay = decoded.stream ? openaiStreamRelay(relayOptions) : openaiJsonRelay(relayOptions);
  return {
    request: (upstream, outputLimit) =>
      clientBody === undefined
        ? serialised(openaiChatUpstreamRequest(decoded, upstream.upstreamModel, outputLimit))
        : { sent: editTopLevel(clientBody, upstreamFields(decoded, upstream.upstreamModel, outputLimit)), json: decoded.body },
    headers: () => upstreamFormat('openai').protocolHeaders(),
    relay: () => relay,
  };
}

/**
 * The top-level fields an OpenAI-format upstream gets instead of the client's: our model name, the
 * usage chunk requested, and exactly one output limit, the one the reservation covered. It goes
 * upstream under the client's own field (max_tokens when the client gave none), and the other field is
 * dropped (undefined), so no upstream can pick a larger limit than the one paid for.
 */
function upstreamFields(decoded: DecodedChatRequest, upstreamModel: string, outputLimit: number): Record<string, unknown> {
  const fields: Record<string, unknown> = { model: upstreamModel };
  if (decoded.stream) {
    const options = decoded.body.stream_options;
    fields.stream_options = { ...(typeof options === 'object' && options !== null ? options : {}), include_usage: true };
  }
  const completionField = decoded.outputLimitField === 'max_completion_tokens';
  fields.max_completion_tokens = completionField ? outputLimit : undefined;
  fields.max_tokens = completionField ? undefined : outputLimit;
  return fields;
}

/** The chat-completions body sent to an OpenAI-format upstream, as a value (see upstreamFields). */
export function openaiChatUpstreamRequest(decoded: DecodedChatRequest, upstreamModel: string, outputLimit: number): JsonObject {
  // A shallow copy: the body of one upstream must not change another's (model, limit fields).
  const body: JsonObject = { ...decoded.body };
  for (const [key, value] of Object.entries(upstreamFields(decoded, upstreamModel, outputLimit))) {
    if (value === undefined) delete body[key];
    else body[key] = value;
  }
  return body;
}
