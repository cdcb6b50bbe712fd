// The pairs, by client format: the whole matrix in one place. A client format has a same-format pair
// for the upstream format it shares a wire with (the client's bytes, edited); every other upstream
// format in the table (src/formats) is reached through the internal representation.
import type { ClientProtocolHeaders } from '../formats/index.js';
import type { ResponseResult, ResponsesEncodeContext } from '../formats/openai-responses/index.js';
import type { DecodedMessagesRequest } from '../decode/messages-request.js';
import type { DecodedChatRequest } from '../decode/chat-request.js';
import type { ClientBody } from '../request/client-body.js';
import { pairsOf, type FormatPairs, type PairRequest } from './pair.js';
import { anthropicToAnthropic } from './pairs/anthropic-to-anthropic.js';
import { openaiToOpenai } from './pairs/openai-to-openai.js';
import type { InternalRequest } from './representation/index.js';
import { viaInternal } from './via-internal.js';

export type { FormatPair, FormatPairs, PairRequest } from './pair.js';
export { TranslationError } from './representation/index.js';

/** The client's body as received, for the same-format pair to edit; without it, that pair serialises `decoded.body`. */
interface ClientBytes {
  clientBody?: ClientBody | undefined;
}

export function chatCompletionPairs(req: PairRequest & ClientBytes & { decoded: DecodedChatRequest }): FormatPairs {
  const { body, stream, includeUsage } = req.decoded;
  return pairsOf({ openai: () => openaiToOpenai(req) }, (upstreamFormat) => viaInternal({ ...req, client: 'openai', upstreamFormat, body, stream, includeUsage }));
}

export function messagesPairs(req: PairRequest & ClientBytes & { decoded: DecodedMessagesRequest; clientHeaders: ClientProtocolHeaders }): FormatPairs {
  const { body, stream } = req.decoded;
  return pairsOf({ anthropic: () => anthropicToAnthropic(req) }, (upstreamFormat) => viaInternal({ ...req, client: 'anthropic', upstreamFormat, body, stream, includeUsage: true }));
}

export interface ResponsesPairRequest extends PairRequest {
  internal: InternalRequest;
  encode: ResponsesEncodeContext;
  onFinal(result: ResponseResult): Promise<void>;
}

/** A Responses API client: every upstream format through the internal representation; the final response is handed on to be stored. */
export function responsesPairs(req: ResponsesPairRequest): FormatPairs {
  const client = { ctx: req.encode, onFinal: req.onFinal };
  return pairsOf({}, (upstreamFormat) => viaInternal({ ...req, client, upstreamFormat, internal: req.internal, stream: req.internal.stream, includeUsage: true }));
}
