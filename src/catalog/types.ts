// The ModelCatalog resource as it is written (YAML file or Kubernetes object). The CRD in
// crds/modelcatalog.yaml is the source of truth for its schema; these types mirror it.
import type { UpstreamFormatName } from '../formats/index.js';
import type { ModelKind, SecretReference } from './snapshot.js';

export const CATALOG_API_VERSION = 'tollgate.dev/v1alpha1';
export const CATALOG_KIND = 'ModelCatalog';

export interface UpstreamSpec {
  name: string;
  /** OpenAI format: base ending in /v1. Anthropic format: base without /v1. */
  baseUrl: string;
  format: UpstreamFormatName;
  /** The model name at the upstream. */
  model: string;
  credentialsSecretRef?: SecretReference;
  /** Header the credential goes in; default `authorization` (Bearer) for openai, `x-api-key` for anthropic. */
  credentialsHeader?: 'authorization' | 'x-api-key';
  weight?: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number };
}

export interface ModelSpec {
  id: string;
  displayName: string;
  kind: ModelKind;
  context: { tokens: number; display: string };
  /**
   * Decimal strings, USD per 1M tokens. `cacheRead` prices prompt-cache reads, `cacheWrite5m` and
   * `cacheWrite1h` prompt-cache writes by how long the cache is kept; each absent one costs `input`.
   * `cachedInput` is the older name of `cacheRead` (accepted; a catalog gives one of the two).
   */
  pricing: {
    input: string;
    output: string;
    cacheRead?: string;
    cachedInput?: string;
    cacheWrite5m?: string;
    cacheWrite1h?: string;
    reasoning?: string;
  };
  capabilities: { tools: boolean; vision: boolean; reasoning: boolean };
  abliterated: boolean;
  defaultMaxOutputTokens: number;
  aliases?: string[];
  /** RFC 3339 date the model was added; shown as `created`. */
  created?: string;
  upstreams: UpstreamSpec[];
}

export interface ModelCatalogSpec {
  models: ModelSpec[];
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface CatalogCondition {
  type: 'Valid' | 'Ready' | string;
  status: ConditionStatus;
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface UpstreamHealthStatus {
  name: string;
  healthy: boolean;
  lastProbeTime?: string;
  latencyMs?: number;
  message?: string;
}

export interface ModelHealthStatus {
  id: string;
  ready: boolean;
  upstreams: UpstreamHealthStatus[];
}

export interface ModelCatalogStatus {
  observedGeneration?: number;
  conditions?: CatalogCondition[];
  models?: ModelHealthStatus[];
  /**
   * The last spec the operator validated (kept through invalid edits): what a gateway that starts while
   * the current spec is invalid serves.
   */
  lastValid?: { generation: number; spec: ModelCatalogSpec };
  /** For the printer columns. */
  modelCount?: number;
  ready?: string;
}

export interface ModelCatalogResource {
  apiVersion: typeof CATALOG_API_VERSION;
  kind: typeof CATALOG_KIND;
  metadata: {
    name: string;
    namespace?: string;
    generation?: number;
    resourceVersion?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: ModelCatalogSpec;
  status?: ModelCatalogStatus;
}
