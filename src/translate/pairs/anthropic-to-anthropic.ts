// Anthropic client, Anthropic-format upstream: the client's bytes with the upstream's model name and
// the reserved output limit, its own anthropic-version and the beta flags that change nothing about the
// cost (others, and server tools, are refused before anything is reserved); the reply relayed as it comes.
import { upstreamFormat, type ClientProtocolHeaders } from '../../formats/index.js';
import { refuseUnpriced, stripGatewayThinking, thinkingRequested } from '../../formats/anthropic-messages/index.js';
import { anthropicJsonRelay, anthropicStreamRelay } from '../../relay/anthropic-relay.js';
import type { DecodedMessagesRequest } from '../../decode/messages-request.js';
import type { ClientBody } from '../../request/client-body.js';
import { editTopLevel } from '../body-edit.js';
import { serialised, type FormatPair, type PairRequest } from '../pair.js';
import { isRecord, type JsonObject } from '../../representation/index.js';

/** Anthropic refuses a max_tokens not above the client's thinking.budget_tokens: the smallest limit the body can take. */
function minOutputLimit(body: JsonObject): number {
  const thinking = body.thinking;
  const budget = isRecord(thinking) && thinking.type === 'enabled' ? thinking.budget_tokens : undefined;
  return typeof budget === 'number' && Number.isSafeInteger(budget) && budget > 0 ? budget + 1 : 1;
}

export function anthropicToAnthropic(req: PairRequest & { decoded: DecodedMessagesRequest; clientHeaders: ClientProtocolHeaders; clientBody?: ClientBody | undefined }): FormatPair {
  const { decoded, clientBody } = req;
  // Thinking blocks only when the request enabled thinking, as Anthropic's own API answers.
  const relayOptions = { clientModel: req.model.id, showThinking: thinkingRequested(decoded.body) };
  const relay = decoded.stream ? anthropicStreamRelay(relayOptions) : anthropicJsonRelay(relayOptions);
  // Thinking blocks we signed (or unsigned ones) came from an OpenAI-format upstream; a real Anthropic
  // server rejects them, so they are removed, and that body is serialised anew. Genuine signed blocks
  // pass untouched, and without any the client's bytes are edited in place.
  const body = stripGatewayThinking(decoded.body);
  const editable = body === decoded.body ? clientBody : undefined;
  return {
    request: (upstream, outputLimit) => {
      // Built before the reservation: what the gateway cannot price (betas, server tools) never goes upstream.
      refuseUnpriced(body, req.clientHeaders['anthropic-beta']);
      // Exactly the output limit the reservation covers (the client's, capped by the context window).
      const fields = { model: upstream.upstreamModel, max_tokens: outputLimit };
      // A shallow copy, so one upstream's fields never leak into another's body.
      return editable === undefined ? serialised({ ...body, ...fields }) : { sent: editTopLevel(editable, fields), json: body };
    },
    headers: () => upstreamFormat('anthropic').protocolHeaders(req.clientHeaders),
    relay: () => relay,
    minOutputLimit: minOutputLimit(body),
  };
}
