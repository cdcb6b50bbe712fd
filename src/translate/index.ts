// The pairs, by client format then upstream format: the whole matrix in one place.
import type { ClientProtocolHeaders } from '../upstream/formats/index.js';
import type { DecodedMessagesRequest } from '../decode/messages-request.js';
import type { DecodedChatRequest } from '../decode/chat-request.js';
import type { ClientBody } from './body-edit.js';
import { pairsOf, type FormatPairs, type PairRequest } from './pair.js';
import { anthropicToAnthropic } from './pairs/anthropic-to-anthropic.js';
import { anthropicToOpenai } from './pairs/anthropic-to-openai.js';
import { openaiToAnthropic } from './pairs/openai-to-anthropic.js';
import { openaiToOpenai } from './pairs/openai-to-openai.js';
import { responsesToAnthropic, responsesToOpenai, type ResponsesPairRequest } from './pairs/responses-to-upstream.js';

export type { FormatPair, FormatPairs, PairRequest } from './pair.js';
export type { ResponsesPairRequest } from './pairs/responses-to-upstream.js';

/** The client's body as received, for the same-format pair to edit; without it, that pair serialises `decoded.body`. */
interface ClientBytes {
  clientBody?: ClientBody | undefined;
}

export function chatCompletionPairs(req: PairRequest & ClientBytes & { decoded: DecodedChatRequest }): FormatPairs {
  return pairsOf({ openai: () => openaiToOpenai(req), anthropic: () => openaiToAnthropic(req) });
}

export function messagesPairs(req: PairRequest & ClientBytes & { decoded: DecodedMessagesRequest; clientHeaders: ClientProtocolHeaders }): FormatPairs {
  return pairsOf({ anthropic: () => anthropicToAnthropic(req), openai: () => anthropicToOpenai(req) });
}

export function responsesPairs(req: ResponsesPairRequest): FormatPairs {
  return pairsOf({ openai: () => responsesToOpenai(req), anthropic: () => responsesToAnthropic(req) });
}
