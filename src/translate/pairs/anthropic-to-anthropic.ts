// Anthropic client, Anthropic-format upstream: the client's body with the upstream's model name and the
// reserved output limit, its own anthropic-version and beta flags; the reply relayed as it comes.
import { upstreamFormat, type ClientProtocolHeaders } from '../../upstream/formats/index.js';
import { anthropicJsonRelay, anthropicStreamRelay } from '../../relay/anthropic-relay.js';
import type { DecodedMessagesRequest } from '../../decode/messages-request.js';
import { stripGatewayThinking } from '../internal/index.js';
import type { FormatPair, PairRequest } from '../pair.js';

export function anthropicToAnthropic(req: PairRequest & { decoded: DecodedMessagesRequest; clientHeaders: ClientProtocolHeaders }): FormatPair {
  const { decoded } = req;
  const relay = decoded.stream ? anthropicStreamRelay({ clientModel: req.model.id }) : anthropicJsonRelay({ clientModel: req.model.id });
  return {
    request: (upstream, outputLimit) => {
      // Thinking blocks we signed (or unsigned ones) came from an OpenAI-format upstream; a real
      // Anthropic server rejects them, so they are removed. Genuine signed blocks pass untouched.
      // A shallow copy, so one upstream's fields never leak into another's body.
      const body = { ...stripGatewayThinking(decoded.body) };
      body.model = upstream.upstreamModel;
      // Exactly the output limit the reservation covers (the client's, capped by the context window).
      body.max_tokens = outputLimit;
      return body;
    },
    headers: () => upstreamFormat('anthropic').protocolHeaders(req.clientHeaders),
    relay: () => relay,
  };
}
