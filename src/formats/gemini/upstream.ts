// A Gemini upstream (Google's Gemini API, docs/wire-formats.md E): its base URL is the bare origin
// (https://generativelanguage.googleapis.com), the model is named in the path, a stream is its own
// endpoint (streamGenerateContent, as server-sent events with alt=sse), and the key goes in
// x-goog-api-key (its servers take it as ?key= too). Its errors read {"error": {"code", "message", "status"}}.
import { isRecord, type JsonObject } from '../../representation/index.js';
import { jsonBytes } from '../../wire/json-shape.js';
import { imageReservationTokens, pdfFootprint } from '../chat-images.js';
import { nestedErrorMessage, type DocumentFootprint, type ImageFootprint, type PdfBilling, type UpstreamFormat } from '../types.js';
import { collectGeminiContent } from './generated.js';
import { encodeGeminiRequest } from './request.js';
import { decodeGeminiResponse } from './response.js';
import { GeminiStreamDecoder } from './stream-decoder.js';
import { GEMINI_IMAGE_BILLING } from './image-billing.js';

/**
 * Gemini bills a PDF by the page, its text not besides: 258 tokens a page on Gemini 2.x, 560 on Gemini 3
 * (media resolution medium, its default for PDFs, which the gateway never changes). The catalog does not
 * say which generation an upstream serves, so the larger. At most 1,000 pages a document.
 */
const PDF: PdfBilling = { tokensPerPage: 560, maxPages: 1000, textBilled: false };

/** Inline images and PDFs where the model reads them: the parts of each content. */
function media(request: JsonObject): { images: ImageFootprint[]; documents: DocumentFootprint[] } {
  const images: ImageFootprint[] = [];
  const documents: DocumentFootprint[] = [];
  const contents = Array.isArray(request.contents) ? request.contents : [];
  for (const c of contents) {
    if (!isRecord(c) || !Array.isArray(c.parts)) continue;
    for (const p of c.parts) {
      const inline = isRecord(p) ? p.inlineData : undefined;
      if (!isRecord(inline) || typeof inline.data !== 'string' || typeof inline.mimeType !== 'string') continue;
      if (inline.mimeType.startsWith('image/')) images.push({ tokens: imageReservationTokens({ data: inline.data }, GEMINI_IMAGE_BILLING), payloadBytes: jsonBytes(inline.data) });
      else if (inline.mimeType === 'application/pdf') documents.push(pdfFootprint(inline.data, PDF));
    }
  }
  return { images, documents };
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
  pdf: PDF,
  image: GEMINI_IMAGE_BILLING,
  bodyShape: (request) => ({
    messages: (Array.isArray(request.contents) ? request.contents.length : 0) + (request.systemInstruction === undefined ? 0 : 1),
    ...media(request),
    addedTokens: 0,
  }),
};
