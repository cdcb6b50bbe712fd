// The upstream request bodies of one client request, built before the reservation, and the footprint
// the worst case is computed from. The footprint is measured on the bytes that are actually sent, not
// on the fields a decoder knows: any field an upstream bills as input (a document's title, a response
// schema, an assistant's reasoning_content, whatever a client adds next) is in those bytes, so it can
// never slip past the reservation. A model with several upstreams (of different formats) reserves for
// the largest of its bodies, since any of them may serve.
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';
import type { UpstreamBody } from '../translate/pair.js';
import { reservedOutputTokens, inputTokenBound, type RequestFootprint } from './worst-case.js';
import { upstreamFormat, type UpstreamFormatName } from '../formats/index.js';
import type { JsonObject } from '../wire/json-shape.js';

/** Builds the request for one upstream with the output limit the reservation covers. */
export type UpstreamRequestBuilder = (upstream: CatalogUpstream, outputLimit: number) => UpstreamBody;

export interface UpstreamBodies {
  /** The footprint of the largest body (the one with the highest input bound). */
  footprint: RequestFootprint;
  /** The body sent to `upstream`; built once, here, for the reserved output limit. */
  body(upstream: CatalogUpstream, outputLimit: number): string | Buffer;
}

/**
 * The footprint of one upstream body: every byte of its JSON text, except image payloads, which are
 * counted as images (their tokens come from the model's tiling, not their bytes), and the payloads of
 * PDFs a format bills by the page alone (Gemini). A PDF's pages are counted as the format bills them,
 * besides its bytes where its text is billed too, and so are the prompt tokens the upstream adds (its
 * tool-use prompt). An image's tokens are its format's bound for its size (UpstreamFormat.image); one
 * whose size cannot be read where the format has no bound for that throws a TranslationError (400).
 * Only the positions where an upstream reads an image or a PDF are looked at: one
 * anywhere else (inside a tool argument, say) is text to the model, and its bytes stay counted.
 */
export function measureUpstreamBody(request: JsonObject, sent: string | Buffer, format: UpstreamFormatName, maxOutputTokens: number | undefined): RequestFootprint {
  const shape = upstreamFormat(format).bodyShape(request);
  let imageTokens = 0;
  let imageBytes = 0;
  for (const image of shape.images) {
    imageTokens += image.tokens;
    imageBytes += image.payloadBytes;
  }
  let addedTokens = shape.addedTokens;
  for (const document of shape.documents) {
    addedTokens += document.tokens;
    imageBytes += document.payloadBytes;
  }
  return {
    textBytes: Buffer.byteLength(sent, 'utf8') - imageBytes,
    messages: shape.messages,
    images: shape.images.length,
    imageTokens,
    addedTokens,
    maxOutputTokens,
  };
}

/**
 * Builds the body of every upstream of `model` for the reserved output limit, and measures them. A body
 * that cannot be built (a request one upstream's format cannot express) is left out of the footprint;
 * asking for it later throws the same error, as it did before. When none can be built, the first
 * error is thrown now: the request is refused before anything is reserved.
 */
export function buildUpstreamBodies(model: CatalogModel, maxOutputTokens: number | undefined, build: UpstreamRequestBuilder): UpstreamBodies {
  const outputLimit = reservedOutputTokens(maxOutputTokens, model);
  const built = new Map<CatalogUpstream, string | Buffer>();
  const failed = new Map<CatalogUpstream, unknown>();
  let footprint: RequestFootprint | undefined;
  let largest = -1;
  for (const upstream of model.upstreams) {
    let request: UpstreamBody;
    let fp: RequestFootprint;
    try {
      request = build(upstream, outputLimit);
      // A body the reservation cannot bound (an image of unknown size where its format has no bound for
      // one) is refused like one its format cannot express.
      fp = measureUpstreamBody(request.json, request.sent, upstream.format, maxOutputTokens);
    } catch (err) {
      failed.set(upstream, err);
      continue;
    }
    built.set(upstream, request.sent);
    const bound = inputTokenBound(fp, model);
    if (bound > largest) {
      largest = bound;
      footprint = fp;
    }
  }
  if (footprint === undefined) {
    if (failed.size > 0) throw failed.values().next().value;
    // A model without upstreams: nothing will be sent, and the exchange reports it.
    footprint = { textBytes: 0, messages: 0, images: 0, maxOutputTokens };
  }
  return {
    footprint,
    body(upstream, limit) {
      const error = failed.get(upstream);
      if (error !== undefined) throw error;
      const sent = limit === outputLimit ? built.get(upstream) : undefined;
      // Handed over once: the exchange tries each upstream once, and a large body should not stay
      // referenced for the whole of a long stream.
      built.delete(upstream);
      return sent ?? build(upstream, limit).sent;
    },
  };
}
