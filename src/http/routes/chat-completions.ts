// POST /v1/chat/completions: decode, check the model and its capabilities, then the metered exchange
// with the chat-completions client's format pairs.
import type { CatalogModel, CatalogSource } from '../../catalog/snapshot.js';
import { runExchange, type ExchangeDeps, type ExchangePlan } from '../../exchange/exchange.js';
import { exchangePlan } from '../../exchange/exchange-plan.js';
import { chatCompletionPairs } from '../../translate/index.js';
import { decodeChatRequest, type DecodedChatRequest } from '../../decode/chat-request.js';
import { openaiPromptParts } from '../../wire/openai/prompt-parts.js';
import { countPromptTokens } from '../../wire/token-count.js';
import type { ClientBody } from '../../request/client-body.js';
import type { GatewayContext } from '../../request/state.js';
import { modelForRequest } from './models.js';

export function chatCompletionPlan(decoded: DecodedChatRequest, model: CatalogModel, requestId: string, clientBody?: ClientBody): ExchangePlan {
  const estimateInputTokens = (): Promise<number> => countPromptTokens(openaiPromptParts(decoded.body));
  return exchangePlan({
    clientFormat: 'openai',
    model,
    stream: decoded.stream,
    maxOutputTokens: decoded.maxOutputTokens,
    pairs: chatCompletionPairs({ decoded, clientBody, model, requestId, estimateInputTokens }),
    estimateInputTokens,
  });
}

export function chatCompletions(catalog: CatalogSource, deps: ExchangeDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    const decoded = decodeChatRequest(ctx.state.body);
    ctx.state.modelId = decoded.model;
    const model = modelForRequest(catalog.current(), decoded.model, decoded.hasImages, 'parts');
    await runExchange(ctx, deps, chatCompletionPlan(decoded, model, ctx.state.requestId, ctx.state.rawBody));
  };
}
