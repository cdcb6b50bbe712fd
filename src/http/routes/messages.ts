// POST /v1/messages and /v1/messages/count_tokens (Anthropic format). Billing, vision checks and
// request ids are those of every completion: the same exchange, not a copy.
import { upstreamFormat } from '../../upstream/formats/index.js';
import type { CatalogModel, CatalogSource, CatalogUpstream } from '../../catalog/snapshot.js';
import { anthropicJsonRelay, anthropicStreamRelay } from '../../proxy/anthropic-pass-through.js';
import { crossFormatPlan } from '../../proxy/cross-format.js';
import { runExchange, type ExchangeDeps, type ExchangePlan } from '../../proxy/exchange.js';
import { buildUpstreamBodies } from '../../proxy/upstream-bodies.js';
import type { JsonObject } from '../../wire/json-shape.js';
import { decodeMessagesRequest, type DecodedMessagesRequest } from '../../wire/anthropic/messages-request.js';
import { countPromptTokens } from '../../wire/token-count.js';
import { stripGatewayThinking } from '../../wire/translate/index.js';
import type { GatewayContext } from '../state.js';
import { modelForRequest, modelNotFound } from './models.js';

function passThroughRequest(decoded: DecodedMessagesRequest, upstream: CatalogUpstream, outputLimit: number): JsonObject {
  // Thinking blocks we signed (or unsigned ones) came from an OpenAI-format upstream; a real
  // Anthropic server rejects them, so they are removed. Genuine signed blocks pass untouched.
  // A shallow copy, so one upstream's fields never leak into another's body.
  const body = { ...stripGatewayThinking(decoded.body) };
  body.model = upstream.upstreamModel;
  // Exactly the output limit the reservation covers (the client's, capped by the context window).
  body.max_tokens = outputLimit;
  return body;
}

/**
 * The exchange of one messages request. Every upstream body is built here, before the reservation,
 * and the footprint is measured on them (src/proxy/upstream-bodies.ts).
 */
export function messagesPlan(decoded: DecodedMessagesRequest, model: CatalogModel, requestId: string, clientHeaders: Record<string, string>): ExchangePlan {
  const estimateInputTokens = (): Promise<number> => countPromptTokens(decoded.prompt);
  const translated = crossFormatPlan({
    clientFormat: 'anthropic',
    body: decoded.body,
    stream: decoded.stream,
    includeUsage: true,
    model,
    requestId,
    clientHeaders,
    estimateInputTokens,
  });
  const passThrough = decoded.stream ? anthropicStreamRelay({ clientModel: model.id }) : anthropicJsonRelay({ clientModel: model.id });
  const bodies = buildUpstreamBodies(model, decoded.footprint.maxOutputTokens, (upstream, outputLimit) =>
    upstream.format === 'anthropic' ? passThroughRequest(decoded, upstream, outputLimit) : translated.upstreamRequest(upstream, outputLimit),
  );
  return {
    clientFormat: 'anthropic',
    model,
    footprint: bodies.footprint,
    stream: decoded.stream,
    upstreamBody: bodies.body,
    upstreamHeaders: (upstream) => (upstream.format === 'anthropic' ? upstreamFormat('anthropic').protocolHeaders(clientHeaders) : translated.upstreamHeaders(upstream)),
    relay: (upstream) => (upstream.format === 'anthropic' ? passThrough : translated.relay(upstream)),
    estimateInputTokens,
  };
}

function header(ctx: GatewayContext, name: string): string | undefined {
  const v = ctx.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}

export function messages(catalog: CatalogSource, deps: ExchangeDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    const decoded = decodeMessagesRequest(ctx.state.body, { requireMaxTokens: true });
    ctx.state.modelId = decoded.model;
    const model = modelForRequest(catalog.current(), decoded.model, decoded.hasImages, 'blocks');
    const clientHeaders: Record<string, string> = {};
    const version = header(ctx, 'anthropic-version');
    const beta = header(ctx, 'anthropic-beta');
    if (version !== undefined) clientHeaders['anthropic-version'] = version;
    if (beta !== undefined) clientHeaders['anthropic-beta'] = beta;
    await runExchange(ctx, deps, messagesPlan(decoded, model, ctx.state.requestId, clientHeaders));
  };
}

/** Counted here with the gateway's tokenizer: never a paid upstream call, never a charge. */
export function countMessageTokens(catalog: CatalogSource) {
  return async (ctx: GatewayContext): Promise<void> => {
    const decoded = decodeMessagesRequest(ctx.state.body, { requireMaxTokens: false });
    ctx.state.modelId = decoded.model;
    const snapshot = catalog.current();
    if (!snapshot.byId.has(decoded.model)) throw modelNotFound(decoded.model, snapshot);
    ctx.type = 'application/json';
    ctx.body = { input_tokens: await countPromptTokens(decoded.prompt) };
  };
}
