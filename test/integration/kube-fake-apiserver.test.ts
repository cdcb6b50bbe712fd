// The fake API server must behave like the real one where our code relies on it; these checks go
// through @kubernetes/client-node (and raw HTTP for the wire details) as production code does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PatchStrategy, Watch, setHeaderOptions } from '@kubernetes/client-node';
import type { ModelCatalogResource } from '../../src/catalog/types.js';
import { FakeKubeApiServer } from '../helpers/fake-kube-apiserver.js';
import { GROUP, PLURAL, VERSION, apis, catalog, model, upstream, waitFor } from '../helpers/kube-fixtures.js';

const NS = 'fake-ns';
const ref = { group: GROUP, version: VERSION, namespace: NS, plural: PLURAL };

/** client-node's ApiException: code, and the Status body (a string for custom objects, parsed for typed APIs). */
function status(err: unknown): { code?: number; reason?: string; kind?: string; message?: string } {
  const e = err as { code?: number; body?: unknown };
  const body = (typeof e.body === 'string' ? JSON.parse(e.body) : e.body) as { reason?: string; kind?: string; code?: number; message?: string };
  expect(body.code).toBe(e.code);
  return { code: e.code, reason: body.reason, kind: body.kind, message: body.message };
}

describe('fake Kubernetes API server', () => {
  let api: FakeKubeApiServer;
  beforeAll(async () => {
    api = new FakeKubeApiServer();
    await api.start();
  });
  afterAll(async () => {
    await api.stop();
  });

  it('answers NotFound and AlreadyExists with Status objects', async () => {
    const { custom } = apis(api.kubeConfig(NS));
    const notFound = await custom.getNamespacedCustomObject({ ...ref, name: 'missing' }).catch((e: unknown) => e);
    expect(status(notFound)).toMatchObject({ code: 404, kind: 'Status', reason: 'NotFound', message: 'modelcatalogs.tollgate.dev "missing" not found' });
    const obj = catalog('dup', [model('x', [upstream('u', 'http://127.0.0.1:1/v1')])]);
    await custom.createNamespacedCustomObject({ ...ref, body: obj });
    const exists = await custom.createNamespacedCustomObject({ ...ref, body: obj }).catch((e: unknown) => e);
    expect(status(exists)).toMatchObject({ code: 409, reason: 'AlreadyExists' });
  });

  it('validates ModelCatalogs against the CRD as the real server does (422 Invalid with causes)', async () => {
    const { custom } = apis(api.kubeConfig(NS));
    const before = api.resourceVersion;
    const bad = catalog('bad', [{ ...model('x', [upstream('u', 'http://127.0.0.1:1/v1')]), kind: 'Abliterated' }]); // abliterated: false
    const err = await custom.createNamespacedCustomObject({ ...ref, body: bad }).catch((e: unknown) => e);
    const s = status(err);
    expect(s).toMatchObject({ code: 422, reason: 'Invalid' });
    expect(s.message).toContain('ModelCatalog.tollgate.dev "bad" is invalid');
    expect(api.resourceVersion).toBe(before); // nothing stored, no version consumed
  });

  it('keeps server metadata, bumps generation only on spec changes, and refuses stale writes', async () => {
    const { custom } = apis(api.kubeConfig(NS));
    const created = (await custom.createNamespacedCustomObject({
      ...ref,
      body: { ...catalog('gen', [model('x', [upstream('u', 'http://127.0.0.1:1/v1')])]), status: { modelCount: 5 } },
    })) as ModelCatalogResource & { metadata: { creationTimestamp?: string } };
    expect(created.metadata.generation).toBe(1);
    expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata.creationTimestamp).toMatch(/Z$/);
    expect(created.status).toBeUndefined(); // status is not settable on create with a status subresource

    const labelled = (await custom.patchNamespacedCustomObject(
      { ...ref, name: 'gen', body: { metadata: { labels: { a: 'b' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as ModelCatalogResource;
    expect(labelled.metadata.generation).toBe(1);
    expect(Number(labelled.metadata.resourceVersion)).toBeGreaterThan(Number(created.metadata.resourceVersion));

    const specPatched = (await custom.patchNamespacedCustomObject(
      { ...ref, name: 'gen', body: [{ op: 'replace', path: '/spec/models/0/displayName', value: 'Renamed' }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    )) as ModelCatalogResource;
    expect(specPatched.metadata.generation).toBe(2);
    expect(specPatched.spec.models[0]?.displayName).toBe('Renamed');

    const stale = await custom
      .replaceNamespacedCustomObject({ ...ref, name: 'gen', body: { ...specPatched, metadata: { ...specPatched.metadata, resourceVersion: created.metadata.resourceVersion } } })
      .catch((e: unknown) => e);
    expect(status(stale)).toMatchObject({ code: 409, reason: 'Conflict' });

    const strategic = await custom
      .patchNamespacedCustomObject({ ...ref, name: 'gen', body: { spec: {} } }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch))
      .catch((e: unknown) => e);
    expect(status(strategic)).toMatchObject({ code: 415, reason: 'UnsupportedMediaType' });

    // A status write keeps generation and ignores spec; a main-resource write ignores status.
    const withStatus = (await custom.patchNamespacedCustomObjectStatus(
      { ...ref, name: 'gen', body: { spec: { models: [] }, status: { modelCount: 1 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as ModelCatalogResource;
    expect(withStatus.metadata.generation).toBe(2);
    expect(withStatus.spec.models).toHaveLength(1);
    expect(withStatus.status?.modelCount).toBe(1);
    const mainWrite = (await custom.replaceNamespacedCustomObject({ ...ref, name: 'gen', body: { ...withStatus, status: { modelCount: 7 } } })) as ModelCatalogResource;
    expect(mainWrite.status?.modelCount).toBe(1);
  });

  it('streams watch events from a resourceVersion, with bookmarks, and 410 after compaction', async () => {
    const kc = api.kubeConfig(NS);
    const { custom } = apis(kc);
    const list = (await custom.listNamespacedCustomObject(ref)) as { metadata: { resourceVersion: string } };
    const events: string[] = [];
    const watch = new Watch(kc);
    const controller = await watch.watch(
      `/apis/${GROUP}/${VERSION}/namespaces/${NS}/${PLURAL}`,
      { resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: true },
      (type, obj: ModelCatalogResource) => events.push(`${type}:${obj.metadata.name ?? ''}`),
      () => undefined,
    );
    await custom.createNamespacedCustomObject({ ...ref, body: catalog('w', [model('x', [upstream('u', 'http://127.0.0.1:1/v1')])]) });
    await custom.deleteNamespacedCustomObject({ ...ref, name: 'w' });
    await waitFor('events', () => events.includes('DELETED:w'));
    expect(events.filter((e) => !e.startsWith('BOOKMARK'))).toEqual(['ADDED:w', 'DELETED:w']);
    expect(events[0]).toMatch(/^BOOKMARK/);
    controller.abort();

    api.compact();
    const gone: { type: string; code?: number }[] = [];
    let ended = false;
    await watch.watch(
      `/apis/${GROUP}/${VERSION}/namespaces/${NS}/${PLURAL}`,
      { resourceVersion: list.metadata.resourceVersion },
      (type, obj: { code?: number }) => gone.push({ type, code: obj.code }),
      () => {
        ended = true;
      },
    );
    await waitFor('410 and end', () => ended);
    expect(gone).toEqual([{ type: 'ERROR', code: 410 }]);
  });
});
