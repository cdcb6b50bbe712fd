// OpenAI client, Anthropic-format upstream: chat completions to messages and back, through the internal
// representation.
import type { DecodedChatRequest } from '../../decode/chat-request.js';
import type { FormatPair, PairRequest } from '../pair.js';
import { viaInternal } from '../via-internal.js';

export function openaiToAnthropic(req: PairRequest & { decoded: DecodedChatRequest }): FormatPair {
  return viaInternal({ ...req, clientFormat: 'openai', upstreamFormat: 'anthropic', body: req.decoded.body, stream: req.decoded.stream, includeUsage: req.decoded.includeUsage });
}
