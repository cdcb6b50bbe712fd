// The gateway's catalog source on its own, through client-node against a real kube-apiserver (etcd +
// kube-apiserver from `make tools`): only validated generations are served, the last valid spec from
// status at start-up, unhealthy upstreams, and a clear error when RBAC refuses the list. Status here
// is written by the test in the operator's place, so each case controls exactly what the gateway
// sees. Watch faults (drops, 410 Gone) are kube-source-faults.test.ts, on the fake API server.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createKubeCatalogSource } from '../../src/catalog/kube-source.js';
import type { ModelCatalogResource } from '../../src/catalog/types.js';
import type { KubeConfig } from '@kubernetes/client-node';
import { startKubeApi, type KubeApi } from '../k8s/harness/kube-api.js';
import { TOOLS_TIMEOUT_MS, ensureTools } from '../k8s/harness/tools.js';
import { GROUP, PLURAL, VERSION, apis, applyCatalog, catalog, model, upstream, waitFor } from '../helpers/kube-fixtures.js';


/** Writes the catalog's status as the operator would, computed from the object and its generation. */
async function writeCatalogStatus(
  kc: KubeConfig,
  NS: string,
  name: string,
  status: (obj: ModelCatalogResource, generation: number) => ModelCatalogResource['status'],
): Promise<void> {
  const { custom } = apis(kc);
  const obj = (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name })) as ModelCatalogResource;
  const generation = obj.metadata.generation ?? 1;
  await custom.replaceNamespacedCustomObjectStatus({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name, body: { ...obj, status: status(obj, generation) } });
}

function markValid(kc: KubeConfig, NS: string, name: string, health: Record<string, boolean> = {}): Promise<void> {
  return writeCatalogStatus(kc, NS, name, (obj, generation) => ({
    observedGeneration: generation,
    conditions: [{ type: 'Valid', status: 'True', reason: 'Validated', message: 'ok', lastTransitionTime: new Date().toISOString(), observedGeneration: generation }],
    models: obj.spec.models.map((m) => ({
      id: m.id,
      ready: true,
      upstreams: m.upstreams.map((u) => ({ name: u.name, healthy: health[`${m.id}/${u.name}`] ?? true })),
    })),
  }));
}

describe('kube catalog source', () => {
  let api: KubeApi;
  // One server for the file; each case gets a namespace of its own.
  let NS = '';
  let cases = 0;
  beforeAll(async () => {
    ensureTools();
    api = await startKubeApi();
  }, TOOLS_TIMEOUT_MS);
  afterAll(async () => {
    await api?.stop();
  });
  beforeEach(async () => {
    cases += 1;
    NS = `src-${cases}`;
    await api.createNamespace(NS);
  });

  it('serves a catalog only once its current generation is validated, and keeps the last valid spec otherwise', async () => {
    const kc = api.kubeConfig(NS);
    const source = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS });
    try {
      await applyCatalog(kc, NS, catalog('c', [model('one', [upstream('u', 'http://127.0.0.1:1/v1')])]));
      await new Promise((r) => setTimeout(r, 150));
      expect(source.current().models).toHaveLength(0); // not validated yet
      await markValid(kc, NS, 'c');
      await waitFor('one served', () => source.current().byId.has('one'));

      // An edit the operator has not (yet) validated does not replace the served spec.
      await applyCatalog(kc, NS, catalog('c', [model('two', [upstream('u', 'http://127.0.0.1:1/v1')])]));
      await new Promise((r) => setTimeout(r, 150));
      expect(source.current().byId.has('one')).toBe(true);
      expect(source.current().byId.has('two')).toBe(false);
      await markValid(kc, NS, 'c');
      await waitFor('two served', () => source.current().byId.has('two') && !source.current().byId.has('one'));
    } finally {
      await source.close();
    }
  });

  it('a gateway that starts while the current spec is invalid serves the last valid spec from status; a tampered one is refused', async () => {
    const kc = api.kubeConfig(NS);
    await applyCatalog(kc, NS, catalog('c', [model('one', [upstream('u', 'http://127.0.0.1:1/v1')])]));
    await markValid(kc, NS, 'c');
    const { custom } = apis(kc);
    const validated = (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'c' })) as ModelCatalogResource;
    const lastValid = { generation: validated.metadata.generation ?? 1, spec: validated.spec };
    // A bad edit the operator marked Valid=False, keeping the validated spec in status.
    await applyCatalog(kc, NS, catalog('c', [model('two', [upstream('u', 'http://127.0.0.1:1/v1')])]));
    const writeStatus = (last: unknown): Promise<void> =>
      writeCatalogStatus(kc, NS, 'c', (obj, generation) => ({
        ...obj.status,
        observedGeneration: generation,
        conditions: [{ type: 'Valid', status: 'False', reason: 'CredentialsNotFound', message: 'bad', lastTransitionTime: new Date().toISOString(), observedGeneration: generation }],
        lastValid: last,
      }) as ModelCatalogResource['status']);
    await writeStatus(lastValid);
    const source = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS });
    try {
      expect(source.current().models.map((m) => m.id)).toEqual(['one']);
    } finally {
      await source.close();
    }

    // A last valid spec that fails the catalog checks (status written by someone else) is not served.
    await writeStatus({ generation: lastValid.generation, spec: { models: [{ ...lastValid.spec.models[0], pricing: { input: '-1', output: '1.00' } }] } });
    const errors: string[] = [];
    const strict = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS, onError: (err, context) => errors.push(`${context}: ${String(err)}`) });
    try {
      expect(strict.current().models).toHaveLength(0);
      expect(errors.join('\n')).toMatch(/last valid spec in the status of src-\d+\/c: .*pricing\/input/);
    } finally {
      await strict.close();
    }
  });

  it('routes around an upstream the operator marks unhealthy', async () => {
    const kc = api.kubeConfig(NS);
    await applyCatalog(kc, NS, catalog('c', [model('m', [upstream('a', 'http://127.0.0.1:1/v1'), upstream('b', 'http://127.0.0.1:2/v1')])]));
    await markValid(kc, NS, 'c', { 'm/a': false });
    const source = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS });
    try {
      const ups = source.current().byId.get('m')?.upstreams;
      expect(ups?.map((u) => [u.name, u.healthy])).toEqual([
        ['a', false],
        ['b', true],
      ]);
    } finally {
      await source.close();
    }
  });

  it('fails start-up with a clear error when the API server refuses the list', async () => {
    // A ServiceAccount the chart did not bind: the real server's RBAC answers 403 to its list.
    const kc = api.kubeConfig(NS);
    kc.users = kc.users.map((u) => ({ ...u, impersonateUser: `system:serviceaccount:${NS}:unbound` }));
    await expect(createKubeCatalogSource({ kubeConfig: kc, namespace: NS, syncTimeoutMs: 2000 })).rejects.toThrow(
      new RegExp(`listing ModelCatalogs in namespace ${NS} did not complete`),
    );
  });
});
