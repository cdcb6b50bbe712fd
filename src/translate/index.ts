// The pairs of the chat client formats (chat completions, messages): a client format has a
// same-format pair for the upstream format it shares a wire with (the client's bytes, edited); every
// other upstream format in the table (src/formats) is reached through the internal representation.
// The Responses API's pairs are src/responses/pair.ts, beside its store.
import type { ClientProtocolHeaders } from '../formats/index.js';
import type { DecodedMessagesRequest } from '../decode/messages-request.js';
import type { DecodedChatRequest } from '../decode/chat-request.js';
import type { ClientBody } from '../request/client-body.js';
import { pairsOf, type FormatPairs, type PairRequest } from './pair.js';
import { anthropicToAnthropic } from './pairs/anthropic-to-anthropic.js';
import { openaiToOpenai } from './pairs/openai-to-openai.js';
import { viaInternal } from './via-internal.js';

// What a client format with its own pairs (the Responses API, src/responses/pair.ts) builds them from.
export { pairsOf, serialised, type FormatPair, type FormatPairs, type PairRequest } from './pair.js';
export { billFrom, pumpTranslated, streamCost, upstreamReply } from './pump.js';
export { StreamTranslator } from '../representation/stream-translator.js';
export { TranslationError, type InternalRequest } from '../representation/index.js';
export { encodeRequest } from './translation.js';
export { translationContext } from './via-internal.js';

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
