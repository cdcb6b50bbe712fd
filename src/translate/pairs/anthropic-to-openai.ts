// Anthropic client, OpenAI-format upstream: messages to chat completions and back, through the internal
// representation.
import type { DecodedMessagesRequest } from '../../decode/messages-request.js';
import type { FormatPair, PairRequest } from '../pair.js';
import { viaInternal } from '../via-internal.js';

export function anthropicToOpenai(req: PairRequest & { decoded: DecodedMessagesRequest }): FormatPair {
  return viaInternal({ ...req, clientFormat: 'anthropic', upstreamFormat: 'openai', body: req.decoded.body, stream: req.decoded.stream, includeUsage: true });
}
