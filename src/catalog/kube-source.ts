// The gateway's catalog from ModelCatalog objects, kept by an informer (list + watch; re-list on
// 410 Gone, reconnect on drops). A catalog enters a snapshot only once the operator has validated
// that very generation (condition Valid=True with observedGeneration == metadata.generation);
// until then, and after a bad edit, the catalog's last validated spec keeps serving: the one this
// gateway saw, or for a gateway that starts after the bad edit, the one the operator keeps in
// status.lastValid (without it such a gateway served nothing and never became ready). Upstream health
// comes from the operator's status, so an upstream it marks down is avoided while another is healthy.
import { CustomObjectsApi, type KubeConfig, type KubernetesListObject } from '@kubernetes/client-node';
import { buildSnapshot } from './build-snapshot.js';
import { startInformer, withTimeout, type Informer } from './kube-informer.js';
import { namespaceOf } from './kube-secrets.js';
import { formatCatalogErrors, validateCatalogObject } from './manifest.js';
import { upstreamKey, type CatalogSnapshot, type CatalogSource } from './snapshot.js';
import type { ModelCatalogResource, ModelCatalogSpec } from './types.js';

export const CATALOG_GROUP = 'tollgate.dev';
export const CATALOG_VERSION = 'v1alpha1';
export const CATALOG_PLURAL = 'modelcatalogs';

export interface KubeCatalogSourceOptions {
  kubeConfig: KubeConfig;
  /** Namespace to watch; default: the kubeconfig context's namespace, else `default`. */
  namespace?: string;
  /** Told about watch/list failures and snapshots that could not be built; the last snapshot stays. */
  onError?: (err: unknown, context: string) => void;
  /** Wait at most this long for the first list (default 10 s). */
  syncTimeoutMs?: number;
}

/** True when the operator has validated exactly this generation of the catalog. */
export function isValidated(obj: ModelCatalogResource): boolean {
  const generation = obj.metadata.generation;
  const valid = obj.status?.conditions?.find((c) => c.type === 'Valid');
  return (
    valid?.status === 'True' &&
    generation !== undefined &&
    obj.status?.observedGeneration === generation &&
    (valid.observedGeneration === undefined || valid.observedGeneration === generation)
  );
}

interface ServedCatalog {
  source: string;
  generation: number;
  spec: ModelCatalogSpec;
  /** upstreamKey(model, upstream) -> healthy, from the operator's probes. */
  health: ReadonlyMap<string, boolean>;
  /** Cheap change detector: a status refresh that changes nothing does not rebuild. */
  signature: string;
}

function healthOf(obj: ModelCatalogResource): Map<string, boolean> {
  const health = new Map<string, boolean>();
  for (const model of obj.status?.models ?? []) {
    for (const upstream of model.upstreams ?? []) health.set(upstreamKey(model.id, upstream.name), upstream.healthy);
  }
  return health;
}

export async function createKubeCatalogSource(opts: KubeCatalogSourceOptions): Promise<CatalogSource> {
  const namespace = namespaceOf(opts.kubeConfig, opts.namespace);
  const api = opts.kubeConfig.makeApiClient(CustomObjectsApi);
  const served = new Map<string, ServedCatalog>();
  const listeners = new Set<(snapshot: CatalogSnapshot) => void>();
  let generation = 0;
  let snapshot: CatalogSnapshot = buildSnapshot([], generation);
  let ready = false;

  const rebuild = (): void => {
    const catalogs = [...served.values()]
      .sort((a, b) => a.source.localeCompare(b.source))
      .map((c) => ({
        source: c.source,
        spec: c.spec,
        upstreamHealthy: (modelId: string, upstream: string) => c.health.get(upstreamKey(modelId, upstream)) ?? true,
      }));
    let next: CatalogSnapshot;
    try {
      next = buildSnapshot(catalogs, generation + 1);
    } catch (err) {
      // Two validated catalogs can still collide (validated at different times); keep serving.
      opts.onError?.(err, 'building the catalog snapshot');
      return;
    }
    generation += 1;
    snapshot = next;
    for (const listener of listeners) {
      try {
        listener(snapshot);
      } catch (err) {
        opts.onError?.(err, 'catalog swap listener');
      }
    }
  };

  /** The spec to serve for this object: its own when validated, else the operator's last valid one. */
  const servable = (obj: ModelCatalogResource, source: string): { generation: number; spec: ModelCatalogSpec } | undefined => {
    if (isValidated(obj)) return { generation: obj.metadata.generation ?? 0, spec: obj.spec };
    const last = obj.status?.lastValid;
    const current = served.get(source);
    // What this gateway serves is at least as recent: keep it.
    if (last === undefined || (current !== undefined && current.generation >= last.generation)) return undefined;
    // Status is writable by more than the operator: held to the same checks as a spec.
    const checked = validateCatalogObject({ ...obj, spec: last.spec }, source);
    if (!checked.ok) {
      opts.onError?.(new Error(formatCatalogErrors(checked.errors)), `the last valid spec in the status of ${source}`);
      return undefined;
    }
    return last;
  };

  const upsert = (obj: ModelCatalogResource): void => {
    const source = `${obj.metadata.namespace ?? namespace}/${obj.metadata.name}`;
    const chosen = servable(obj, source);
    if (chosen === undefined) return; // keep the last validated spec of this catalog, if any
    const health = healthOf(obj);
    const signature = `${chosen.generation}|${JSON.stringify([...health])}`;
    if (served.get(source)?.signature === signature) return;
    served.set(source, { source, generation: chosen.generation, spec: structuredClone(chosen.spec), health, signature });
    if (ready) rebuild();
  };

  const informer: Informer<ModelCatalogResource> = startInformer<ModelCatalogResource>({
    kubeConfig: opts.kubeConfig,
    path: `/apis/${CATALOG_GROUP}/${CATALOG_VERSION}/namespaces/${encodeURIComponent(namespace)}/${CATALOG_PLURAL}`,
    list: async () =>
      (await api.listNamespacedCustomObject({
        group: CATALOG_GROUP,
        version: CATALOG_VERSION,
        namespace,
        plural: CATALOG_PLURAL,
      })) as KubernetesListObject<ModelCatalogResource>,
    onAdd: upsert,
    onUpdate: upsert,
    onDelete: (obj) => {
      if (served.delete(`${obj.metadata.namespace ?? namespace}/${obj.metadata.name}`) && ready) rebuild();
    },
    onError: (err) => opts.onError?.(err, `watching ModelCatalogs in namespace ${namespace}`),
  });

  try {
    await withTimeout(informer.synced, opts.syncTimeoutMs ?? 10_000, `listing ModelCatalogs in namespace ${namespace}`);
  } catch (err) {
    await informer.stop();
    throw err;
  }
  ready = true;
  rebuild();

  return {
    current: () => snapshot,
    onSwap(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close: () => informer.stop(),
  };
}
