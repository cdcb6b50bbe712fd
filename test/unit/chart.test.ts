// The Helm chart without helm (not installable here): plain YAML parses, values.schema.json accepts the
// defaults and refuses bad values, the CRD copy matches the source of truth, templates only read values
// that exist, and the example catalog carries the same five models as examples/catalog.yaml.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Ajv } from 'ajv';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../src/config.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CHART = join(ROOT, 'charts', 'tollgate');

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
const ajv = new Ajv({ allErrors: true, strict: false });
const validateValues = ajv.compile(JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as object);

/** Defaults with one change applied at a dotted path. */
function withValue(path: string, value: unknown): unknown {
  const copy = structuredClone(defaults);
  const keys = path.split('.');
  let node = copy as Record<string, unknown>;
  for (const key of keys.slice(0, -1)) node = node[key] as Record<string, unknown>;
  node[keys[keys.length - 1] ?? ''] = value;
  return copy;
}

describe('Helm chart', () => {
  it('every YAML file under charts/ that is not a Go template parses', () => {
    const files = walk(join(ROOT, 'charts')).filter((f) => /\.ya?ml$/.test(f));
    const plain = files.filter((f) => !readFileSync(f, 'utf8').includes('{{'));
    expect(plain.map((f) => relative(CHART, f))).toEqual(expect.arrayContaining(['Chart.yaml', 'values.yaml', 'crds/modelcatalog.yaml']));
    for (const file of plain) {
      for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
        expect(doc.errors.map((e) => `${relative(ROOT, file)}: ${e.message}`)).toEqual([]);
      }
    }
    for (const file of walk(join(ROOT, 'charts')).filter((f) => f.endsWith('.json'))) {
      expect(() => JSON.parse(readFileSync(file, 'utf8')) as unknown, relative(ROOT, file)).not.toThrow();
    }
  });

  it('ships the CRD identical to crds/modelcatalog.yaml', () => {
    expect(readFileSync(join(CHART, 'crds', 'modelcatalog.yaml'), 'utf8')).toBe(readFileSync(join(ROOT, 'crds', 'modelcatalog.yaml'), 'utf8'));
  });

  it('values.schema.json accepts the default values', () => {
    expect(validateValues(defaults), JSON.stringify(validateValues.errors)).toBe(true);
    expect(validateValues(withValue('redis.existingSecret', 'tollgate-redis'))).toBe(true);
    expect(validateValues(withValue('exampleCatalog.enabled', true))).toBe(true);
  });

  it.each([
    ['a misspelled top-level key', { ...defaults, gatway: { replicaCount: 2 } }],
    ['a port out of range', withValue('gateway.port', 70000)],
    ['a replica count as a string', withValue('gateway.replicaCount', '2')],
    ['an invalid key marker', withValue('gateway.keyMarker', 'Has-Dash')],
    ['a Redis Secret name with capitals', withValue('redis.existingSecret', 'My_Secret')],
    ['a float price in the example catalog', withValue('exampleCatalog.models', [{ ...((defaults.exampleCatalog as { models: object[] }).models[0] ?? {}), pricing: { input: 0.3, output: '1.00' } }])],
    ['an unknown upstream format', withValue('exampleCatalog.upstream', { name: 'x', format: 'grpc', baseUrl: 'http://x/v1' })],
    ['an unknown pull policy', withValue('image.pullPolicy', 'Sometimes')],
    ['a drain bound as a string', withValue('gateway.drain.timeoutSeconds', '25')],
    ['a misspelled drain key', withValue('gateway.drain', { preStopSleepSeconds: 10, timeoutSecs: 25 })],
  ])('values.schema.json rejects %s', (_what, values) => {
    expect(validateValues(values)).toBe(false);
  });

  it('keeps the values keys the observability templates read', () => {
    const metrics = defaults.metrics as Record<string, Record<string, unknown>>;
    expect(metrics.serviceMonitor).toMatchObject({ enabled: false });
    expect(typeof metrics.serviceMonitor?.interval).toBe('string');
    expect(metrics.prometheusRule).toMatchObject({ enabled: false });
    expect(metrics.grafanaDashboard).toMatchObject({ enabled: false, sidecarLabel: 'grafana_dashboard', sidecarLabelValue: '1' });
  });

  it('templates read only values that exist, and their blocks are balanced', () => {
    const mine = [
      '_helpers.tpl',
      'gateway-deployment.yaml',
      'gateway-service.yaml',
      'gateway-rbac.yaml',
      'serviceaccounts.yaml',
      'operator-deployment.yaml',
      'operator-rbac.yaml',
      'ingress.yaml',
      'hpa.yaml',
      'pdb.yaml',
      'networkpolicy.yaml',
      'migrate-job.yaml',
      'example-catalog.yaml',
      'NOTES.txt',
    ];
    for (const name of mine) {
      const text = readFileSync(join(CHART, 'templates', name), 'utf8');
      for (const [, path] of text.matchAll(/\.Values\.([A-Za-z0-9_.]+)/g)) {
        let node: unknown = defaults;
        for (const key of (path ?? '').split('.')) {
          expect(node !== null && typeof node === 'object' && key in node, `${name}: .Values.${path ?? ''} is not in values.yaml`).toBe(true);
          node = (node as Record<string, unknown>)[key];
        }
      }
      const opens = [...text.matchAll(/\{\{-?\s*(if|range|with|define)\b/g)].length;
      const ends = [...text.matchAll(/\{\{-?\s*end\s*-?\}\}/g)].length;
      expect(ends, `${name}: {{ if/range/with/define }} and {{ end }} counts`).toBe(opens);
      expect(text.split('{{').length, `${name}: unbalanced braces`).toBe(text.split('}}').length);
    }
  });

  it('gateway and operator run one image with the right argument, hardened', () => {
    const gateway = readFileSync(join(CHART, 'templates', 'gateway-deployment.yaml'), 'utf8');
    const operator = readFileSync(join(CHART, 'templates', 'operator-deployment.yaml'), 'utf8');
    expect(gateway).toContain('args: ["gateway"]');
    expect(operator).toContain('args: ["operator"]');
    expect(gateway).toMatch(/path: \/healthz\s+port: http/);
    expect(gateway).toMatch(/path: \/readyz\s+port: http/);
    const service = readFileSync(join(CHART, 'templates', 'gateway-service.yaml'), 'utf8');
    expect(service).toMatch(/- name: metrics\s+port: \{\{ \.Values\.metrics\.port \}\}/);
    expect((defaults.metrics as { port: number }).port).toBe(9090);
    expect((defaults.gateway as { port: number }).port).toBe(8080);
    const sc = defaults.containerSecurityContext as Record<string, unknown>;
    expect(sc).toMatchObject({ readOnlyRootFilesystem: true, runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
  });

  it('gateway pods drain on deletion: preStop sleep, drain bound in the environment, grace period above both', () => {
    const gateway = readFileSync(join(CHART, 'templates', 'gateway-deployment.yaml'), 'utf8');
    expect(gateway).toMatch(/preStop:\s+exec:\s+command: \["sleep", \{\{ \.Values\.gateway\.drain\.preStopSleepSeconds \| quote \}\}\]/);
    expect(gateway).toMatch(/- name: TOLLGATE_DRAIN_TIMEOUT_MS\s+value: \{\{ mul \.Values\.gateway\.drain\.timeoutSeconds 1000 \| quote \}\}/);
    expect(gateway).toContain('terminationGracePeriodSeconds: {{ .Values.gateway.terminationGracePeriodSeconds }}');
    // The template refuses a grace period the drain does not fit in.
    expect(gateway).toContain('{{- if le (int .Values.gateway.terminationGracePeriodSeconds) (add .Values.gateway.drain.preStopSleepSeconds .Values.gateway.drain.timeoutSeconds 15) }}');
    const g = defaults.gateway as { terminationGracePeriodSeconds: number; drain: { preStopSleepSeconds: number; timeoutSeconds: number } };
    expect(g.drain.preStopSleepSeconds).toBeGreaterThan(0);
    // The gateway's own default bound (config.ts) is the chart's.
    expect(readConfig({}).drainTimeoutMs).toBe(g.drain.timeoutSeconds * 1000);
    // preStop + drain bound + 5 s for cut streams to settle + the settlement flush, with room to spare.
    const settlementFlushS = readConfig({}).settlementFlushMs / 1000;
    expect(g.terminationGracePeriodSeconds).toBeGreaterThan(g.drain.preStopSleepSeconds + g.drain.timeoutSeconds + 5 + settlementFlushS);
    expect(15).toBeGreaterThanOrEqual(5 + settlementFlushS);
  });

  it('dashboard: its own Service and Ingress, a public URL required when on; payment keys only from Secrets', () => {
    expect(validateValues(withValue('dashboard', { ...(defaults.dashboard as object), enabled: true, publicUrl: '' }))).toBe(false);
    expect(validateValues(withValue('dashboard', { ...(defaults.dashboard as object), enabled: true, publicUrl: 'https://dash.example.com' }))).toBe(true);
    expect(validateValues(withValue('dashboard', { ...(defaults.dashboard as object), publicUrl: 'ftp://x' }))).toBe(false);
    const service = readFileSync(join(CHART, 'templates', 'dashboard-service.yaml'), 'utf8');
    expect(service).toContain('targetPort: dashboard');
    // Without the database the gateway would serve no dashboard: the chart refuses to render instead.
    expect(service).toContain('{{- fail "dashboard.enabled needs database.existingSecret');
    const ingress = readFileSync(join(CHART, 'templates', 'ingress.yaml'), 'utf8');
    expect(ingress).toContain('"component" "dashboard" "enabled" (and .Values.dashboard.enabled .Values.dashboard.ingress.enabled)');
    const gateway = readFileSync(join(CHART, 'templates', 'gateway-deployment.yaml'), 'utf8');
    for (const name of ['STRIPE_SECRET_KEY', 'STRIPE_WEBHOOK_SECRET', 'BTCPAY_URL', 'BTCPAY_API_KEY', 'BTCPAY_STORE_ID', 'BTCPAY_WEBHOOK_SECRET']) {
      expect(gateway).toMatch(new RegExp(`- name: ${name}\\s+valueFrom:\\s+secretKeyRef:`));
    }
    expect(gateway).toMatch(/- name: DASHBOARD_PUBLIC_URL\s+value: \{\{ required/);
  });

  it('PostgreSQL of record: DATABASE_URL from a Secret, migrations in a pre-install/pre-upgrade Job', () => {
    const gateway = readFileSync(join(CHART, 'templates', 'gateway-deployment.yaml'), 'utf8');
    const job = readFileSync(join(CHART, 'templates', 'migrate-job.yaml'), 'utf8');
    const fromSecret = /- name: DATABASE_URL\s+valueFrom:\s+secretKeyRef:\s+name: \{\{ \.Values\.database\.existingSecret \}\}\s+key: \{\{ \.Values\.database\.urlKey \}\}/;
    expect(gateway).toMatch(fromSecret);
    expect(job).toMatch(fromSecret);
    expect(job).toMatch(/^\{\{- if \.Values\.database\.existingSecret \}\}/);
    expect(job).toContain('kind: Job');
    expect(job).toContain('"helm.sh/hook": pre-install,pre-upgrade');
    expect(job).toContain('args: ["migrate"]');
    expect(job).toContain('restartPolicy: Never');
    // The image's entrypoint knows the argument, and `npm run migrate` is the same program.
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain('migrate) exec node dist/src/record/migrate-cli.js ;;');
    // ...and carries the SQL that the compiled migrate.js looks for beside the app (tsc copies no .sql).
    expect(dockerfile).toContain('COPY src/record/migrations ./src/record/migrations');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.migrate).toBe('tsx src/record/migrate-cli.ts');
    expect(defaults.database).toMatchObject({ existingSecret: '', urlKey: 'url' });
    expect(validateValues(withValue('database.existingSecret', 'tollgate-db'))).toBe(true);
    expect(validateValues(withValue('database.existingSecret', 'Not A Name'))).toBe(false);
    expect(validateValues(withValue('database.urlKey', ''))).toBe(false);
  });

  it('the example catalog has the five models of examples/catalog.yaml', () => {
    const example = parse(readFileSync(join(ROOT, 'examples', 'catalog.yaml'), 'utf8')) as {
      spec: { models: { id: string; displayName: string; kind: string; context: object; pricing: object; capabilities: object; abliterated: boolean; defaultMaxOutputTokens: number; upstreams: { model: string }[] }[] };
    };
    const values = (defaults.exampleCatalog as { models: Record<string, unknown>[] }).models;
    expect(values).toHaveLength(5);
    expect(values).toEqual(
      example.spec.models.map((m) => ({
        id: m.id,
        displayName: m.displayName,
        kind: m.kind,
        context: m.context,
        pricing: m.pricing,
        capabilities: m.capabilities,
        abliterated: m.abliterated,
        defaultMaxOutputTokens: m.defaultMaxOutputTokens,
        upstreamModel: m.upstreams[0]?.model,
      })),
    );
  });
});
