// POST /v1/chat/completions: decode, check the model and its capabilities, then the metered exchange.
import type { CatalogSource } from '../../catalog/snapshot.js';
import { runExchange, type ExchangeDeps, type ExchangePlan } from '../../proxy/exchange.js';
import { openaiJsonRelay, openaiStreamRelay } from '../../proxy/openai-pass-through.js';
import { decodeChatRequest } from '../../wire/openai/chat-request.js';
import { openaiChatUpstreamBody } from '../../wire/openai/chat-upstream.js';
import { openaiPromptParts } from '../../wire/openai/prompt-parts.js';
import { countPromptTokens } from '../../wire/token-count.js';
import type { GatewayContext } from '../state.js';
import { modelForRequest } from './models.js';
import { crossFormatPlan } from '../../proxy/cross-format.js';

export function chatCompletions(catalog: CatalogSource, deps: ExchangeDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    ctx.state.route = '/v1/chat/completions';
    const decoded = decodeChatRequest(ctx.state.body);
    ctx.state.modelId = decoded.model;
    const model = modelForRequest(catalog.current(), decoded.model, decoded.hasImages, 'parts');
    const relayOptions = { completionId: `chatcmpl-${ctx.state.requestId}`, clientModel: model.id, includeUsage: decoded.includeUsage };
    const passThrough = decoded.stream ? openaiStreamRelay(relayOptions) : openaiJsonRelay(relayOptions);
    const estimateInputTokens = (): Promise<number> => countPromptTokens(openaiPromptParts(decoded.body));
    const translated = crossFormatPlan({
      clientFormat: 'openai',
      body: decoded.body,
      stream: decoded.stream,
      includeUsage: decoded.includeUsage,
      model,
      requestId: ctx.state.requestId,
      clientHeaders: {},
      estimateInputTokens,
    });
    const plan: ExchangePlan = {
      clientFormat: 'openai',
      model,
      footprint: decoded.footprint,
      stream: decoded.stream,
      upstreamBody: (upstream, outputLimit) =>
        upstream.format === 'openai' ? openaiChatUpstreamBody(decoded, upstream.upstreamModel, outputLimit) : translated.upstreamBody(upstream, outputLimit),
      upstreamHeaders: (upstream) => (upstream.format === 'openai' ? {} : translated.upstreamHeaders(upstream)),
      relay: (upstream) => (upstream.format === 'openai' ? passThrough : translated.relay(upstream)),
      estimateInputTokens,
    };
    await runExchange(ctx, deps, plan);
  };
}
