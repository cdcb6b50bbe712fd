// POST /v1/chat/completions: decode, check the model and its capabilities, then the metered exchange.
import type { CatalogModel, CatalogSource } from '../../catalog/snapshot.js';
import { runExchange, type ExchangeDeps, type ExchangePlan } from '../../proxy/exchange.js';
import { openaiJsonRelay, openaiStreamRelay } from '../../proxy/openai-pass-through.js';
import { buildUpstreamBodies } from '../../proxy/upstream-bodies.js';
import { decodeChatRequest, type DecodedChatRequest } from '../../wire/openai/chat-request.js';
import { openaiChatUpstreamRequest } from '../../wire/openai/chat-upstream.js';
import { openaiPromptParts } from '../../wire/openai/prompt-parts.js';
import { countPromptTokens } from '../../wire/token-count.js';
import type { GatewayContext } from '../state.js';
import { modelForRequest } from './models.js';
import { crossFormatPlan } from '../../proxy/cross-format.js';

/**
 * The exchange of one chat-completions request. Every upstream body is built here, before the
 * reservation, and the footprint is measured on them (src/proxy/upstream-bodies.ts).
 */
export function chatCompletionPlan(decoded: DecodedChatRequest, model: CatalogModel, requestId: string): ExchangePlan {
  const relayOptions = { completionId: `chatcmpl-${requestId}`, clientModel: model.id, includeUsage: decoded.includeUsage };
  const passThrough = decoded.stream ? openaiStreamRelay(relayOptions) : openaiJsonRelay(relayOptions);
  const estimateInputTokens = (): Promise<number> => countPromptTokens(openaiPromptParts(decoded.body));
  const translated = crossFormatPlan({
    clientFormat: 'openai',
    body: decoded.body,
    stream: decoded.stream,
    includeUsage: decoded.includeUsage,
    model,
    requestId,
    clientHeaders: {},
    estimateInputTokens,
  });
  const bodies = buildUpstreamBodies(model, decoded.footprint.maxOutputTokens, (upstream, outputLimit) =>
    upstream.format === 'openai' ? openaiChatUpstreamRequest(decoded, upstream.upstreamModel, outputLimit) : translated.upstreamRequest(upstream, outputLimit),
  );
  return {
    clientFormat: 'openai',
    model,
    footprint: bodies.footprint,
    stream: decoded.stream,
    upstreamBody: bodies.body,
    upstreamHeaders: (upstream) => (upstream.format === 'openai' ? {} : translated.upstreamHeaders(upstream)),
    relay: (upstream) => (upstream.format === 'openai' ? passThrough : translated.relay(upstream)),
    estimateInputTokens,
  };
}

export function chatCompletions(catalog: CatalogSource, deps: ExchangeDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    ctx.state.route = '/v1/chat/completions';
    const decoded = decodeChatRequest(ctx.state.body);
    ctx.state.modelId = decoded.model;
    const model = modelForRequest(catalog.current(), decoded.model, decoded.hasImages, 'parts');
    await runExchange(ctx, deps, chatCompletionPlan(decoded, model, ctx.state.requestId));
  };
}
