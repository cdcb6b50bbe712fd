// GET /v1/models and /v1/models/:id. The bodies are built once per catalog snapshot; prices are
// spliced in as the catalog's own decimal text, so no float ever touches them.
import type { CatalogModel, CatalogSnapshot, PricingDisplay } from '../../catalog/snapshot.js';
import { CLIENT_FORMAT_NAMES, type ClientFormatName } from '../../formats/index.js';
import { GatewayError } from '../../request/gateway-error.js';
import type { GatewayContext } from '../../request/state.js';
import { redactCredentials } from '../../wire/upstream-message.js';
import { COST_CEILING_HEADER, OUTPUT_LIMIT_HEADER } from '../../reserve/cost-ceiling.js';

/** The model list and each model's entry, as one client format reads them. */
interface RenderedModels {
  list: string;
  one: Map<string, string>;
}

const rendered = new WeakMap<CatalogSnapshot, Record<ClientFormatName, RenderedModels>>();

/** JSON text of a decimal price string as a JSON number literal ("0.30" -> 0.30). */
const priceLiteral = (decimal: string): string => (/^\d+(\.\d+)?$/.test(decimal) ? decimal : JSON.stringify(decimal));

/**
 * The `pricing` member, the same in both shapes: each price the catalog sets, by its class. Cache reads
 * are also `cached_input`, the member's name before cache writes had prices, for clients that read it.
 */
function pricingMember(p: PricingDisplay): string {
  const prices: [string, string | undefined][] = [
    ['input', p.input],
    ['output', p.output],
    ['cache_read', p.cacheRead],
    ['cached_input', p.cacheRead],
    ['cache_write_5m', p.cacheWrite5m],
    ['cache_write_1h', p.cacheWrite1h],
    ['reasoning', p.reasoning],
  ];
  const members = prices.flatMap(([name, price]) => (price === undefined ? [] : [`"${name}":${priceLiteral(price)}`]));
  return `"pricing":{${members.join(',')},"currency":"USD","unit":"per 1M tokens"}`;
}

/**
 * How a client caps what one request may cost, in every entry (SDKs keep unknown members): the request
 * header and the answer's header naming the output limit the gateway sent under it.
 */
const COST_CEILING = { header: COST_CEILING_HEADER, unit: 'USD', output_limit_header: OUTPUT_LIMIT_HEADER };

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
    cost_ceiling: COST_CEILING,
  });
  return `${base.slice(0, -1)},${pricingMember(m.pricing.display)}}`;
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
    cost_ceiling: COST_CEILING,
  });
  return `${base.slice(0, -1)},${pricingMember(m.pricing.display)}}`;
}

/** Each client format's model entry and list around the entries (docs/wire-formats.md A.8, B.7). */
const FORMATS: Record<ClientFormatName, { entry(m: CatalogModel): string; list(entries: string[], first: string | null, last: string | null): string }> = {
  openai: { entry: openaiEntry, list: (entries) => `{"object":"list","data":[${entries.join(',')}]}` },
  anthropic: {
    entry: anthropicEntry,
    list: (entries, first, last) => `{"data":[${entries.join(',')}],"has_more":false,"first_id":${JSON.stringify(first)},"last_id":${JSON.stringify(last)}}`,
  },
};

function render(snapshot: CatalogSnapshot, format: ClientFormatName): RenderedModels {
  let r = rendered.get(snapshot);
  if (r === undefined) {
    const first = snapshot.models[0]?.id ?? null;
    const last = snapshot.models.at(-1)?.id ?? null;
    const build = (name: ClientFormatName): RenderedModels => {
      const one = new Map(snapshot.models.map((m) => [m.id, FORMATS[name].entry(m)]));
      return { list: FORMATS[name].list([...one.values()], first, last), one };
    };
    r = Object.fromEntries(CLIENT_FORMAT_NAMES.map((name) => [name, build(name)])) as Record<ClientFormatName, RenderedModels>;
    rendered.set(snapshot, r);
  }
  return r[format];
}

export function listModels(current: () => CatalogSnapshot) {
  return (ctx: GatewayContext): void => {
    ctx.type = 'application/json';
    ctx.body = render(current(), ctx.state.format).list;
  };
}

export function getModel(current: () => CatalogSnapshot) {
  return (ctx: GatewayContext & { params: Record<string, string> }): void => {
    const snapshot = current();
    const id = ctx.params.id ?? '';
    const model = snapshot.byId.get(id);
    if (model === undefined) throw modelNotFound(id, snapshot);
    ctx.type = 'application/json';
    ctx.body = render(snapshot, ctx.state.format).one.get(model.id);
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
