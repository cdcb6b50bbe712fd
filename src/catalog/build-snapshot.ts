// Validated catalog specs -> one immutable CatalogSnapshot. All per-request work that can be done
// once (price conversion, defaults, the id/alias index) happens here, at swap time.
import { upstreamFormat } from '../formats/index.js';
import { findDuplicateModelIds } from './manifest.js';
import { usdPerMillionToMicros } from './price.js';
import type { CatalogModel, CatalogSnapshot, CatalogUpstream, ModelPricing, PricingDisplay, UpstreamTimeouts } from './snapshot.js';
import type { ModelCatalogSpec, ModelSpec, UpstreamSpec } from './types.js';

export interface CatalogInput {
  /** The catalog's origin (file path or namespace/name); becomes CatalogModel.source. */
  source: string;
  spec: ModelCatalogSpec;
  /** Health from the operator's probes; upstreams default to healthy. */
  upstreamHealthy?: (modelId: string, upstreamName: string) => boolean;
}

export const DEFAULT_TIMEOUTS: Readonly<UpstreamTimeouts> = Object.freeze({
  connectMs: 5_000,
  firstByteMs: 120_000,
  idleMs: 120_000,
});
export const DEFAULT_WEIGHT = 1;
/** `created` of a model whose catalog gives none: a fixed date, so /v1/models is stable across restarts. */
export const DEFAULT_CREATED_UNIX = Date.UTC(2026, 0, 1) / 1000;

/** Reads an RFC 3339 date or date-time as unix seconds. */
function unixSeconds(created: string | undefined, where: string): number {
  if (created === undefined) return DEFAULT_CREATED_UNIX;
  const ms = Date.parse(created.length === 10 ? `${created}T00:00:00Z` : created);
  if (Number.isNaN(ms)) throw new Error(`${where}: created ${JSON.stringify(created)} is not an RFC 3339 date`);
  return Math.floor(ms / 1000);
}

function buildPricing(p: ModelSpec['pricing']): ModelPricing {
  // `cachedInput` is the older name of `cacheRead` (the CRD refuses both at once): one price from here on.
  const cacheRead = p.cacheRead ?? p.cachedInput;
  const optional = { cacheRead, cacheWrite5m: p.cacheWrite5m, cacheWrite1h: p.cacheWrite1h, reasoning: p.reasoning };
  const display: PricingDisplay = { input: p.input, output: p.output };
  const pricing: Omit<ModelPricing, 'display'> = { input: usdPerMillionToMicros(p.input), output: usdPerMillionToMicros(p.output) };
  for (const name of ['cacheRead', 'cacheWrite5m', 'cacheWrite1h', 'reasoning'] as const) {
    const price = optional[name];
    if (price === undefined) continue;
    display[name] = price;
    pricing[name] = usdPerMillionToMicros(price);
  }
  return Object.freeze({ ...pricing, display: Object.freeze(display) });
}

function buildUpstream(u: UpstreamSpec, healthy: boolean): CatalogUpstream {
  return Object.freeze({
    name: u.name,
    baseUrl: u.baseUrl,
    format: u.format,
    upstreamModel: u.model,
    ...(u.credentialsSecretRef
      ? { credentialsSecretRef: Object.freeze({ name: u.credentialsSecretRef.name, key: u.credentialsSecretRef.key }) }
      : {}),
    credentialsHeader: u.credentialsHeader ?? upstreamFormat(u.format).defaultCredentialsHeader,
    weight: u.weight ?? DEFAULT_WEIGHT,
    timeouts: Object.freeze({ ...DEFAULT_TIMEOUTS, ...u.timeouts }),
    healthy,
  });
}

/** A Map that refuses changes once built: the snapshot is shared by every in-flight request. */
class FrozenMap<K, V> extends Map<K, V> {
  #sealed = false;
  constructor(entries: Iterable<readonly [K, V]>) {
    // Map's constructor would call this.set before #sealed exists; fill through super.set instead.
    super();
    for (const [k, v] of entries) super.set(k, v);
    this.#sealed = true;
  }
  override set(key: K, value: V): this {
    if (this.#sealed) throw new TypeError('catalog snapshot is immutable');
    return super.set(key, value);
  }
  override delete(): boolean {
    throw new TypeError('catalog snapshot is immutable');
  }
  override clear(): void {
    throw new TypeError('catalog snapshot is immutable');
  }
}

/**
 * Builds an immutable snapshot from validated catalogs (callers validate first; see
 * validateCatalogObject). Throws when an id or alias is defined twice across catalogs.
 */
export function buildSnapshot(catalogs: readonly CatalogInput[], generation: number, now: number = Date.now()): CatalogSnapshot {
  const dups = findDuplicateModelIds(catalogs);
  if (dups.length > 0) throw new Error(dups.map((d) => `${d.source}: ${d.path}: ${d.message}`).join('\n'));

  const models: CatalogModel[] = [];
  for (const { source, spec, upstreamHealthy } of catalogs) {
    spec.models.forEach((m, i) => {
      models.push(
        Object.freeze({
          id: m.id,
          displayName: m.displayName,
          kind: m.kind,
          contextWindow: m.context.tokens,
          contextDisplay: m.context.display,
          pricing: buildPricing(m.pricing),
          supportsTools: m.capabilities.tools,
          supportsVision: m.capabilities.vision,
          supportsReasoning: m.capabilities.reasoning,
          abliterated: m.abliterated,
          defaultMaxOutputTokens: m.defaultMaxOutputTokens,
          aliases: Object.freeze([...(m.aliases ?? [])]),
          created: unixSeconds(m.created, `${source}: /spec/models/${i}`),
          upstreams: Object.freeze(m.upstreams.map((u) => buildUpstream(u, upstreamHealthy?.(m.id, u.name) ?? true))),
          source,
        }),
      );
    });
  }
  const index: [string, CatalogModel][] = [];
  for (const model of models) {
    index.push([model.id, model]);
    for (const alias of model.aliases) index.push([alias, model]);
  }
  return Object.freeze({
    generation,
    builtAt: now,
    models: Object.freeze(models),
    byId: new FrozenMap(index),
  });
}
