// The Responses API as a client format: its pair with every upstream format. The request was decoded
// (prior items resolved from the store) before the pair is built; each upstream gets it encoded by
// its format with the reserved output limit; the reply, whole or streamed, is decoded from the
// upstream's format and encoded by the Responses encoders, and the final response is handed to
// onFinal to be stored before the client has it.
import { upstreamFormat } from '../formats/index.js';
import { isRecord } from '../wire/json-shape.js';
import { withCost } from '../wire/usage-cost.js';
import { encodeResponsesResponse, ResponsesStreamEncoder, type ResponseResult, type ResponsesEncodeContext } from '../formats/openai-responses/index.js';
import type { CatalogUpstream } from '../catalog/snapshot.js';
import type { Relay } from '../relay/relay.js';
import {
  billFrom,
  encodeRequest,
  pairsOf,
  pumpTranslated,
  serialised,
  streamCost,
  StreamTranslator,
  translationContext,
  upstreamReply,
  type FormatPair,
  type FormatPairs,
  type InternalRequest,
  type PairRequest,
} from '../translate/index.js';

export interface ResponsesPairRequest extends PairRequest {
  internal: InternalRequest;
  encode: ResponsesEncodeContext;
  onFinal(result: ResponseResult): Promise<void>;
}

/** Every upstream format through the internal representation: the Responses API has no same-format upstream. */
export function responsesPairs(req: ResponsesPairRequest): FormatPairs {
  return pairsOf({}, () => responsesPair(req));
}

function responsesPair(req: ResponsesPairRequest): FormatPair {
  return {
    request: (upstream, outputLimit) => serialised(encodeRequest(req.internal, upstream.format, translationContext(req.model, upstream, req.requestId), outputLimit)),
    // The client speaks another format: its own protocol headers are not this upstream's.
    headers: (upstream) => upstreamFormat(upstream.format).protocolHeaders(),
    relay: (upstream) => (req.internal.stream ? streamRelay(req, upstream) : wholeRelay(req, upstream)),
  };
}

function wholeRelay(req: ResponsesPairRequest, upstream: CatalogUpstream): Relay {
  return async ({ ctx, response, costUsd }) => {
    const { out, json } = await upstreamReply(response);
    const r = upstreamFormat(upstream.format).decodeResponse(json);
    billFrom(out, r.usage, json, upstream);
    // Reasoning items reach the client only when asked for (the encoder keeps them in the stored context).
    const result = encodeResponsesResponse(r, req.encode);
    if (isRecord(result.body.usage)) {
      out.answerUsage = result.body.usage;
      // Stored with its cost too (the exchange writes the same figure again, or its estimate without usage).
      if (out.usage !== undefined && costUsd !== undefined) withCost(out.answerUsage, costUsd(out.usage));
    }
    out.finishReason = String(result.body.status);
    // Stored before the client has it, so an immediate follow-up (previous_response_id) finds it.
    await req.onFinal(result);
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.body = result.body;
    return out;
  };
}

function streamRelay(req: ResponsesPairRequest, upstream: CatalogUpstream): Relay {
  return async (args) => {
    const encoder = new ResponsesStreamEncoder(req.encode);
    // Reasoning not asked for is billed and stored but never sent as an item (the encoder leaves it out of output_index).
    const translator = new StreamTranslator(upstreamFormat(upstream.format).streamDecoder(), encoder, (r) => r, false, streamCost(args));
    // response.created goes out at once, before the upstream's first byte, so clients see progress.
    return pumpTranslated(translator, encoder.begin(), args, async () => {
      if (encoder.final !== undefined) await req.onFinal(encoder.final);
    });
  };
}
