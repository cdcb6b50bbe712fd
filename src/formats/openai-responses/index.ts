// The OpenAI Responses API as a client format: its request decoder (prior items resolved by the
// caller), its reply and stream encoders, and the reasoning envelope its stored items carry.
export { decodeResponsesRequest, type DecodedResponsesRequest } from './request.js';
export { encodeResponsesResponse, ResponsesStreamEncoder, type ResponseResult, type ResponsesEncodeContext } from './response.js';
