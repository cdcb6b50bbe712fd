// The catalog snapshot: an immutable, validated view of every model the gateway serves.
// Sources (file, Kubernetes) build a new snapshot and swap it in whole; requests read the one
// that was current when they arrived, so a reload never changes a request half way through.
import type { UpstreamFormatName } from '../formats/index.js';

export type ModelKind = 'Abliterated' | 'Uncensored';

/** Integer micro-USD (1e-6 USD). Never a float on a money path. */
export type Micros = number;

/** Prices in integer micro-USD per 1,000,000 tokens, converted once from the catalog's decimal USD strings. */
export interface ModelPricing {
  input: Micros;
  output: Micros;
  /** Price of input tokens read from a prompt cache (the catalog's `cacheRead`, or its older `cachedInput`); else `input`. */
  cacheRead?: Micros;
  /** Price of input tokens written to a 5-minute prompt cache; else `input`. */
  cacheWrite5m?: Micros;
  /** Price of input tokens written to a 1-hour prompt cache; else `input`. */
  cacheWrite1h?: Micros;
  /** Price of reasoning tokens, when the catalog gives one; else they cost `output`. */
  reasoning?: Micros;
  /** The catalog's original decimal strings (USD per 1M tokens), for display in /v1/models. */
  display: PricingDisplay;
}

/** A model's prices as the catalog wrote them (decimal USD per 1M tokens); `cachedInput` is folded into `cacheRead`. */
export interface PricingDisplay {
  input: string;
  output: string;
  cacheRead?: string;
  cacheWrite5m?: string;
  cacheWrite1h?: string;
  reasoning?: string;
}

export interface SecretReference {
  name: string;
  key: string;
}

export interface UpstreamTimeouts {
  /** TCP connect timeout. */
  connectMs: number;
  /** Time allowed until the upstream's response headers arrive. */
  firstByteMs: number;
  /** Longest gap between two body chunks (streams) or until the whole body (non-streaming). */
  idleMs: number;
}

export interface CatalogUpstream {
  /** Unique within the model; used in metrics labels and status. */
  name: string;
  /**
   * Base address in the convention of the format's own SDK: an OpenAI-format base ends in `/v1`
   * (requests go to `${baseUrl}/chat/completions`); an Anthropic-format base has no `/v1`
   * (requests go to `${baseUrl}/v1/messages`).
   */
  baseUrl: string;
  format: UpstreamFormatName;
  /** The model name the upstream knows; the client's model id is rewritten to it. */
  upstreamModel: string;
  /** Where the upstream's own API key lives; absent for upstreams that need none. */
  credentialsSecretRef?: SecretReference;
  /** Header the credential is sent in: `authorization` (as Bearer) or `x-api-key`. */
  credentialsHeader: string;
  weight: number;
  timeouts: UpstreamTimeouts;
  /** False when the operator's probe marked it unhealthy; routing prefers healthy upstreams. */
  healthy: boolean;
}

export interface CatalogModel {
  id: string;
  displayName: string;
  kind: ModelKind;
  /** Context window in tokens (1M = 1_000_000, 512K = 512_000). */
  contextWindow: number;
  /** The context as the catalogue writes it, e.g. "1M", "512K". */
  contextDisplay: string;
  pricing: ModelPricing;
  supportsTools: boolean;
  supportsVision: boolean;
  supportsReasoning: boolean;
  abliterated: boolean;
  /** Output limit reserved for (and sent upstream) when a request gives none. */
  defaultMaxOutputTokens: number;
  /** Other ids that route to this model (e.g. names a client hard-codes). */
  aliases: readonly string[];
  /** Unix seconds; shown as `created` in /v1/models. */
  created: number;
  upstreams: readonly CatalogUpstream[];
  /** The catalog (namespace/name or file path) this model came from. */
  source: string;
}

export interface CatalogSnapshot {
  /** Increases by one with every swap; exported as a metric. */
  readonly generation: number;
  /** Unix ms when this snapshot was built. */
  readonly builtAt: number;
  /** Models in catalog order. */
  readonly models: readonly CatalogModel[];
  /** Lookup by id and by alias. */
  readonly byId: ReadonlyMap<string, CatalogModel>;
}

/** Somewhere snapshots come from. `current()` is cheap: it returns the last good snapshot. */
export interface CatalogSource {
  current(): CatalogSnapshot;
  /** Called after each swap to a new snapshot. Returns an unsubscribe function. */
  onSwap(listener: (snapshot: CatalogSnapshot) => void): () => void;
  close(): Promise<void>;
}

/** Resolves Secret references to their current value (live: rotation needs no restart). */
export interface SecretResolver {
  resolve(ref: SecretReference): string | undefined;
}

/** One upstream of one model, as a map key (health by probe, status entries): model ids and upstream names never hold a NUL. */
export function upstreamKey(modelId: string, upstreamName: string): string {
  return `${modelId}\0${upstreamName}`;
}
