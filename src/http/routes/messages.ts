// POST /v1/messages and /v1/messages/count_tokens (Anthropic format). Billing, vision checks and
// request ids are those of every completion: the same exchange, not a copy.
import type { CatalogModel, CatalogSource } from '../../catalog/snapshot.js';
import { runExchange, type ExchangeDeps, type ExchangePlan } from '../../exchange/exchange.js';
import { exchangePlan } from '../../exchange/exchange-plan.js';
import { messagesPairs } from '../../translate/index.js';
import type { ClientProtocolHeaders } from '../../formats/index.js';
import { decodeMessagesRequest, type DecodedMessagesRequest } from '../../decode/messages-request.js';
import { countPromptTokens } from '../../wire/token-count.js';
import { anthropicPromptParts } from '../../wire/anthropic/prompt-parts.js';
import type { ClientBody } from '../../request/client-body.js';
import type { GatewayContext } from '../../request/state.js';
import { modelForRequest, modelNotFound } from './models.js';

export function messagesPlan(decoded: DecodedMessagesRequest, model: CatalogModel, requestId: string, clientHeaders: ClientProtocolHeaders, clientBody?: ClientBody): ExchangePlan {
  const estimateInputTokens = (): Promise<number> => countPromptTokens(anthropicPromptParts(decoded.body));
  return exchangePlan({
    clientFormat: 'anthropic',
    model,
    stream: decoded.stream,
    maxOutputTokens: decoded.maxOutputTokens,
    pairs: messagesPairs({ decoded, clientBody, model, requestId, clientHeaders, estimateInputTokens }),
    estimateInputTokens,
  });
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
    const clientHeaders: ClientProtocolHeaders = {};
    const version = header(ctx, 'anthropic-version');
    const beta = header(ctx, 'anthropic-beta');
    if (version !== undefined) clientHeaders['anthropic-version'] = version;
    if (beta !== undefined) clientHeaders['anthropic-beta'] = beta;
    await runExchange(ctx, deps, messagesPlan(decoded, model, ctx.state.requestId, clientHeaders, ctx.state.rawBody));
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
    ctx.body = { input_tokens: await countPromptTokens(anthropicPromptParts(decoded.body)) };
  };
}
