// The gateway's watches under faults a real API server cannot be made to produce on cue, driven
// through client-node against the fake API server (test/helpers/fake-kube-apiserver.ts): watch
// connections dropped mid-stream, 5xx answers to a chosen number of watch calls, and history
// compacted while disconnected (410 Gone on the resumed watch). Everything else about the catalog
// source runs against a real kube-apiserver in kube-source.test.ts.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createKubeCatalogSource } from '../../src/catalog/kube-source.js';
import { createKubeSecretResolver } from '../../src/catalog/kube-secrets.js';
import type { ModelCatalogResource } from '../../src/catalog/types.js';
import { FakeKubeApiServer } from '../helpers/fake-kube-apiserver.js';
import { GROUP, PLURAL, VERSION, apis, applyCatalog, catalog, model, putSecret, upstream, waitFor } from '../helpers/kube-fixtures.js';

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
});
