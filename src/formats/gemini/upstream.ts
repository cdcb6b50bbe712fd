// A Gemini upstream (Google's Gemini API, docs/wire-formats.md E): its base URL is the bare origin
// (https://generativelanguage.googleapis.com), the model is named in the path, a stream is its own
// endpoint (streamGenerateContent, as server-sent events with alt=sse), and the key goes in
// x-goog-api-key (its servers take it as ?key= too). Its errors read {"error": {"code", "message", "status"}}.
import { isRecord, type JsonObject } from '../../translate/representation/index.js';
import { imagePayloadTokens } from '../../wire/image-tokens.js';
import { jsonBytes } from '../../wire/json-shape.js';
import { nestedErrorMessage, type ImageFootprint, type UpstreamFormat } from '../types.js';
import { collectGeminiContent } from './generated.js';
import { encodeGeminiRequest } from './request.js';
import { decodeGeminiResponse } from './response.js';
import { GeminiStreamDecoder } from './stream-decoder.js';

/** Inline images where the model reads them: the parts of each content. */
function images(request: JsonObject): ImageFootprint[] {
  const found: ImageFootprint[] = [];
  const contents = Array.isArray(request.contents) ? request.contents : [];
  for (const c of contents) {
    if (!isRecord(c) || !Array.isArray(c.parts)) continue;
    for (const p of c.parts) {
      const inline = isRecord(p) ? p.inlineData : undefined;
      if (!isRecord(inline) || typeof inline.data !== 'string' || typeof inline.mimeType !== 'string' || !inline.mimeType.startsWith('image/')) continue;
      found.push({ tokens: imagePayloadTokens({ data: inline.data }), payloadBytes: jsonBytes(inline.data) });
    }
  }
  return found;
}

export const geminiUpstream: UpstreamFormat = {
  chatPath: (basePath, model, stream) =>
    `${basePath}/v1beta/models/${encodeURIComponent(model)}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`,
  modelsPath: (basePath) => `${basePath}/v1beta/models`,
  defaultCredentialsHeader: 'x-goog-api-key',
  credentialQueryParameter: 'key',
  protocolHeaders: () => ({}),
  errorMessage: nestedErrorMessage,
  encodeRequest(req, ctx) {
    const body = encodeGeminiRequest(req, { supportsReasoning: ctx.supportsReasoning, defaultMaxOutputTokens: ctx.defaultMaxOutputTokens });
    if (ctx.outputLimit !== undefined && isRecord(body.generationConfig)) body.generationConfig.maxOutputTokens = ctx.outputLimit;
    return body;
  },
  decodeResponse: decodeGeminiResponse,
  streamDecoder: () => new GeminiStreamDecoder(),
  collectGenerated: collectGeminiContent,
  bodyShape: (request) => ({
    messages: (Array.isArray(request.contents) ? request.contents.length : 0) + (request.systemInstruction === undefined ? 0 : 1),
    images: images(request),
  }),
};
