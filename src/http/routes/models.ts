// GET /v1/models and /v1/models/:id. The bodies are built once per catalog snapshot; prices are
// spliced in as the catalog's own decimal text, so no float ever touches them.
import type { CatalogModel, CatalogSnapshot } from '../../catalog/snapshot.js';
import { GatewayError } from '../../request/gateway-error.js';
import type { GatewayContext } from '../../request/state.js';
import { redactCredentials } from '../../wire/upstream-message.js';

interface RenderedModels {
  openaiList: string;
  anthropicList: string;
  openaiOne: Map<string, string>;
  anthropicOne: Map<string, string>;
}

const rendered = new WeakMap<CatalogSnapshot, RenderedModels>();

/** JSON text of a decimal price string as a JSON number literal ("0.30" -> 0.30). */
const priceLiteral = (decimal: string): string => (/^\d+(\.\d+)?$/.test(decimal) ? decimal : JSON.stringify(decimal));

function openaiEntry(m: CatalogModel): string {
  const base = JSON.stringify({
    id: m.id,
    object: 'model',
    created: m.created,
    owned_by: 'tollgate',
    name: m.displayName,
    kind: m.kind,
    context_length: m.contextWindow,
    context: m.contextDisplay,
    max_output_tokens: m.defaultMaxOutputTokens,
    supports_tools: m.supportsTools,
    supports_vision: m.supportsVision,
    supports_reasoning: m.supportsReasoning,
    abliterated: m.abliterated,
  });
  const p = m.pricing.display;
  const pricing = `"pricing":{"input":${priceLiteral(p.input)},"output":${priceLiteral(p.output)}${p.cachedInput ? `,"cached_input":${priceLiteral(p.cachedInput)}` : ''}${p.reasoning ? `,"reasoning":${priceLiteral(p.reasoning)}` : ''},"currency":"USD","unit":"per 1M tokens"}`;
  return `${base.slice(0, -1)},${pricing}}`;
}

function anthropicEntry(m: CatalogModel): string {
  const base = JSON.stringify({
    type: 'model',
    id: m.id,
    display_name: m.displayName,
    created_at: new Date(m.created * 1000).toISOString().replace('.000Z', 'Z'),
    max_input_tokens: m.contextWindow,
    max_tokens: m.defaultMaxOutputTokens,
    kind: m.kind,
    supports_tools: m.supportsTools,
    supports_vision: m.supportsVision,
    supports_reasoning: m.supportsReasoning,
    abliterated: m.abliterated,
  });
  const p = m.pricing.display;
  return `${base.slice(0, -1)},"pricing":{"input":${priceLiteral(p.input)},"output":${priceLiteral(p.output)},"currency":"USD","unit":"per 1M tokens"}}`;
}

function render(snapshot: CatalogSnapshot): RenderedModels {
  let r = rendered.get(snapshot);
  if (r === undefined) {
    const openaiOne = new Map<string, string>();
    const anthropicOne = new Map<string, string>();
    for (const m of snapshot.models) {
      openaiOne.set(m.id, openaiEntry(m));
      anthropicOne.set(m.id, anthropicEntry(m));
    }
    const first = snapshot.models[0]?.id ?? null;
    const last = snapshot.models.at(-1)?.id ?? null;
    r = {
      openaiList: `{"object":"list","data":[${[...openaiOne.values()].join(',')}]}`,
      anthropicList: `{"data":[${[...anthropicOne.values()].join(',')}],"has_more":false,"first_id":${JSON.stringify(first)},"last_id":${JSON.stringify(last)}}`,
      openaiOne,
      anthropicOne,
    };
    rendered.set(snapshot, r);
  }
  return r;
}

export function listModels(current: () => CatalogSnapshot) {
  return (ctx: GatewayContext): void => {
    const r = render(current());
    ctx.type = 'application/json';
    ctx.body = ctx.state.format === 'anthropic' ? r.anthropicList : r.openaiList;
  };
}

export function getModel(current: () => CatalogSnapshot) {
  return (ctx: GatewayContext & { params: Record<string, string> }): void => {
    const snapshot = current();
    const id = ctx.params.id ?? '';
    const model = snapshot.byId.get(id);
    if (model === undefined) throw modelNotFound(id, snapshot);
    const r = render(snapshot);
    ctx.type = 'application/json';
    ctx.body = (ctx.state.format === 'anthropic' ? r.anthropicOne : r.openaiOne).get(model.id);
  };
}

export function modelNotFound(id: string, snapshot: CatalogSnapshot): GatewayError {
  const known = snapshot.models.map((m) => m.id).join(', ');
  // Echoed short and without anything key-shaped (a key pasted into the wrong field is never quoted back).
  return new GatewayError(404, `The model \`${redactCredentials(id.slice(0, 200))}\` does not exist. Available models: ${known}.`, { code: 'model_not_found', param: 'model' });
}

/** The model a completion asked for, checked against what the request carries (before any charge). */
export function modelForRequest(snapshot: CatalogSnapshot, id: string, hasImages: boolean, partsWord: 'parts' | 'blocks'): CatalogModel {
  const model = snapshot.byId.get(id);
  if (model === undefined) throw modelNotFound(id, snapshot);
  if (hasImages && !model.supportsVision) {
    const withVision = snapshot.models.filter((m) => m.supportsVision).map((m) => m.id).join(', ');
    throw new GatewayError(400, `The model ${model.id} does not read images (supports_vision is false). Remove the image ${partsWord}, or use a model with vision: ${withVision}.`, { code: 'model_not_vision_capable', param: 'messages' });
  }
  return model;
}
