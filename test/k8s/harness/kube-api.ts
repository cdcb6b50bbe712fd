// A real API server ready for Tollgate's objects: the control plane (control-plane.ts) with the
// ModelCatalog CRD installed and served, and the namespaces a test names.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, loadYaml, type KubeConfig, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from './control-plane.js';
import { ROOT } from './tools.js';

export const CRD_NAME = 'modelcatalogs.tollgate.dev';

export interface KubeApi {
  controlPlane: ControlPlane;
  /** An admin client config whose default namespace is `namespace`. */
  kubeConfig(namespace?: string): KubeConfig;
  createNamespace(name: string): Promise<void>;
  /** Replaces the installed CRD (e.g. with an older, laxer schema) and waits until it is served. */
  replaceCrd(edit: (crd: V1CustomResourceDefinition) => void): Promise<void>;
  stop(): Promise<void>;
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** crds/modelcatalog.yaml as client-node's typed object. Plain parsed YAML would not do: the typed
 *  serializer drops keys it knows only by their TypeScript names, x-kubernetes-validations among them,
 *  and the CRD would reach the server without its spec-level CEL rules. */
export function catalogCrd(): V1CustomResourceDefinition {
  return loadYaml<V1CustomResourceDefinition>(readFileSync(join(ROOT, 'crds', 'modelcatalog.yaml'), 'utf8'));
}

export async function startKubeApi(namespaces: string[] = []): Promise<KubeApi> {
  const cp = await startControlPlane();
  try {
    const admin = cp.kubeConfig();
    const extensions = admin.makeApiClient(ApiextensionsV1Api);
    await extensions.createCustomResourceDefinition({ body: catalogCrd() });
    const served = async (namespace = 'default') => {
      await admin.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({ group: 'tollgate.dev', version: 'v1alpha1', namespace, plural: 'modelcatalogs' });
      return true;
    };
    await until('the ModelCatalog CRD to be served', served);
    const createNamespace = async (name: string) => {
      await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
    };
    for (const ns of namespaces) await createNamespace(ns);
    return {
      controlPlane: cp,
      kubeConfig: (namespace) => cp.kubeConfig(namespace),
      createNamespace,
      async replaceCrd(edit) {
        const current = await extensions.readCustomResourceDefinition({ name: CRD_NAME });
        const next = catalogCrd();
        edit(next);
        next.metadata = { ...next.metadata, resourceVersion: current.metadata?.resourceVersion };
        await extensions.replaceCustomResourceDefinition({ name: CRD_NAME, body: next });
        // The served schema follows the stored CRD asynchronously.
        await until('the replaced CRD to be established', async () => {
          const crd = await extensions.readCustomResourceDefinition({ name: CRD_NAME });
          return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true;
        });
      },
      stop: () => cp.stop(),
    };
  } catch (err) {
    await cp.stop();
    throw err;
  }
}
