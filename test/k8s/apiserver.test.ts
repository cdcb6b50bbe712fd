// The CRD and the chart against a real kube-apiserver (etcd on loopback, RBAC on): the CRD installs,
// every example ModelCatalog is accepted, each CEL rule is enforced by the server with its message,
// status is a subresource; `helm install` of the defaults and of values-production.yaml succeeds with
// the migration hook running before the Deployments, then upgrade, rollback and uninstall, exactly as
// docs/kubernetes.md tells them. No kubelet runs pods: the test plays the Job controller for the hook.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ApiException,
  ApiextensionsV1Api,
  AppsV1Api,
  AutoscalingV2Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  dumpYaml,
  loadAllYaml,
  type KubernetesObject,
  type V1Job,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expandEnv } from '../../src/catalog/env-expand.js';
import { collectCrdCelRules } from '../../src/catalog/schema.js';
import type { ModelSpec } from '../../src/catalog/types.js';
import { startControlPlane, type ControlPlane } from './harness/control-plane.js';
import { CHART, PRODUCTION_VALUES, helm, render, valuesFile } from './harness/helm.js';
import { catalogCrd } from './harness/kube-api.js';
import { ROOT, TOOLS_TIMEOUT_MS, ensureTools, monitoringCrdPath } from './harness/tools.js';

const GROUP = 'tollgate.dev';
const VERSION = 'v1alpha1';
const PLURAL = 'modelcatalogs';

function model(id: string, extra: Partial<ModelSpec> = {}): ModelSpec {
  return {
    id,
    displayName: `Model ${id}`,
    kind: 'Uncensored',
    context: { tokens: 4096, display: '4K' },
    pricing: { input: '0.30', output: '1.20' },
    capabilities: { tools: true, vision: false, reasoning: false },
    abliterated: false,
    defaultMaxOutputTokens: 1024,
    upstreams: [{ name: 'u', format: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'up' }],
    ...extra,
  };
}

/** One violating spec per CEL rule of crds/modelcatalog.yaml, by rule text. */
const CEL_VIOLATIONS: Record<string, ModelSpec[]> = {
  'self.models.all(m, self.models.exists_one(n, n.id == m.id))': [model('a'), model('a')],
  'self.models.all(m, !has(m.aliases) || m.aliases.all(a, !self.models.exists(n, n.id == a)))': [model('a', { aliases: ['b'] }), model('b')],
  'self.models.all(m, !has(m.aliases) || m.aliases.all(a, self.models.exists_one(n, has(n.aliases) && a in n.aliases)))': [
    model('a', { aliases: ['x'] }),
    model('b', { aliases: ['x'] }),
  ],
  "self.abliterated == (self.kind == 'Abliterated')": [model('a', { abliterated: true })],
  'self.defaultMaxOutputTokens <= self.context.tokens': [model('a', { defaultMaxOutputTokens: 5000 })],
  'size(self.upstreams) >= 1': [model('a', { upstreams: [] })],
  '!has(self.pricing.cachedInput) || !has(self.pricing.cacheRead)': [model('a', { pricing: { input: '1', output: '1', cachedInput: '0.1', cacheRead: '0.1' } })],
  'self.upstreams.all(u, self.upstreams.exists_one(v, v.name == u.name))': [
    model('a', {
      upstreams: [
        { name: 'u', format: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'one' },
        { name: 'u', format: 'openai', baseUrl: 'http://127.0.0.1:10/v1', model: 'two' },
      ],
    }),
  ],
};

function statusOf(err: unknown): { code: number; message: string; causes: { field?: string; message?: string }[] } {
  if (!(err instanceof ApiException)) throw err;
  const body = (typeof err.body === 'string' ? JSON.parse(err.body) : err.body) as { message?: string; details?: { causes?: { field?: string; message?: string }[] } };
  return { code: err.code, message: body.message ?? '', causes: body.details?.causes ?? [] };
}

/** Creates every object of a YAML file. Through client-node's loadAllYaml: its typed serializer
 *  drops keys it does not know by their wire names (x-kubernetes-validations, x-kubernetes-int-or-string
 *  in a CRD's schema), so plain parsed YAML would lose them on the way to the server. */
async function applyYamlFile(objects: KubernetesObjectApi, path: string): Promise<void> {
  for (const obj of loadAllYaml(readFileSync(path, 'utf8')) as KubernetesObject[]) await objects.create(obj);
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a real API server', () => {
  let cp: ControlPlane;

  beforeAll(async () => {
    ensureTools();
    cp = await startControlPlane();
  }, TOOLS_TIMEOUT_MS);
  afterAll(async () => {
    await cp?.stop();
  });

  describe('the ModelCatalog CRD', () => {
    let custom: CustomObjectsApi;
    const NS = 'crd-test';

    beforeAll(async () => {
      const kc = cp.kubeConfig();
      await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
      // The server compiles every CEL rule and checks its cost budget here: a rule that does not
      // compile, or could cost too much, refuses the CRD.
      await kc.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({ body: catalogCrd() });
      await waitFor('the CRD to be Established', async () => {
        const crd = await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` });
        return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
      });
      custom = kc.makeApiClient(CustomObjectsApi);
      // Discovery of a new group can lag Established by a moment.
      await waitFor('the resource to be served', async () => {
        try {
          await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL });
          return true;
        } catch {
          return false;
        }
      });
    }, 60_000);

    const create = (name: string, spec: unknown) =>
      custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'ModelCatalog', metadata: { name }, spec } });

    it('accepts every example catalog: examples/catalog.yaml, the chart example, the docs', async () => {
      const file = parse(expandEnv(readFileSync(join(ROOT, 'examples', 'catalog.yaml'), 'utf8'), {}).text) as { spec: unknown };
      await create('examples-catalog', file.spec);
      const chartExample = (await render([valuesFile({ redis: { existingSecret: 'r' }, exampleCatalog: { enabled: true } })])).find((d) => d.kind === 'ModelCatalog') as { spec: unknown } | undefined;
      expect(chartExample).toBeDefined();
      await create('chart-example', chartExample?.spec);
      const docs = readFileSync(join(ROOT, 'docs', 'kubernetes.md'), 'utf8');
      const blocks = [...docs.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => parse(m[1] ?? '') as { kind?: string; spec?: unknown }).filter((d) => d?.kind === 'ModelCatalog');
      expect(blocks.length).toBeGreaterThan(0);
      for (const [i, block] of blocks.entries()) await create(`docs-${i}`, block.spec);
    });

    it('the server stored the CRD with every CEL rule of crds/modelcatalog.yaml', async () => {
      const stored = await cp.kubeConfig().makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` });
      // Back on the wire names, as collectCrdCelRules reads them.
      const schema = parse(dumpYaml(stored)) as { spec: { versions: { schema: { openAPIV3Schema: object } }[] } };
      const rules = collectCrdCelRules(schema.spec.versions[0]?.schema.openAPIV3Schema as never).map((r) => r.rule);
      expect(rules.sort()).toEqual(collectCrdCelRules().map((r) => r.rule).sort());
    });

    it('has a violating catalog for each CEL rule of the CRD', () => {
      expect(Object.keys(CEL_VIOLATIONS).sort()).toEqual(collectCrdCelRules().map((r) => r.rule).sort());
    });

    // By the violations table, not by the CRD: a rule removed from the CRD leaves its case to fail.
    it.each(Object.entries(CEL_VIOLATIONS).map(([rule, models], i) => [rule, models, i] as const))('the server itself refuses a catalog that breaks %s', async (ruleText, models, i) => {
      const refused = await create(`cel-${i}`, { models }).then(
        () => undefined,
        (err: unknown) => statusOf(err),
      );
      expect(refused, `the API server accepted a catalog breaking ${ruleText}`).toBeDefined();
      expect(refused?.code).toBe(422);
      const rule = collectCrdCelRules().find((r) => r.rule === ruleText);
      expect(rule, `${ruleText} is not in crds/modelcatalog.yaml`).toBeDefined();
      const cause = refused?.causes.find((c) => c.message?.includes(rule?.message ?? ruleText));
      expect(cause, JSON.stringify(refused)).toBeDefined();
      // fieldPath points the error at the field the rule is about.
      const escape = (text: string) => text.replace(/[.[\]]/g, '\\$&');
      expect(cause?.field).toMatch(new RegExp(`^${escape(rule?.at ?? '').replace('\\[\\]', '\\[\\d+\\]')}${escape(rule?.fieldPath ?? '')}$`));
    });

    it('refuses schema violations too (the structural schema, not only CEL)', async () => {
      const refused = await create('schema-bad', { models: [model('Bad Id', { pricing: { input: '0.3.0', output: '1' } })] }).then(
        () => undefined,
        (err: unknown) => statusOf(err),
      );
      expect(refused?.code).toBe(422);
      expect(refused?.causes.map((c) => c.field)).toEqual(expect.arrayContaining(['spec.models[0].id', 'spec.models[0].pricing.input']));
    });

    it('status is a subresource: a spec write ignores status, a status write ignores spec, generation counts spec edits', async () => {
      type Catalog = { metadata: { generation: number; resourceVersion: string }; spec: { models: ModelSpec[] }; status?: { modelCount?: number } };
      const created = (await create('subresource', { models: [model('a')] })) as Catalog;
      expect(created.metadata.generation).toBe(1);
      const key = { group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'subresource' };
      const statusWritten = (await custom.replaceNamespacedCustomObjectStatus({ ...key, body: { ...created, spec: { models: [model('b')] }, status: { modelCount: 7 } } })) as Catalog;
      expect(statusWritten.status?.modelCount).toBe(7);
      expect(statusWritten.spec.models.map((m) => m.id)).toEqual(['a']);
      expect(statusWritten.metadata.generation).toBe(1);
      const specWritten = (await custom.replaceNamespacedCustomObject({ ...key, body: { ...statusWritten, spec: { models: [model('c')] }, status: { modelCount: 99 } } })) as Catalog;
      expect(specWritten.spec.models.map((m) => m.id)).toEqual(['c']);
      expect(specWritten.status?.modelCount).toBe(7);
      expect(specWritten.metadata.generation).toBe(2);
    });
  });

  describe('helm install, upgrade, rollback and uninstall', () => {
    /** Plays the Job controller and kubelet for the chart's migration hook: marks each Job complete,
     *  noting which Deployments of the namespace existed (and with what image) when it appeared. */
    function completeHookJobs(namespace: string): { seen: { job: string; deployments: string[] }[]; stop(): void } {
      const kc = cp.kubeConfig();
      const batch = kc.makeApiClient(BatchV1Api);
      const apps = kc.makeApiClient(AppsV1Api);
      const seen: { job: string; deployments: string[] }[] = [];
      const done = new Set<string>();
      let running = true;
      const loop = async (): Promise<void> => {
        while (running) {
          const jobs = await batch.listNamespacedJob({ namespace }).catch(() => ({ items: [] as V1Job[] }));
          for (const job of jobs.items) {
            const uid = job.metadata?.uid ?? '';
            if (done.has(uid)) continue;
            done.add(uid);
            const deployments = await apps.listNamespacedDeployment({ namespace });
            seen.push({
              job: job.metadata?.name ?? '',
              deployments: deployments.items.map((d) => `${d.metadata?.name ?? ''}@${d.spec?.template.spec?.containers[0]?.image ?? ''}`),
            });
            const now = new Date();
            await batch.replaceNamespacedJobStatus({
              name: job.metadata?.name ?? '',
              namespace,
              body: {
                ...job,
                status: {
                  startTime: now,
                  completionTime: now,
                  succeeded: 1,
                  active: 0,
                  ready: 0,
                  terminating: 0,
                  conditions: [
                    { type: 'SuccessCriteriaMet', status: 'True', lastProbeTime: now, lastTransitionTime: now, reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods' },
                    { type: 'Complete', status: 'True', lastProbeTime: now, lastTransitionTime: now, reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods' },
                  ],
                },
              },
            });
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      void loop();
      return {
        seen,
        stop: () => {
          running = false;
        },
      };
    }

    it('installs the defaults (with the Redis Secret) into a namespace; the server fills its defaults', async () => {
      const kc = cp.kubeConfig();
      const core = kc.makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: 'tollgate-default' } } });
      await core.createNamespacedSecret({ namespace: 'tollgate-default', body: { metadata: { name: 'tollgate-redis' }, stringData: { url: 'redis://redis:6379' } } });
      const installed = await helm(['install', 'tollgate', CHART, '-n', 'tollgate-default', '--set', 'redis.existingSecret=tollgate-redis'], { kubeconfig: cp.kubeconfigPath });
      expect(installed.code, installed.stderr).toBe(0);
      expect(installed.stdout).toContain('STATUS: deployed');

      const apps = kc.makeApiClient(AppsV1Api);
      const gateway = await apps.readNamespacedDeployment({ name: 'tollgate-gateway', namespace: 'tollgate-default' });
      // Server-side defaults the chart leaves out.
      expect(gateway.spec?.progressDeadlineSeconds).toBe(600);
      expect(gateway.spec?.revisionHistoryLimit).toBe(10);
      expect(gateway.spec?.template.spec?.dnsPolicy).toBe('ClusterFirst');
      expect(gateway.spec?.template.spec?.containers[0]?.terminationMessagePolicy).toBe('File');
      expect(gateway.spec?.template.spec?.containers[0]?.readinessProbe?.successThreshold).toBe(1);
      expect(gateway.spec?.replicas).toBe(2);
      expect(gateway.spec?.template.spec?.containers[0]?.image).toBe('ghcr.io/tollgate/tollgate:0.1.0');
      const service = await core.readNamespacedService({ name: 'tollgate-gateway', namespace: 'tollgate-default' });
      expect(service.spec?.clusterIP).toMatch(/^10\.0\.0\.\d+$/);
      // The CRD came from the chart's crds/ folder.
      const crd = await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` });
      expect(crd.spec.versions[0]?.subresources?.status).toEqual({});
      const status = await helm(['status', 'tollgate', '-n', 'tollgate-default'], { kubeconfig: cp.kubeconfigPath });
      expect(status.stdout).toContain('STATUS: deployed');
    }, 120_000);

    it('installs, upgrades, rolls back and uninstalls the production values; the migration hook runs before the Deployments each time', async () => {
      const kc = cp.kubeConfig();
      const core = kc.makeApiClient(CoreV1Api);
      const apps = kc.makeApiClient(AppsV1Api);
      const NS = 'tollgate';
      const objects = KubernetesObjectApi.makeApiClient(kc);
      // The Prometheus Operator's CRDs, as a cluster with it has them.
      await applyYamlFile(objects, monitoringCrdPath('servicemonitors'));
      await applyYamlFile(objects, monitoringCrdPath('prometheusrules'));
      await core.createNamespace({ body: { metadata: { name: NS } } });
      const secrets: Record<string, Record<string, string>> = {
        'tollgate-redis': { url: 'rediss+cluster://:pw@redis-0.redis:6379,redis-1.redis:6379' },
        'tollgate-postgres': { url: 'postgres://tollgate:pw@postgres:5432/tollgate' },
        'tollgate-admin': { token: 'admin-token' },
        'tollgate-smtp': { smtpUrl: 'smtps://u:p@mail.example.com' },
        'tollgate-stripe': { secretKey: 'rk_test_x', webhookSecret: 'whsec_x' },
      };
      for (const [name, data] of Object.entries(secrets)) {
        await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name }, stringData: data } });
      }
      await waitFor('the monitoring CRDs', async () => {
        const list = await kc.makeApiClient(ApiextensionsV1Api).listCustomResourceDefinition();
        const established = list.items.filter((c) => c.metadata?.name?.endsWith('monitoring.coreos.com') && c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True'));
        return established.length === 2;
      });

      const install = completeHookJobs(NS);
      const installed = await helm(['install', 'tollgate', CHART, '-n', NS, '-f', PRODUCTION_VALUES, '--timeout', '2m'], { kubeconfig: cp.kubeconfigPath });
      install.stop();
      expect(installed.code, installed.stderr).toBe(0);
      // The migration ran before any Deployment existed.
      expect(install.seen).toEqual([{ job: 'tollgate-migrate', deployments: [] }]);
      // hook-succeeded: the Job is gone once it completed.
      await waitFor('the hook Job to be deleted', async () => (await kc.makeApiClient(BatchV1Api).listNamespacedJob({ namespace: NS })).items.length === 0);
      const gateway = await apps.readNamespacedDeployment({ name: 'tollgate-gateway', namespace: NS });
      expect(gateway.spec?.template.spec?.containers[0]?.image).toBe('ghcr.io/tollgate/tollgate:0.1.0');
      const env = gateway.spec?.template.spec?.containers[0]?.env ?? [];
      expect(env.find((e) => e.name === 'DASHBOARD_ADMIN_REQUIRE_TOTP')?.value).toBe('true');
      const hpa = await kc.makeApiClient(AutoscalingV2Api).readNamespacedHorizontalPodAutoscaler({ name: 'tollgate-gateway', namespace: NS });
      expect(hpa.spec?.minReplicas).toBe(3);
      const rule = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ group: 'monitoring.coreos.com', version: 'v1', namespace: NS, plural: 'prometheusrules', name: 'tollgate' })) as { spec: unknown };
      expect(rule.spec).toEqual(parse(readFileSync(join(CHART, 'rules', 'tollgate-alerts.yaml'), 'utf8')));
      const sm = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ group: 'monitoring.coreos.com', version: 'v1', namespace: NS, plural: 'servicemonitors', name: 'tollgate-gateway' })) as { spec: { endpoints: unknown[] } };
      expect(sm.spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', scheme: 'http', interval: '30s' }]);
      expect((await core.readNamespacedConfigMap({ name: 'tollgate-dashboard', namespace: NS })).metadata?.labels?.grafana_dashboard).toBe('1');

      // Upgrade to a new image: the pre-upgrade migration runs while the old Deployment is unchanged.
      const upgrade = completeHookJobs(NS);
      const upgraded = await helm(['upgrade', 'tollgate', CHART, '-n', NS, '-f', PRODUCTION_VALUES, '--set', 'image.tag=0.1.1', '--timeout', '2m'], { kubeconfig: cp.kubeconfigPath });
      upgrade.stop();
      expect(upgraded.code, upgraded.stderr).toBe(0);
      expect(upgrade.seen).toEqual([
        { job: 'tollgate-migrate', deployments: ['tollgate-gateway@ghcr.io/tollgate/tollgate:0.1.0', 'tollgate-operator@ghcr.io/tollgate/tollgate:0.1.0'] },
      ]);
      expect((await apps.readNamespacedDeployment({ name: 'tollgate-gateway', namespace: NS })).spec?.template.spec?.containers[0]?.image).toBe('ghcr.io/tollgate/tollgate:0.1.1');

      // Rollback to revision 1: no migration hook (there is no pre-rollback hook), the image is back.
      const rollback = completeHookJobs(NS);
      const rolled = await helm(['rollback', 'tollgate', '1', '-n', NS, '--timeout', '2m'], { kubeconfig: cp.kubeconfigPath });
      rollback.stop();
      expect(rolled.code, rolled.stderr).toBe(0);
      expect(rollback.seen).toEqual([]);
      expect((await apps.readNamespacedDeployment({ name: 'tollgate-gateway', namespace: NS })).spec?.template.spec?.containers[0]?.image).toBe('ghcr.io/tollgate/tollgate:0.1.0');
      const history = await helm(['history', 'tollgate', '-n', NS, '-o', 'json'], { kubeconfig: cp.kubeconfigPath });
      expect((JSON.parse(history.stdout) as { revision: number; status: string }[]).map((h) => [h.revision, h.status])).toEqual([
        [1, 'superseded'],
        [2, 'superseded'],
        [3, 'deployed'],
      ]);

      // Uninstall: the release's objects go; the CRD (and so every ModelCatalog) and the Secrets stay.
      const uninstalled = await helm(['uninstall', 'tollgate', '-n', NS, '--wait', '--timeout', '2m'], { kubeconfig: cp.kubeconfigPath });
      expect(uninstalled.code, uninstalled.stderr).toBe(0);
      expect((await apps.listNamespacedDeployment({ namespace: NS })).items).toEqual([]);
      expect((await core.listNamespacedService({ namespace: NS })).items).toEqual([]);
      expect((await core.listNamespacedSecret({ namespace: NS })).items.map((s) => s.metadata?.name).sort()).toEqual([
        'tollgate-admin',
        'tollgate-postgres',
        'tollgate-redis',
        'tollgate-smtp',
        'tollgate-stripe',
      ]);
      await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: `${PLURAL}.${GROUP}` });
    }, 300_000);
  });
});
