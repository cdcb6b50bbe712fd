// The real operator and the real gateway catalog source, both through @kubernetes/client-node against
// a real kube-apiserver on loopback (test/k8s/harness: etcd + kube-apiserver from `make tools`): apply -> Valid/Ready -> served; a bad edit keeps the last
// valid version serving; deletion removes models; an upstream going down shows in status and snapshot.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import { createKubeCatalogSource } from '../../src/catalog/kube-source.js';
import type { CatalogSource } from '../../src/catalog/snapshot.js';
import { startOperator, type OperatorHandle } from '../../operator/controller.js';
import { startKubeApi, type KubeApi } from '../k8s/harness/kube-api.js';
import { TOOLS_TIMEOUT_MS, ensureTools } from '../k8s/harness/tools.js';
import {
  GROUP,
  PLURAL,
  VERSION,
  apis,
  applyCatalog,
  catalog,
  getCatalog,
  model,
  putSecret,
  startFakeUpstream,
  upstream,
  waitFor,
  type FakeUpstream,
} from '../helpers/kube-fixtures.js';

const NS = 'tollgate';

describe('operator + kube catalog source', () => {
  let api: KubeApi;
  let operator: OperatorHandle;
  let source: CatalogSource;
  let up: FakeUpstream;
  let spare: FakeUpstream;
  const sourceErrors: unknown[] = [];
  const logs: string[] = [];

  // On a failure, show what the operator said (it runs in-process with its logs captured).
  beforeEach((ctx) => {
    ctx.onTestFailed(() => console.error(`operator log:\n${logs.join('\n')}\nsource errors: ${sourceErrors.map(String).join('\n')}`));
  });

  beforeAll(async () => {
    ensureTools();
    api = await startKubeApi([NS]);
    up = await startFakeUpstream('sk-upstream-one');
    spare = await startFakeUpstream('sk-upstream-two');
    const kc = api.kubeConfig(NS);
    await putSecret(kc, NS, 'upstream-keys', { primary: 'sk-upstream-one', spare: 'sk-upstream-two' });
    operator = await startOperator({
      kubeConfig: kc,
      watchNamespace: NS,
      leaseNamespace: NS,
      identity: 'op-1',
      probeIntervalMs: 100,
      probeTimeoutMs: 500,
      statusRefreshMs: 60_000,
      // Failover is not under test here: a generous lease keeps a loaded machine from flapping it.
      leaseDurationMs: 5000,
      renewDeadlineMs: 4000,
      retryPeriodMs: 200,
      log: (level, message, fields) => logs.push(`${new Date().toISOString()} ${level} ${message} ${JSON.stringify(fields ?? {})}`),
    });
    source = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS, onError: (e) => sourceErrors.push(e) });
    await waitFor('operator leadership', () => operator.isLeader());
  }, TOOLS_TIMEOUT_MS);

  afterAll(async () => {
    await source?.close();
    await operator?.stop();
    await up?.close();
    await spare?.close();
    await api?.stop();
  });

  it('marks an applied catalog Valid and Ready, and the gateway serves it within 5 s', async () => {
    // 5 s, not the 2 s the fake API server allowed: a real server on a shared 2-core machine took 2.3 s.
    const kc = api.kubeConfig(NS);
    const started = Date.now();
    await applyCatalog(kc, NS, catalog('main', [model('alpha', [upstream('one', up.baseUrl, { name: 'upstream-keys', key: 'primary' })])]));
    const snap = await waitFor('alpha in the snapshot', () => (source.current().byId.has('alpha') ? source.current() : undefined), 5000);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(snap.byId.get('alpha')?.source).toBe(`${NS}/main`);
    expect(snap.byId.get('alpha')?.upstreams[0]?.healthy).toBe(true);

    const obj = await getCatalog(kc, NS, 'main');
    const valid = obj.status?.conditions?.find((c) => c.type === 'Valid');
    const ready = obj.status?.conditions?.find((c) => c.type === 'Ready');
    expect(valid).toMatchObject({ status: 'True', observedGeneration: 1 });
    expect(ready).toMatchObject({ status: 'True', reason: 'UpstreamsHealthy' });
    expect(obj.status).toMatchObject({ observedGeneration: 1, modelCount: 1, ready: 'True' });
    expect(obj.status?.models?.[0]?.upstreams[0]).toMatchObject({ name: 'one', healthy: true });
    expect(typeof obj.status?.models?.[0]?.upstreams[0]?.latencyMs).toBe('number');
    // The probe carried the credential from the Secret (the upstream refuses anything else).
    expect(up.probes).toBeGreaterThan(0);
  });

  it('status writes do not bump metadata.generation; spec writes do', async () => {
    const kc = api.kubeConfig(NS);
    const before = await getCatalog(kc, NS, 'main');
    expect(before.metadata.generation).toBe(1);
    expect(Number(before.metadata.resourceVersion)).toBeGreaterThan(0);
    // Status was written (at least once) and generation stayed at 1.
    expect(before.status?.observedGeneration).toBe(1);
    const { custom } = apis(kc);
    // The operator writes status too: on 409 Conflict read again and retry.
    const written = await waitFor('a status write', async () => {
      const current = await getCatalog(kc, NS, 'main');
      return (await custom.replaceNamespacedCustomObjectStatus({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        name: 'main',
        body: { ...current, spec: { models: [] }, status: { ...current.status, modelCount: 99 } },
      })) as typeof before;
    });
    expect(written.metadata.generation).toBe(1);
    expect(written.spec.models).toHaveLength(1); // spec in a status write is ignored
    // The operator notices its status was tampered with and restores it (level-triggered).
    await waitFor('status restored', async () => (await getCatalog(kc, NS, 'main')).status?.modelCount === 1);
  });

  it('an invalid edit is marked Valid=False with a message, and the gateway keeps serving the previous version', async () => {
    const kc = api.kubeConfig(NS);
    const bad = catalog('main', [model('alpha', [upstream('one', up.baseUrl, { name: 'no-such-secret', key: 'k' })])]);
    const applied = await applyCatalog(kc, NS, bad);
    expect(applied.metadata.generation).toBe(2);
    const obj = await waitFor('Valid=False', async () => {
      const o = await getCatalog(kc, NS, 'main');
      return o.status?.observedGeneration === 2 ? o : undefined;
    });
    const valid = obj.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid?.status).toBe('False');
    expect(valid?.reason).toBe('CredentialsNotFound');
    expect(valid?.message).toContain('no-such-secret');
    expect(obj.status?.ready).toBe('False');
    // Still served, from the last validated generation (the upstream kept its credential reference).
    const served = source.current().byId.get('alpha');
    expect(served?.upstreams[0]?.credentialsSecretRef).toEqual({ name: 'upstream-keys', key: 'primary' });

    // A schema violation is refused by the API server itself (422 Invalid, with the field).
    const schemaBad = catalog('main', [{ ...model('alpha', [upstream('one', up.baseUrl)]), pricing: { input: '-1', output: '1.00' } }]);
    const refused = await applyCatalog(kc, NS, schemaBad).catch((e: unknown) => e as { code?: number; body?: string });
    expect(refused).toMatchObject({ code: 422 });
    expect(String((refused as { body?: string }).body)).toContain('spec.models[0].pricing.input');
    // Where the installed CRD is older and laxer (here: without the price pattern), the operator's
    // own schema check catches it.
    await api.replaceCrd((crd) => {
      const props = crd.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.spec?.properties?.models?.items?.properties?.pricing?.properties;
      if (!props?.input) throw new Error('the CRD has no spec.models[].pricing.input');
      delete props.input.pattern;
    });
    try {
      // The server applies the replaced schema a moment after storing it.
      await waitFor('the laxer CRD to accept the edit', () => applyCatalog(kc, NS, schemaBad).then(() => true, () => false), 15_000);
    } finally {
      await api.replaceCrd(() => undefined);
    }
    const obj3 = await waitFor('schema error status', async () => {
      const o = await getCatalog(kc, NS, 'main');
      return o.status?.observedGeneration === 3 ? o : undefined;
    });
    expect(obj3.status?.conditions?.find((c) => c.type === 'Valid')).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    expect(obj3.status?.conditions?.find((c) => c.type === 'Valid')?.message).toContain('/spec/models/0/pricing/input');
    expect(source.current().byId.get('alpha')?.upstreams[0]?.credentialsSecretRef?.name).toBe('upstream-keys');

    // The operator keeps the last valid version in status, and a gateway that starts now (a new pod
    // during the bad edit) serves it and becomes ready. On 7339c82 such a gateway served no model.
    expect(obj3.status?.lastValid?.generation).toBe(1);
    expect(obj3.status?.lastValid?.spec.models[0]?.upstreams[0]?.credentialsSecretRef).toEqual({ name: 'upstream-keys', key: 'primary' });
    const late = await createKubeCatalogSource({ kubeConfig: kc, namespace: NS, onError: (e) => sourceErrors.push(e) });
    try {
      expect(late.current().models.map((m) => m.id)).toEqual(['alpha']);
      expect(late.current().byId.get('alpha')?.upstreams[0]?.credentialsSecretRef).toEqual({ name: 'upstream-keys', key: 'primary' });
      expect(late.current().byId.get('alpha')?.upstreams[0]?.baseUrl).toBe(up.baseUrl);
    } finally {
      await late.close();
    }

    // Events tell the story.
    const events = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: NS });
    const reasons = events.items.filter((e) => e.involvedObject.name === 'main').map((e) => e.reason);
    expect(reasons).toContain('Validated');
    expect(reasons).toContain('CredentialsNotFound');

    // Fixing the catalog brings it back to Valid and the gateway takes the new version.
    await applyCatalog(kc, NS, catalog('main', [model('alpha', [upstream('one', up.baseUrl, { name: 'upstream-keys', key: 'primary' })]), model('beta', [upstream('two', spare.baseUrl, { name: 'upstream-keys', key: 'spare' })])]));
    await waitFor('beta served', () => source.current().byId.has('beta'));
  });

  it('a duplicate model id in a second catalog marks only the newcomer invalid', async () => {
    const kc = api.kubeConfig(NS);
    await applyCatalog(kc, NS, catalog('extra', [model('alpha', [upstream('x', spare.baseUrl, { name: 'upstream-keys', key: 'spare' })])]));
    const obj = await waitFor('duplicate reported', async () => {
      const o = await getCatalog(kc, NS, 'extra');
      return o.status?.conditions?.find((c) => c.type === 'Valid')?.status === 'False' ? o : undefined;
    });
    expect(obj.status?.conditions?.find((c) => c.type === 'Valid')).toMatchObject({ reason: 'DuplicateModelId' });
    expect((await getCatalog(kc, NS, 'main')).status?.conditions?.find((c) => c.type === 'Valid')?.status).toBe('True');
    expect(source.current().byId.get('alpha')?.source).toBe(`${NS}/main`);
    await apis(kc).custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'extra' });
  });

  it('an upstream going down shows in status, and the snapshot marks it unhealthy', async () => {
    const kc = api.kubeConfig(NS);
    spare.up = false;
    const obj = await waitFor('beta unhealthy in status', async () => {
      const o = await getCatalog(kc, NS, 'main');
      return o.status?.models?.find((m) => m.id === 'beta')?.ready === false ? o : undefined;
    });
    const beta = obj.status?.models?.find((m) => m.id === 'beta');
    expect(beta?.upstreams[0]).toMatchObject({ name: 'two', healthy: false });
    expect(beta?.upstreams[0]?.message).toContain('503');
    expect(beta?.upstreams[0]?.message).not.toContain('sk-upstream');
    expect(obj.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'UpstreamsUnavailable' });
    expect(obj.status?.conditions?.find((c) => c.type === 'Valid')?.status).toBe('True');
    await waitFor('snapshot marks two unhealthy', () => source.current().byId.get('beta')?.upstreams[0]?.healthy === false);
    expect(source.current().byId.get('alpha')?.upstreams[0]?.healthy).toBe(true);

    spare.up = true;
    await waitFor('snapshot marks two healthy again', () => source.current().byId.get('beta')?.upstreams[0]?.healthy === true);
    // The event follows the status write the gateway already acted on.
    const reasons = await waitFor('UpstreamDown and UpstreamUp events', async () => {
      const r = (await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: NS })).items.map((e) => e.reason);
      return r.includes('UpstreamUp') ? r : undefined;
    });
    expect(reasons).toContain('UpstreamDown');
    expect(reasons).toContain('UpstreamUp');
  });

  it('deleting a catalog removes its models from the snapshot', async () => {
    const kc = api.kubeConfig(NS);
    const generation = source.current().generation;
    await apis(kc).custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'main' });
    await waitFor('alpha removed', () => !source.current().byId.has('alpha'));
    expect(source.current().byId.has('beta')).toBe(false);
    expect(source.current().generation).toBeGreaterThan(generation);
    expect(sourceErrors).toEqual([]);
  });
});
