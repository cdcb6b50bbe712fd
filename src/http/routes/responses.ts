// The OpenAI Responses API: POST /v1/responses through the same metered exchange as the other two
// formats (translated to chat completions or to messages, and back), and GET / DELETE of stored
// responses and their input items. Prior context (previous_response_id) and referenced items are
// loaded from the account's store before the request is decoded, so the reservation counts every
// byte that will be sent.
import { createHash } from 'node:crypto';
import type { CatalogSource } from '../../catalog/snapshot.js';
import { runExchange, type ExchangeDeps } from '../../exchange/exchange.js';
import { exchangePlan } from '../../exchange/exchange-plan.js';
import { responsesPairs } from '../../responses/pair.js';
import type { ResponsesStore } from '../../responses/store.js';
import { openaiPromptParts } from '../../wire/openai/prompt-parts.js';
import { decodeResponsesRequest, type ResponseResult, type ResponsesEncodeContext } from '../../formats/openai-responses/index.js';
import { encodeOpenAIRequest } from '../../formats/openai-chat/index.js';
import { countPromptTokens } from '../../wire/token-count.js';
import { isRecord, type JsonObject } from '../../wire/json-shape.js';
import { GatewayError } from '../../request/gateway-error.js';
import type { GatewayContext } from '../../request/state.js';
import { modelForRequest } from './models.js';

export interface ResponsesDeps {
  store: ResponsesStore;
  /** Signs the reasoning envelope (TOLLGATE_REASONING_KEY). */
  envelopeKey: Buffer;
  onStoreError?: (err: unknown) => void;
}

const accountTagOf = (accountId: string): string => createHash('sha256').update(accountId).digest('base64url').slice(0, 16);

function accountOf(ctx: GatewayContext): string {
  const key = ctx.state.key;
  if (key === undefined) throw new GatewayError(401, 'An API key is required.', { code: 'invalid_api_key' });
  return key.accountId;
}

const notFound = (id: string, param?: string): GatewayError =>
  new GatewayError(404, `${param === 'previous_response_id' ? 'Previous response' : 'Response'} with id '${id}' not found.`, { code: param === 'previous_response_id' ? 'previous_response_not_found' : 'not_found', ...(param === undefined ? {} : { param }) });

/** Item references replaced by the stored items (the context a follow-up continues from is self-contained). */
function resolved(items: JsonObject[], found: Map<string, JsonObject>): JsonObject[] {
  return items.map((it) => (it.type === 'item_reference' && typeof it.id === 'string' ? (found.get(it.id) ?? it) : it));
}

/** Input items with ids (a client may send none), for input_items and later references. */
function withIds(items: JsonObject[], responseId: string): JsonObject[] {
  const base = responseId.replace(/^resp_/, '');
  return items.map((it, i) => (typeof it.id === 'string' && it.id !== '' ? it : { ...it, id: `${it.type === 'function_call_output' ? 'fco' : 'msg'}_${base}_in${i}` }));
}

export function createResponse(catalog: CatalogSource, exchange: ExchangeDeps, deps: ResponsesDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    const accountId = accountOf(ctx);
    const body = ctx.state.body;
    if (!isRecord(body)) throw new GatewayError(400, 'Request body must be a JSON object.', { code: 'invalid_request' });
    const previousId = typeof body.previous_response_id === 'string' && body.previous_response_id !== '' ? body.previous_response_id : undefined;
    const previous = previousId === undefined ? undefined : await deps.store.get(accountId, previousId);
    if (previousId !== undefined && previous === undefined) throw notFound(previousId, 'previous_response_id');
    if (previous?.contextLost === true) {
      throw new GatewayError(400, `Previous response '${previousId ?? ''}' is stored, but an earlier response of its conversation is not (expired, deleted, or evicted by the account's storage bound): send the conversation's history as input instead.`, { code: 'previous_response_not_found', param: 'previous_response_id' });
    }
    const refs = Array.isArray(body.input) ? body.input.flatMap((it) => (isRecord(it) && it.type === 'item_reference' && typeof it.id === 'string' ? [it.id] : [])) : [];
    const found = await deps.store.items(accountId, refs);
    const accountTag = accountTagOf(accountId);
    // A request the gateway cannot serve throws TranslationError: the HTTP edge answers it as a 400.
    const decoded = decodeResponsesRequest(body, { priorItems: previous?.context ?? [], resolveItem: (id) => found.get(id), envelopeKey: deps.envelopeKey, accountTag });
    const internal = decoded.internal;
    ctx.state.modelId = internal.model;
    const hasImages = internal.messages.some((m) => m.content.some((p) => p.type === 'image' || (p.type === 'tool_result' && p.content.some((c) => c.type === 'image'))));
    const model = modelForRequest(catalog.current(), internal.model, hasImages, 'parts');
    if (decoded.droppedTools.length > 0) ctx.set('x-tollgate-dropped-tools', decoded.droppedTools.join(', '));

    const requestId = ctx.state.requestId;
    const id = `resp_${requestId.replace(/^req_/, '')}`;
    const encodeCtx: ResponsesEncodeContext = { id, createdAt: Math.floor(Date.now() / 1000), model: model.id, request: decoded, envelopeKey: deps.envelopeKey, accountTag };
    const inputItems = withIds(resolved(decoded.inputItems, found), id);
    const onFinal = async (result: ResponseResult): Promise<void> => {
      if (!decoded.store || result.body.status === 'failed') return;
      // A store that fails does not fail the answer the client paid for; it is logged.
      await deps.store
        .save({ id, accountId, body: result.body, context: [...(previous?.context ?? []), ...inputItems, ...result.storedOutput], inputItems, ...(previousId === undefined ? {} : { previousId }) }, [...inputItems, ...result.storedOutput])
        .then((kept) => {
          if (!kept) deps.onStoreError?.(new Error(`response ${id} is larger than the account's stored-response bound: not stored`));
        })
        .catch((err: unknown) => deps.onStoreError?.(err));
    };
    const estimateInputTokens = (): Promise<number> => countPromptTokens(openaiPromptParts(encodeOpenAIRequest(internal, { supportsReasoning: model.supportsReasoning })));
    const plan = exchangePlan({
      clientFormat: 'openai',
      outputLimitField: 'max_output_tokens',
      model,
      stream: internal.stream,
      maxOutputTokens: internal.maxOutputTokens,
      pairs: responsesPairs({ internal, model, requestId, estimateInputTokens, encode: encodeCtx, onFinal }),
      estimateInputTokens,
    });
    await runExchange(ctx, exchange, plan);
  };
}

export function getResponse(deps: ResponsesDeps) {
  return async (ctx: GatewayContext & { params: Record<string, string> }): Promise<void> => {
    const id = ctx.params.id ?? '';
    const stored = await deps.store.get(accountOf(ctx), id);
    if (stored === undefined) throw notFound(id);
    ctx.body = stored.body;
  };
}

export function deleteResponse(deps: ResponsesDeps) {
  return async (ctx: GatewayContext & { params: Record<string, string> }): Promise<void> => {
    const id = ctx.params.id ?? '';
    if (!(await deps.store.delete(accountOf(ctx), id))) throw notFound(id);
    ctx.body = { id, object: 'response', deleted: true };
  };
}

export function listInputItems(deps: ResponsesDeps) {
  return async (ctx: GatewayContext & { params: Record<string, string> }): Promise<void> => {
    const id = ctx.params.id ?? '';
    const stored = await deps.store.get(accountOf(ctx), id);
    if (stored === undefined) throw notFound(id);
    const order = ctx.query.order === 'asc' ? 'asc' : 'desc';
    const limitRaw = Number(ctx.query.limit ?? 20);
    const limit = Number.isInteger(limitRaw) && limitRaw >= 1 && limitRaw <= 100 ? limitRaw : 20;
    let items = order === 'asc' ? [...stored.inputItems] : [...stored.inputItems].reverse();
    const after = typeof ctx.query.after === 'string' ? ctx.query.after : undefined;
    if (after !== undefined) items = items.slice(items.findIndex((it) => it.id === after) + 1);
    const page = items.slice(0, limit);
    ctx.body = { object: 'list', data: page, first_id: page[0]?.id ?? null, last_id: page[page.length - 1]?.id ?? null, has_more: items.length > limit };
  };
}
