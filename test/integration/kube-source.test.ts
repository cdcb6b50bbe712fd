// The gateway's Kubernetes inputs on their own, driven through client-node against the fake API
// server: only validated generations are served, watches recover from drops, 410 Gone and API
// errors, and a rotated Secret is read without a restart. Status here is written by the test in the
// operator's place, so each case controls exactly what the gateway sees.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createKubeCatalogSource } from '../../src/catalog/kube-source.js';
import { createKubeSecretResolver } from '../../src/catalog/kube-secrets.js';
import type { ModelCatalogResource } from '../../src/catalog/types.js';
import { FakeKubeApiServer } from '../helpers/fake-kube-apiserver.js';
import { GROUP, PLURAL, VERSION, apis, applyCatalog, catalog, model, putSecret, upstream, waitFor } from './kube-fixtures.js';

const NS = 'src-ns';

/** Writes the catalog's status as the operator would, computed from the object and its generation. */
async function writeCatalogStatus(
  api: FakeKubeApiServer,
  name: string,
  status: (obj: ModelCatalogResource, generation: number) => ModelCatalogResource['status'],
): Promise<void> {
  const { custom } = apis(api.kubeConfig(NS));
  const obj = (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name })) as ModelCatalogResource;
  const generation = obj.metadata.generation ?? 1;
  await custom.replaceNamespacedCustomObjectStatus({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name, body: { ...obj, status: status(obj, generation) } });
}

function markValid(api: FakeKubeApiServer, name: string, health: Record<string, boolean> = {}): Promise<void> {
  return writeCatalogStatus(api, name, (obj, generation) => ({
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
  let api: FakeKubeApiServer;
  beforeEach(async () => {
    api = new FakeKubeApiServer();
    await api.start();
  });
  afterEach(async () => {
    await api.stop();
  });

  it('serves a catalog only once its current generation is validated, and keeps the last valid spec otherwise', async () => {
    const kc = api.kubeConfig(NS);
    const source = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS });
    try {
      await applyCatalog(kc, NS, catalog('c', [model('one', [upstream('u', 'http://127.0.0.1:1/v1')])]));
      await new Promise((r) => setTimeout(r, 150));
      expect(source.current().models).toHaveLength(0); // not validated yet
      await markValid(api, 'c');
      await waitFor('one served', () => source.current().byId.has('one'));

      // An edit the operator has not (yet) validated does not replace the served spec.
      await applyCatalog(kc, NS, catalog('c', [model('two', [upstream('u', 'http://127.0.0.1:1/v1')])]));
      await new Promise((r) => setTimeout(r, 150));
      expect(source.current().byId.has('one')).toBe(true);
      expect(source.current().byId.has('two')).toBe(false);
      await markValid(api, 'c');
      await waitFor('two served', () => source.current().byId.has('two') && !source.current().byId.has('one'));
    } finally {
      await source.close();
    }
  });

  it('a gateway that starts while the current spec is invalid serves the last valid spec from status; a tampered one is refused', async () => {
    const kc = api.kubeConfig(NS);
    await applyCatalog(kc, NS, catalog('c', [model('one', [upstream('u', 'http://127.0.0.1:1/v1')])]));
    await markValid(api, 'c');
    const { custom } = apis(kc);
    const validated = (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'c' })) as ModelCatalogResource;
    const lastValid = { generation: validated.metadata.generation ?? 1, spec: validated.spec };
    // A bad edit the operator marked Valid=False, keeping the validated spec in status.
    await applyCatalog(kc, NS, catalog('c', [model('two', [upstream('u', 'http://127.0.0.1:1/v1')])]));
    const writeStatus = (last: unknown): Promise<void> =>
      writeCatalogStatus(api, 'c', (obj, generation) => ({
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
      expect(errors.join('\n')).toMatch(/last valid spec in the status of src-ns\/c: .*pricing\/input/);
    } finally {
      await strict.close();
    }
  });

  it('routes around an upstream the operator marks unhealthy', async () => {
    const kc = api.kubeConfig(NS);
    await applyCatalog(kc, NS, catalog('c', [model('m', [upstream('a', 'http://127.0.0.1:1/v1'), upstream('b', 'http://127.0.0.1:2/v1')])]));
    await markValid(api, 'c', { 'm/a': false });
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

  it('re-lists after 410 Gone and converges, including deletions missed while disconnected', async () => {
    const kc = api.kubeConfig(NS);
    await applyCatalog(kc, NS, catalog('c1', [model('one', [upstream('u', 'http://127.0.0.1:1/v1')])]));
    await applyCatalog(kc, NS, catalog('c2', [model('two', [upstream('u', 'http://127.0.0.1:1/v1')])]));
    await markValid(api, 'c1');
    await markValid(api, 'c2');
    const swaps: number[] = [];
    const source = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS });
    source.onSwap((s) => swaps.push(s.generation));
    try {
      expect(source.current().byId.has('one') && source.current().byId.has('two')).toBe(true);
      // While the watch is down: a delete and an add, then history is compacted away.
      api.injectError({ watch: true, code: 503, reason: 'ServiceUnavailable', times: 2 });
      api.dropWatches();
      await apis(kc).custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'c1' });
      await applyCatalog(kc, NS, catalog('c3', [model('three', [upstream('u', 'http://127.0.0.1:1/v1')])]));
      await markValid(api, 'c3');
      api.compact();
      await waitFor('converged after 410', () => {
        const s = source.current();
        return !s.byId.has('one') && s.byId.has('two') && s.byId.has('three');
      });
      expect(api.expiredWatches).toBeGreaterThanOrEqual(1);
      const relisted = api.requests.filter((r) => r === `GET /apis/${GROUP}/${VERSION}/namespaces/${NS}/${PLURAL}`);
      expect(relisted.length).toBeGreaterThanOrEqual(2); // the first list and the re-list after 410
      expect(swaps.length).toBeGreaterThan(0);

      // And after the re-list the watch is live again.
      await applyCatalog(kc, NS, catalog('c4', [model('four', [upstream('u', 'http://127.0.0.1:1/v1')])]));
      await markValid(api, 'c4');
      await waitFor('four served', () => source.current().byId.has('four'));
    } finally {
      await source.close();
    }
  });

  it('a rotated Secret is resolved without a restart', async () => {
    const kc = api.kubeConfig(NS);
    await putSecret(kc, NS, 'keys', { openai: 'sk-old' });
    const resolver = await createKubeSecretResolver({ kubeConfig: kc, namespace: NS });
    try {
      expect(resolver.resolve({ name: 'keys', key: 'openai' })).toBe('sk-old');
      expect(resolver.resolve({ name: 'keys', key: 'missing' })).toBeUndefined();
      expect(resolver.resolve({ name: 'nope', key: 'openai' })).toBeUndefined();
      await putSecret(kc, NS, 'keys', { openai: 'sk-new' });
      await waitFor('rotated key', () => resolver.resolve({ name: 'keys', key: 'openai' }) === 'sk-new');
      api.dropWatches(); // a reconnect must not lose the current value
      await putSecret(kc, NS, 'keys', { openai: 'sk-newer' });
      await waitFor('rotated again after reconnect', () => resolver.resolve({ name: 'keys', key: 'openai' }) === 'sk-newer');
      await apis(kc).core.deleteNamespacedSecret({ name: 'keys', namespace: NS });
      await waitFor('deleted', () => resolver.resolve({ name: 'keys', key: 'openai' }) === undefined);
    } finally {
      await resolver.close();
    }
  });

  it('fails start-up with a clear error when the API server refuses the list', async () => {
    api.injectError({ path: '/modelcatalogs', code: 403, reason: 'Forbidden', message: 'forbidden', times: 100 });
    await expect(createKubeCatalogSource({ kubeConfig: api.kubeConfig(NS), namespace: NS, syncTimeoutMs: 500 })).rejects.toThrow(
      /listing ModelCatalogs in namespace src-ns did not complete/,
    );
  });
});
