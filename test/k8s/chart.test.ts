// The chart through the real helm (tools/bin/helm): `helm lint --strict` and `helm template` on the
// defaults and on values-production.yaml, the rendered objects checked field by field, and every rule
// of values.schema.json (and each template-level refusal) shown refusing its bad value.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHART, PRODUCTION_VALUES, find, helm, render, valuesFile, type KubeDoc } from './harness/helm.js';
import { batchCases, chartSchema, schemaCases, storedCases, validValues } from './harness/schema-cases.js';
import { ROOT, TOOLS_TIMEOUT_MS, ensureTools } from './harness/tools.js';
import { readDashboardConfig } from '../../src/dashboard/config.js';

const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;

/** The least a default install needs: the Redis Secret (the template requires it). */
const MINIMAL = { redis: { existingSecret: 'tollgate-redis' } };

interface Container {
  name: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } } }[];
  ports?: { name: string; containerPort: number }[];
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  livenessProbe?: { httpGet?: { path: string; port: string } };
  readinessProbe?: { httpGet?: { path: string; port: string } };
  startupProbe?: { httpGet?: { path: string; port: string } };
  securityContext?: Record<string, unknown>;
}
interface PodSpec {
  containers: Container[];
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
  restartPolicy?: string;
  automountServiceAccountToken?: boolean;
  securityContext?: Record<string, unknown>;
}

function podSpec(doc: KubeDoc): PodSpec {
  return (doc.spec as { template: { spec: PodSpec } }).template.spec;
}
function container(doc: KubeDoc, name: string): Container {
  const c = podSpec(doc).containers.find((x) => x.name === name);
  if (!c) throw new Error(`no container ${name} in ${doc.kind}/${doc.metadata.name}`);
  return c;
}
function env(c: Container, name: string): NonNullable<Container['env']>[number] | undefined {
  return c.env?.find((e) => e.name === name);
}

describe('the chart through helm', () => {
  beforeAll(() => ensureTools(), TOOLS_TIMEOUT_MS);

  it('helm lint --strict passes the defaults (with the Redis Secret) and the production values', async () => {
    const minimal = await helm(['lint', '--strict', CHART, '-f', valuesFile(MINIMAL)]);
    expect(minimal.stdout + minimal.stderr).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(minimal.code).toBe(0);
    const production = await helm(['lint', '--strict', CHART, '-f', PRODUCTION_VALUES]);
    expect(production.stdout + production.stderr).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(production.code).toBe(0);
  });

  it('the bare defaults are refused with the message that names the Redis Secret', async () => {
    const result = await helm(['template', 'tollgate', CHART]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('redis.existingSecret is required: a Secret holding the Redis URL');
  });

  it('renders the default install: the objects, hardened, one image with the right argument', async () => {
    const docs = await render([valuesFile(MINIMAL)]);
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`).sort()).toEqual(
      [
        'Deployment/tollgate-gateway',
        'Deployment/tollgate-operator',
        'PodDisruptionBudget/tollgate-gateway',
        'Role/tollgate-gateway',
        'Role/tollgate-operator',
        'Role/tollgate-operator-leader-election',
        'RoleBinding/tollgate-gateway',
        'RoleBinding/tollgate-operator',
        'RoleBinding/tollgate-operator-leader-election',
        'Service/tollgate-gateway',
        'ServiceAccount/tollgate-gateway',
        'ServiceAccount/tollgate-operator',
      ].sort(),
    );
    for (const doc of docs) expect(doc.metadata.namespace, `${doc.kind}/${doc.metadata.name}`).toBe('tollgate');

    const gateway = find(docs, 'Deployment', 'tollgate-gateway');
    const g = container(gateway, 'gateway');
    expect(g.args).toEqual(['gateway']);
    expect(container(find(docs, 'Deployment', 'tollgate-operator'), 'operator').args).toEqual(['operator']);
    expect(g.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(g.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(g.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(g.ports).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'http', containerPort: 8080 }), expect.objectContaining({ name: 'metrics', containerPort: 9090 })]));
    expect(g.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } });
    expect(podSpec(gateway).securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } });
    expect(podSpec(gateway).serviceAccountName).toBe('tollgate-gateway');
    expect(env(g, 'TOLLGATE_CATALOG_SOURCE')?.value).toBe('kubernetes');
    expect(env(g, 'TOLLGATE_CATALOG_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
    expect(env(g, 'REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-redis', key: 'url' });
    // No database, no migration Job and no DATABASE_URL; no dashboard, no dashboard settings.
    expect(env(g, 'DATABASE_URL')).toBeUndefined();
    expect(env(g, 'DASHBOARD_PUBLIC_URL')).toBeUndefined();

    const service = find(docs, 'Service', 'tollgate-gateway');
    expect((service.spec as { ports: unknown[] }).ports).toEqual([
      { name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' },
      { name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' },
    ]);
    // The gateway reads catalogs and Secrets, nothing else.
    expect((find(docs, 'Role', 'tollgate-gateway') as { rules?: unknown }).rules).toEqual([
      { apiGroups: ['tollgate.dev'], resources: ['modelcatalogs'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'] },
    ]);
  });

  it('gateway pods drain on deletion: preStop sleep, drain bound in the environment, grace period above both', async () => {
    const docs = await render([valuesFile(MINIMAL)]);
    const gateway = find(docs, 'Deployment', 'tollgate-gateway');
    const g = container(gateway, 'gateway');
    const drain = (defaults.gateway as { drain: { preStopSleepSeconds: number; timeoutSeconds: number } }).drain;
    expect(g.lifecycle?.preStop?.exec?.command).toEqual(['sleep', String(drain.preStopSleepSeconds)]);
    expect(env(g, 'TOLLGATE_DRAIN_TIMEOUT_MS')?.value).toBe(String(drain.timeoutSeconds * 1000));
    expect(podSpec(gateway).terminationGracePeriodSeconds).toBe(60);
  });

  it('the template refuses a grace period the drain does not fit in', async () => {
    const tooShort = valuesFile({ ...MINIMAL, gateway: { terminationGracePeriodSeconds: 50 } }); // 10 + 25 + 15 = 50
    const refused = await helm(['template', 'tollgate', CHART, '-f', tooShort]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('gateway.terminationGracePeriodSeconds must exceed gateway.drain.preStopSleepSeconds + gateway.drain.timeoutSeconds + 15');
    const justEnough = await helm(['template', 'tollgate', CHART, '-f', valuesFile({ ...MINIMAL, gateway: { terminationGracePeriodSeconds: 51 } })]);
    expect(justEnough.code, justEnough.stderr).toBe(0);
  });

  it('the template refuses the dashboard without the database', async () => {
    const refused = await helm(['template', 'tollgate', CHART, '-f', valuesFile({ ...MINIMAL, dashboard: { enabled: true, publicUrl: 'https://d.example.com' } })]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('dashboard.enabled needs database.existingSecret');
  });

  it('renders the production values: migration hook, HPA, ingresses with TLS, monitoring, dashboard with TOTP for admins', async () => {
    const docs = await render([PRODUCTION_VALUES]);
    const kinds = docs.map((d) => `${d.kind}/${d.metadata.name}`);
    expect(kinds).toEqual(
      expect.arrayContaining([
        'Job/tollgate-migrate',
        'HorizontalPodAutoscaler/tollgate-gateway',
        'Ingress/tollgate-gateway',
        'Ingress/tollgate-dashboard',
        'Service/tollgate-dashboard',
        'ServiceMonitor/tollgate-gateway',
        'PrometheusRule/tollgate',
        'ConfigMap/tollgate-dashboard',
        'NetworkPolicy/tollgate-gateway',
      ]),
    );
    const gateway = find(docs, 'Deployment', 'tollgate-gateway');
    const g = container(gateway, 'gateway');
    // The HPA owns the replica count.
    expect((gateway.spec as { replicas?: number }).replicas).toBeUndefined();
    expect(find(docs, 'HorizontalPodAutoscaler', 'tollgate-gateway').spec).toMatchObject({ minReplicas: 3, maxReplicas: 20, scaleTargetRef: { kind: 'Deployment', name: 'tollgate-gateway' } });
    // PostgreSQL and Redis Cluster by Secret; payments and SMTP only from Secrets.
    expect(env(g, 'DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-postgres', key: 'url' });
    expect(env(g, 'REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-redis', key: 'url' });
    expect(env(g, 'STRIPE_SECRET_KEY')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-stripe', key: 'secretKey' });
    expect(env(g, 'STRIPE_WEBHOOK_SECRET')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-stripe', key: 'webhookSecret' });
    expect(env(g, 'SMTP_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-smtp', key: 'smtpUrl' });
    expect(env(g, 'TOLLGATE_ADMIN_TOKEN')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-admin', key: 'token' });
    for (const e of g.env ?? []) expect(e.value ?? '', e.name).not.toMatch(/postgres:\/\/|rediss?:\/\/|sk_/);
    expect(env(g, 'DASHBOARD_PUBLIC_URL')?.value).toBe('https://dashboard.tollgate.example.com');
    expect(env(g, 'DASHBOARD_ADMIN_REQUIRE_TOTP')?.value).toBe('true');
    expect(g.ports).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'dashboard', containerPort: 8082 }), expect.objectContaining({ name: 'admin', containerPort: 8081 })]));
    expect((find(docs, 'Service', 'tollgate-dashboard').spec as { ports: unknown[] }).ports).toEqual([{ name: 'http', port: 80, targetPort: 'dashboard', protocol: 'TCP' }]);

    // The migration Job: a pre-install/pre-upgrade hook running the image's `migrate`.
    const job = find(docs, 'Job', 'tollgate-migrate');
    expect(job.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-install,pre-upgrade', 'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded' });
    const m = container(job, 'migrate');
    expect(m.args).toEqual(['migrate']);
    expect(env(m, 'DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-postgres', key: 'url' });
    expect(podSpec(job).restartPolicy).toBe('Never');
    expect(podSpec(job).automountServiceAccountToken).toBe(false);

    // Ingresses with TLS, each to its own Service.
    const api = find(docs, 'Ingress', 'tollgate-gateway').spec as { ingressClassName: string; tls: unknown; rules: { host: string; http: { paths: { backend: unknown }[] } }[] };
    expect(api.tls).toEqual([{ secretName: 'tollgate-api-tls', hosts: ['api.tollgate.example.com'] }]);
    expect(api.rules[0]?.http.paths[0]?.backend).toEqual({ service: { name: 'tollgate-gateway', port: { name: 'http' } } });
    const dash = find(docs, 'Ingress', 'tollgate-dashboard').spec as typeof api;
    expect(dash.tls).toEqual([{ secretName: 'tollgate-dashboard-tls', hosts: ['dashboard.tollgate.example.com'] }]);
    expect(dash.rules[0]?.http.paths[0]?.backend).toEqual({ service: { name: 'tollgate-dashboard', port: { name: 'http' } } });

    // Monitoring: the rules file and the dashboard JSON, carried verbatim.
    const rules = parse(readFileSync(join(CHART, 'rules', 'tollgate-alerts.yaml'), 'utf8')) as unknown;
    const rule = find(docs, 'PrometheusRule', 'tollgate');
    expect(rule.spec).toEqual(rules);
    expect(rule.metadata.labels).toMatchObject({ release: 'prometheus' });
    expect(find(docs, 'ServiceMonitor', 'tollgate-gateway').spec).toMatchObject({ endpoints: [{ port: 'metrics', path: '/metrics', interval: '30s' }] });
    const dashboard = find(docs, 'ConfigMap', 'tollgate-dashboard') as KubeDoc & { data: Record<string, string> };
    expect(dashboard.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(JSON.parse(dashboard.data['tollgate.json'] ?? '')).toEqual(JSON.parse(readFileSync(join(CHART, 'dashboards', 'tollgate.json'), 'utf8')));
  });

  it('dashboard.admin.requireTotp defaults to false on the gateway', async () => {
    const docs = await render([valuesFile({ ...MINIMAL, database: { existingSecret: 'db' }, dashboard: { enabled: true, publicUrl: 'https://d.example.com' } })]);
    expect(env(container(find(docs, 'Deployment', 'tollgate-gateway'), 'gateway'), 'DASHBOARD_ADMIN_REQUIRE_TOTP')?.value).toBe('false');
  });

  it('dashboard.sso renders the settings the dashboard reads at start, the client secret from its Secret', async () => {
    const sso = {
      enabled: true,
      issuer: 'https://login.example.com/realms/acme',
      clientId: 'tollgate',
      existingSecret: 'tollgate-sso',
      name: 'Acme Login',
      domains: ['example.com', 'example.co.uk'],
      ssoOnly: true,
      mappings: [
        { domain: 'example.com', organization: 'Example', role: 'member' },
        { group: 'tollgate-admins', organization: 'Example', role: 'admin' },
      ],
    };
    const docs = await render([valuesFile({ ...MINIMAL, database: { existingSecret: 'db' }, dashboard: { enabled: true, publicUrl: 'https://d.example.com', sso } })]);
    const g = container(find(docs, 'Deployment', 'tollgate-gateway'), 'gateway');
    expect(env(g, 'DASHBOARD_SSO_CLIENT_SECRET')?.valueFrom?.secretKeyRef).toEqual({ name: 'tollgate-sso', key: 'clientSecret' });
    const plain = Object.fromEntries((g.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
    const read = readDashboardConfig({ ...plain, DASHBOARD_SSO_CLIENT_SECRET: 'from the Secret' }).sso;
    expect(read).toMatchObject({ clientId: 'tollgate', name: 'Acme Login', domains: ['example.com', 'example.co.uk'], ssoOnly: true, rules: sso.mappings, sessionTtlMs: 8 * 3_600_000 });
    expect(read?.redirectUrl.href).toBe('https://d.example.com/sso/callback');
    // Off by default: no SSO variable at all.
    const off = await render([valuesFile({ ...MINIMAL, database: { existingSecret: 'db' }, dashboard: { enabled: true, publicUrl: 'https://d.example.com' } })]);
    expect((container(find(off, 'Deployment', 'tollgate-gateway'), 'gateway').env ?? []).filter((e) => e.name.startsWith('DASHBOARD_SSO_'))).toEqual([]);
  });

  it('the example catalog renders the five models of examples/catalog.yaml', async () => {
    const docs = await render([valuesFile({ ...MINIMAL, exampleCatalog: { enabled: true } })]);
    const rendered = find(docs, 'ModelCatalog', 'tollgate-models') as KubeDoc & { spec: { models: { id: string; upstreams: { model: string; baseUrl: string }[] }[] } };
    const example = parse(readFileSync(join(ROOT, 'examples', 'catalog.yaml'), 'utf8')) as typeof rendered;
    const strip = (models: typeof rendered.spec.models) => models.map(({ upstreams, ...rest }) => ({ ...rest, upstreamModel: upstreams[0]?.model }));
    expect(strip(rendered.spec.models)).toEqual(strip(example.spec.models));
    expect(rendered.spec.models.every((m) => m.upstreams[0]?.baseUrl === 'http://tollgate-simulator:8099/v1')).toBe(true);
  });
});

describe('values.schema.json through helm: one bad value per rule', () => {
  // The cases are a fixture (see harness/write-schema-cases.ts), so a rule removed from the schema
  // leaves its case behind and helm's acceptance of it fails the case.
  const cases = storedCases();
  const valid = validValues();
  // helm reports every schema error at once, each at its JSON pointer: cases that change disjoint
  // parts of the values share one helm run, and each case asserts its own pointer in the output.
  const batches = batchCases(cases, valid);
  const outputs = new Map<string, { code: number; stderr: string }>();

  beforeAll(async () => {
    ensureTools();
    const queue = [...batches];
    const worker = async (): Promise<void> => {
      for (let batch = queue.shift(); batch; batch = queue.shift()) {
        const result = await helm(['template', 'tollgate', CHART, '-f', valuesFile(batch.values)]);
        for (const c of batch.cases) outputs.set(c.rule, result);
      }
    };
    await Promise.all([worker(), worker()]);
  }, TOOLS_TIMEOUT_MS);

  it('has a case for every rule of the schema, and no case for a rule it does not have', () => {
    const current = schemaCases(chartSchema(), valid).map((c) => c.rule);
    // The schema has a few hundred keywords; a walker that lost its way would find far fewer.
    expect(current.length).toBeGreaterThan(300);
    expect(new Set(current).size).toBe(current.length);
    const stored = cases.map((c) => c.rule);
    expect(current.filter((r) => !stored.includes(r)), 'rules without a case: run npx tsx test/k8s/harness/write-schema-cases.ts').toEqual([]);
    expect(stored.filter((r) => !current.includes(r)), 'cases whose rule is gone from the schema').toEqual([]);
  });

  it('the valid starting point renders', async () => {
    await expect(render([valuesFile(valid)])).resolves.not.toHaveLength(0);
  });

  it.each(cases.map((c) => [c.rule, c] as const))('refuses %s', (_rule, c) => {
    const result = outputs.get(c.rule);
    expect(result?.code, `helm accepted ${JSON.stringify(c.sets).slice(0, 300)}`).not.toBe(0);
    expect(result?.stderr).toContain("values don't meet the specifications of the schema");
    expect(result?.stderr, `no error at '${c.pointer}' for ${JSON.stringify(c.sets).slice(0, 300)}`).toContain(`at '${c.pointer}'`);
  });
});
