// Upstream credentials from Kubernetes Secrets, kept live by an informer (list + watch) on the
// namespace's Secrets. resolve() is a synchronous map read on the request path; a rotated key is
// picked up from the watch event, so rotation needs no restart and no per-request API call.
import { CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { SecretReference, SecretResolver } from './snapshot.js';
import { startInformer, withTimeout, type Informer } from './kube-informer.js';

export interface KubeSecretResolver extends SecretResolver {
  /** Resolves after the first list; until then resolve() returns undefined. */
  readonly synced: Promise<void>;
  close(): Promise<void>;
}

export interface KubeSecretResolverOptions {
  kubeConfig: KubeConfig;
  /** Namespace whose Secrets are read; default: the kubeconfig context's namespace, else `default`. */
  namespace?: string;
  onError?: (err: unknown) => void;
  /** Wait at most this long for the first list (default 10 s). */
  syncTimeoutMs?: number;
}

export function namespaceOf(kubeConfig: KubeConfig, namespace?: string): string {
  if (namespace) return namespace;
  const context = kubeConfig.getContextObject(kubeConfig.getCurrentContext());
  return context?.namespace ?? 'default';
}

export async function createKubeSecretResolver(opts: KubeSecretResolverOptions): Promise<KubeSecretResolver> {
  const namespace = namespaceOf(opts.kubeConfig, opts.namespace);
  const core = opts.kubeConfig.makeApiClient(CoreV1Api);
  // Decoded once per Secret change, not per request.
  const decoded = new Map<string, ReadonlyMap<string, string>>();
  const store = (secret: V1Secret): void => {
    const name = secret.metadata?.name;
    if (!name) return;
    const values = new Map<string, string>();
    for (const [key, value] of Object.entries(secret.data ?? {})) {
      values.set(key, Buffer.from(value, 'base64').toString('utf8'));
    }
    decoded.set(name, values);
  };
  const informer: Informer<V1Secret> = startInformer<V1Secret>({
    kubeConfig: opts.kubeConfig,
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`,
    list: () => core.listNamespacedSecret({ namespace }),
    onAdd: store,
    onUpdate: store,
    onDelete: (secret) => {
      if (secret.metadata?.name) decoded.delete(secret.metadata.name);
    },
    onError: opts.onError,
  });
  try {
    await withTimeout(informer.synced, opts.syncTimeoutMs ?? 10_000, `listing Secrets in namespace ${namespace}`);
  } catch (err) {
    await informer.stop();
    throw err;
  }
  return {
    synced: informer.synced,
    resolve: (ref: SecretReference) => decoded.get(ref.name)?.get(ref.key),
    close: () => informer.stop(),
  };
}
