// A Responses API client, to an upstream of either format: the request was decoded into the internal
// representation (prior items resolved), the reply is encoded by the Responses encoders, and the final
// response is handed on to be stored.
import type { WireFormat } from '../../wire/format.js';
import type { InternalRequest } from '../internal/index.js';
import type { ResponseResult, ResponsesEncodeContext } from '../internal/responses-response.js';
import type { FormatPair, PairRequest } from '../pair.js';
import { viaInternal } from '../via-internal.js';

export interface ResponsesPairRequest extends PairRequest {
  internal: InternalRequest;
  encode: ResponsesEncodeContext;
  onFinal(result: ResponseResult): Promise<void>;
}

function responsesTo(upstreamFormat: WireFormat, req: ResponsesPairRequest): FormatPair {
  return viaInternal({ ...req, clientFormat: 'responses', upstreamFormat, stream: req.internal.stream, includeUsage: true, responses: { ctx: req.encode, onFinal: req.onFinal } });
}

export const responsesToOpenai = (req: ResponsesPairRequest): FormatPair => responsesTo('openai', req);
export const responsesToAnthropic = (req: ResponsesPairRequest): FormatPair => responsesTo('anthropic', req);
