// The chart's files on their own: plain YAML parses, the CRD copy matches the source of truth, the
// chart's defaults agree with the gateway's own (drain bound), the image knows the migration command,
// and the example catalog carries the same five models as examples/catalog.yaml. What helm makes of
// the chart (lint, templates, the schema's refusals, installs) is test/k8s/chart.test.ts and
// test/k8s/apiserver.test.ts, with the real helm.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../src/config.js';
import { GATEWAY_NODE_FLAGS } from '../../bench/targets.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CHART = join(ROOT, 'charts', 'tollgate');

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;

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

  it('keeps the values keys the observability templates read', () => {
    const metrics = defaults.metrics as Record<string, Record<string, unknown>>;
    expect(metrics.serviceMonitor).toMatchObject({ enabled: false });
    expect(typeof metrics.serviceMonitor?.interval).toBe('string');
    expect(metrics.prometheusRule).toMatchObject({ enabled: false });
    expect(metrics.grafanaDashboard).toMatchObject({ enabled: false, sidecarLabel: 'grafana_dashboard', sidecarLabelValue: '1' });
  });

  it("the chart's drain defaults are the gateway's, and the grace period fits the drain", () => {
    const g = defaults.gateway as { terminationGracePeriodSeconds: number; drain: { preStopSleepSeconds: number; timeoutSeconds: number } };
    expect(g.drain.preStopSleepSeconds).toBeGreaterThan(0);
    // The gateway's own default bound (config.ts) is the chart's.
    expect(readConfig({}).drainTimeoutMs).toBe(g.drain.timeoutSeconds * 1000);
    // preStop + drain bound + 5 s for cut streams to settle + the settlement flush, with room to spare.
    const settlementFlushS = readConfig({}).settlementFlushMs / 1000;
    expect(g.terminationGracePeriodSeconds).toBeGreaterThan(g.drain.preStopSleepSeconds + g.drain.timeoutSeconds + 5 + settlementFlushS);
    expect(15).toBeGreaterThanOrEqual(5 + settlementFlushS);
  });

  it("the chart's audit log retention is the gateway's default, and the gateway's template hands it over", () => {
    const database = defaults.database as { auditRetentionDays: number };
    expect(readConfig({}).auditRetentionDays).toBe(400);
    expect(database.auditRetentionDays).toBe(readConfig({}).auditRetentionDays);
    const template = readFileSync(join(CHART, 'templates', 'gateway-deployment.yaml'), 'utf8');
    expect(template).toMatch(/- name: TOLLGATE_AUDIT_RETENTION_DAYS\s+value: \{\{ \.Values\.database\.auditRetentionDays \| quote \}\}/);
  });

  it('the image runs the gateway with the V8 flags the bench runs its gateways with', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain(`gateway) exec node ${GATEWAY_NODE_FLAGS.join(' ')} dist/src/gateway-main.js ;;`);
  });

  it("the migration Job's `migrate` argument is a command of the image and of npm", () => {
    // The image's entrypoint knows the argument, and `npm run migrate` is the same program.
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain('migrate) exec node dist/src/record/migrate-cli.js ;;');
    // ...and carries the SQL that the compiled migrate.js looks for beside the app (tsc copies no .sql).
    expect(dockerfile).toContain('COPY src/record/migrations ./src/record/migrations');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.migrate).toBe('tsx src/record/migrate-cli.ts');
    expect(defaults.database).toMatchObject({ existingSecret: '', urlKey: 'url' });
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
