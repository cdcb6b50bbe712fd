// The catalog and upstream credentials from the Kubernetes API (TOLLGATE_CATALOG_SOURCE=kubernetes).
// Its own module so the gateway imports @kubernetes/client-node only when it runs in a cluster: the
// client's generated API models cost a process about 65 MB of memory that a file catalog never needs.
import { KubeConfig } from '@kubernetes/client-node';
import { createKubeCatalogSource } from './kube-source.js';
import { createKubeSecretResolver } from './kube-secrets.js';
import type { CatalogSource, SecretResolver } from './snapshot.js';

export async function openKubeCatalog(opts: { namespace?: string; onError: (err: unknown, context?: string) => void }): Promise<{ catalog: CatalogSource; secrets: SecretResolver }> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const where = opts.namespace ? { namespace: opts.namespace } : {};
  const catalog = await createKubeCatalogSource({ kubeConfig, ...where, onError: opts.onError });
  const secrets = await createKubeSecretResolver({ kubeConfig, ...where, onError: opts.onError });
  return { catalog, secrets };
}
