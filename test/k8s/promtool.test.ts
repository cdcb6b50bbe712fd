// The chart's alert rules and Grafana dashboard through promtool (tools/bin/promtool, Prometheus 3):
// `promtool check rules` accepts the rules; `promtool test rules` shows each alert firing, with its
// labels and rendered annotations, on the series that should fire it, and silent on series that
// should not (the case names say why); every dashboard expression parses; and every metric an alert
// or a panel selects is exported by a running gateway's /metrics.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './harness/control-plane.js';
import { ALERT_RULES_PATH, alertRules, dashboardExpressions, metricNames } from '../helpers/promql-names.js';
import { ROOT, TOOLS_TIMEOUT_MS, ensureTools, toolPath } from './harness/tools.js';

function promtool(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(toolPath('promtool'), args, { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

interface AlertCase {
  /** Why it should fire or stay silent. */
  name: string;
  series: Record<string, string>;
  evalTime: string;
  /** Absent: the alert must be silent. */
  fires?: { labels: Record<string, string>; summary: string }[];
}

/** Two or more cases per alert: at least one that fires (labels and summary exact) and one that does not. */
const CASES: Record<string, AlertCase[]> = {
  TollgateUpstreamErrorRatioHigh: [
    {
      name: 'fires: 10% of 1 call/s fail for 20 minutes',
      series: {
        'tollgate_upstream_errors_total{model="m",upstream="u",class="timeout"}': '0+6x30',
        'tollgate_upstream_duration_seconds_count{model="m",upstream="u"}': '0+60x30',
      },
      evalTime: '20m',
      fires: [{ labels: { severity: 'warning', model: 'm', upstream: 'u' }, summary: 'Upstream u of m fails 10% of calls' }],
    },
    {
      name: 'silent: 100% of 0.03 calls/s fail (below the traffic floor)',
      series: {
        'tollgate_upstream_errors_total{model="m",upstream="u",class="timeout"}': '0+2x30',
        'tollgate_upstream_duration_seconds_count{model="m",upstream="u"}': '0+2x30',
      },
      evalTime: '20m',
    },
    {
      name: 'silent: 2% fail',
      series: {
        'tollgate_upstream_errors_total{model="m",upstream="u",class="timeout"}': '0+1x30',
        'tollgate_upstream_duration_seconds_count{model="m",upstream="u"}': '0+50x30',
      },
      evalTime: '20m',
    },
  ],
  TollgateTimeToFirstTokenP95High: [
    {
      name: 'fires: every first token takes 10-30 s',
      series: {
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="1"}': '0x40',
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="10"}': '0x40',
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="30"}': '0+10x40',
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="+Inf"}': '0+10x40',
      },
      evalTime: '30m',
      fires: [{ labels: { severity: 'warning', model: 'm' }, summary: 'p95 time to first token of m is 29s' }],
    },
    {
      name: 'silent: first tokens within a second',
      series: {
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="1"}': '0+10x40',
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="10"}': '0+10x40',
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="30"}': '0+10x40',
        'tollgate_upstream_time_to_first_token_seconds_bucket{model="m",le="+Inf"}': '0+10x40',
      },
      evalTime: '30m',
    },
  ],
  TollgateRequestLatencyP95High: [
    {
      name: 'fires: chat completions take 1-5 minutes',
      series: {
        'tollgate_request_duration_seconds_bucket{route="/v1/chat/completions",model="m",le="60"}': '0x40',
        'tollgate_request_duration_seconds_bucket{route="/v1/chat/completions",model="m",le="300"}': '0+10x40',
        'tollgate_request_duration_seconds_bucket{route="/v1/chat/completions",model="m",le="+Inf"}': '0+10x40',
      },
      evalTime: '30m',
      fires: [{ labels: { severity: 'warning', model: 'm' }, summary: 'p95 request duration of m is 4m 48s' }],
    },
    {
      name: 'silent: the same durations on a route that is not a completion',
      series: {
        'tollgate_request_duration_seconds_bucket{route="/v1/models",model="m",le="60"}': '0x40',
        'tollgate_request_duration_seconds_bucket{route="/v1/models",model="m",le="300"}': '0+10x40',
        'tollgate_request_duration_seconds_bucket{route="/v1/models",model="m",le="+Inf"}': '0+10x40',
      },
      evalTime: '30m',
    },
  ],
  TollgateServerErrorRatioHigh: [
    {
      name: 'fires: 10% of 1 request/s are 5xx',
      series: {
        'tollgate_requests_total{status="200",route="/v1/chat/completions"}': '0+54x30',
        'tollgate_requests_total{status="502",route="/v1/chat/completions"}': '0+6x30',
      },
      evalTime: '20m',
      fires: [{ labels: { severity: 'critical' }, summary: 'Tollgate answers 10% of requests with a 5xx' }],
    },
    {
      name: 'silent: every request fails but there are 0.05/s (below the traffic floor)',
      series: { 'tollgate_requests_total{status="502",route="/v1/chat/completions"}': '0+3x30' },
      evalTime: '20m',
    },
  ],
  TollgateReservationRefusalsSpike: [
    {
      name: 'fires: refusals jump from 1/min to 1/s',
      series: { 'tollgate_reservations_total{outcome="refused",reason="balance"}': '0+1x120 180+60x40' },
      evalTime: '140m',
      fires: [{ labels: { severity: 'info' }, summary: 'Reservation refusals are 1/s, three times the usual rate' }],
    },
    {
      name: 'silent: a steady 1/s of refusals',
      series: { 'tollgate_reservations_total{outcome="refused",reason="balance"}': '0+60x160' },
      evalTime: '140m',
    },
    {
      name: 'silent: admitted requests jump',
      series: { 'tollgate_reservations_total{outcome="admitted"}': '0+1x120 180+600x40' },
      evalTime: '140m',
    },
  ],
  TollgateReaperReturningHolds: [
    {
      name: 'fires: the reaper returned holds',
      series: { tollgate_reaper_returned_holds_total: '0x40 3x20' },
      evalTime: '50m',
      fires: [{ labels: { severity: 'warning' }, summary: 'The reaper returned 3 expired holds in 30 minutes' }],
    },
    { name: 'silent: no hold returned', series: { tollgate_reaper_returned_holds_total: '0x60' }, evalTime: '50m' },
  ],
  TollgateLedgerErrors: [
    {
      name: 'fires: reservations fail',
      series: { 'tollgate_ledger_errors_total{operation="reserve"}': '0+1x20' },
      evalTime: '15m',
      fires: [{ labels: { severity: 'critical', operation: 'reserve' }, summary: 'Ledger (Redis) reserve calls are failing' }],
    },
    {
      name: 'fires: the reaper fails',
      series: { tollgate_reaper_errors_total: '0+1x20' },
      evalTime: '15m',
      fires: [{ labels: { severity: 'critical', operation: 'reaper' }, summary: 'Ledger (Redis) reaper calls are failing' }],
    },
    {
      name: 'silent: no new errors',
      series: { 'tollgate_ledger_errors_total{operation="reserve"}': '5x20', tollgate_reaper_errors_total: '2x20' },
      evalTime: '15m',
    },
  ],
  TollgateSettlementAbandoned: [
    {
      name: 'fires: a gateway abandoned settlements',
      series: { tollgate_settlements_abandoned_total: '0x20 2x20' },
      evalTime: '25m',
      fires: [{ labels: { severity: 'critical' }, summary: 'A gateway stopped with settlements it could not apply' }],
    },
    { name: 'silent: none abandoned', series: { tollgate_settlements_abandoned_total: '0x40' }, evalTime: '25m' },
  ],
  TollgateSettlementsPending: [
    {
      name: 'fires: 3 settlements wait for 10 minutes',
      series: { 'tollgate_settlements_pending{pod="gw-1"}': '3x20' },
      evalTime: '10m',
      fires: [{ labels: { severity: 'warning' }, summary: '3 settlements are waiting for the ledger' }],
    },
    { name: 'silent: settlements have waited 3 minutes (under the 5 the alert allows)', series: { 'tollgate_settlements_pending{pod="gw-1"}': '3x20' }, evalTime: '3m' },
    { name: 'silent: settlements waited 2 minutes and were applied', series: { 'tollgate_settlements_pending{pod="gw-1"}': '3 3 0x20' }, evalTime: '10m' },
  ],
  TollgateLedgerDown: [
    {
      name: 'fires: one gateway has no ledger',
      series: { 'tollgate_ledger_up{pod="gw-1"}': '1x10', 'tollgate_ledger_up{pod="gw-2"}': '0x10' },
      evalTime: '5m',
      fires: [{ labels: { severity: 'critical' }, summary: 'The billing ledger is unavailable to a gateway' }],
    },
    { name: 'silent: every gateway has its ledger', series: { 'tollgate_ledger_up{pod="gw-1"}': '1x10', 'tollgate_ledger_up{pod="gw-2"}': '1x10' }, evalTime: '5m' },
  ],
  TollgateJournalLagging: [
    {
      name: 'fires: usage records 45 s behind',
      series: { 'tollgate_journal_lag_seconds{pod="gw-1"}': '45x10' },
      evalTime: '5m',
      fires: [{ labels: { severity: 'warning' }, summary: 'Usage records are 45s behind PostgreSQL' }],
    },
    { name: 'silent: 20 s behind', series: { 'tollgate_journal_lag_seconds{pod="gw-1"}': '20x10' }, evalTime: '5m' },
  ],
  TollgateJournalFailing: [
    {
      name: 'fires: commits fail',
      series: { 'tollgate_journal_errors_total{stage="commit"}': '0+1x20' },
      evalTime: '15m',
      fires: [{ labels: { severity: 'critical', stage: 'commit' }, summary: 'Journal commits to PostgreSQL are failing' }],
    },
    { name: 'silent: only loads fail', series: { 'tollgate_journal_errors_total{stage="load"}': '0+1x20' }, evalTime: '15m' },
  ],
  TollgateReconciliationDifference: [
    {
      name: 'fires: 250 micro-USD differ',
      series: { tollgate_reconcile_difference_micro_usd: '250x5' },
      evalTime: '2m',
      fires: [{ labels: { severity: 'critical' }, summary: 'Reconciliation found 250 micro-USD of difference between PostgreSQL and Redis' }],
    },
    { name: 'silent: the books agree', series: { tollgate_reconcile_difference_micro_usd: '0x5' }, evalTime: '2m' },
  ],
  TollgateLedgerLatencyHigh: [
    {
      name: 'fires: reservations take 10-100 ms',
      series: {
        'tollgate_ledger_call_duration_seconds_bucket{operation="reserve",le="0.01"}': '0x30',
        'tollgate_ledger_call_duration_seconds_bucket{operation="reserve",le="0.1"}': '0+10x30',
        'tollgate_ledger_call_duration_seconds_bucket{operation="reserve",le="+Inf"}': '0+10x30',
      },
      evalTime: '25m',
      fires: [{ labels: { severity: 'warning', operation: 'reserve' }, summary: 'p99 ledger reserve latency is 99.1ms' }],
    },
    {
      name: 'silent: reservations within 10 ms',
      series: {
        'tollgate_ledger_call_duration_seconds_bucket{operation="reserve",le="0.01"}': '0+10x30',
        'tollgate_ledger_call_duration_seconds_bucket{operation="reserve",le="0.1"}': '0+10x30',
        'tollgate_ledger_call_duration_seconds_bucket{operation="reserve",le="+Inf"}': '0+10x30',
      },
      evalTime: '25m',
    },
  ],
  TollgateCatalogNotReady: [
    {
      name: 'fires: a gateway without a catalog for 10 minutes',
      series: { 'tollgate_catalog_ready{pod="gw-1"}': '0x15', 'tollgate_catalog_ready{pod="gw-2"}': '1x15' },
      evalTime: '10m',
      fires: [{ labels: { severity: 'critical', pod: 'gw-1' }, summary: 'Gateway gw-1 has no valid model catalog' }],
    },
    { name: 'silent: a gateway starting for 3 minutes without a catalog (under the 5 the alert allows)', series: { 'tollgate_catalog_ready{pod="gw-1"}': '0x15' }, evalTime: '3m' },
  ],
  TollgateCatalogUpdateRejected: [
    {
      name: 'fires: an edit was rejected',
      series: { tollgate_catalog_rejected_total: '0x10 1x10' },
      evalTime: '15m',
      fires: [{ labels: { severity: 'warning' }, summary: 'A ModelCatalog edit was rejected; gateways keep serving the previous snapshot' }],
    },
    { name: 'silent: no edit rejected', series: { tollgate_catalog_rejected_total: '0x20' }, evalTime: '15m' },
  ],
  TollgateCatalogSnapshotStale: [
    {
      name: 'fires: gateways disagree on the generation for 20 minutes',
      series: { 'tollgate_catalog_generation{pod="gw-1"}': '5x30', 'tollgate_catalog_generation{pod="gw-2"}': '4x30' },
      evalTime: '25m',
      fires: [{ labels: { severity: 'warning' }, summary: 'Some gateways serve an older catalog snapshot than others' }],
    },
    {
      name: 'fires: a day-old snapshot while edits keep being rejected',
      series: {
        'tollgate_catalog_generation{pod="gw-1"}': '5x30',
        'tollgate_catalog_snapshot_age_seconds{pod="gw-1"}': '90000+60x30',
        tollgate_catalog_rejected_total: '0+1x30',
      },
      evalTime: '25m',
      fires: [{ labels: { severity: 'warning' }, summary: 'Some gateways serve an older catalog snapshot than others' }],
    },
    {
      name: 'silent: a day-old snapshot nobody tries to change',
      series: { 'tollgate_catalog_generation{pod="gw-1"}': '5x30', 'tollgate_catalog_snapshot_age_seconds{pod="gw-1"}': '90000+60x30', tollgate_catalog_rejected_total: '0x30' },
      evalTime: '25m',
    },
    {
      name: 'silent: gateways disagree for 5 minutes during a rollout',
      series: { 'tollgate_catalog_generation{pod="gw-1"}': '5x30', 'tollgate_catalog_generation{pod="gw-2"}': '4 4 4 4 4 5x25' },
      evalTime: '25m',
    },
  ],
};

const rules = alertRules().groups.flatMap((g) => g.rules);

/** A promtool unit-test file: one test group per case, named "<alert>: <case>", expecting exact alerts. */
function unitTests(dir: string): string {
  const tests = Object.entries(CASES).flatMap(([alert, cases]) => {
    const rule = rules.find((r) => r.alert === alert);
    return cases.map((c) => ({
      name: `${alert}: ${c.name}`,
      interval: '1m',
      input_series: Object.entries(c.series).map(([series, values]) => ({ series, values })),
      alert_rule_test: [
        {
          eval_time: c.evalTime,
          alertname: alert,
          exp_alerts: (c.fires ?? []).map((f) => ({
            exp_labels: f.labels,
            // Every annotation: the summary as rendered, the description as written (it has no template).
            exp_annotations: { ...(rule?.annotations ?? {}), summary: f.summary },
          })),
        },
      ],
    }));
  });
  const path = join(dir, 'tollgate-alerts.test.yaml');
  writeFileSync(path, stringify({ rule_files: [ALERT_RULES_PATH], evaluation_interval: '1m', tests }));
  return path;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('alert rules and dashboard through promtool', () => {
  let dir: string;
  let testFile: string;

  beforeAll(() => {
    ensureTools();
    dir = mkdtempSync(join(tmpdir(), 'tollgate-promtool-'));
    testFile = unitTests(dir);
  }, TOOLS_TIMEOUT_MS);

  it('promtool check rules accepts every alert', async () => {
    const result = await promtool(['check', 'rules', ALERT_RULES_PATH]);
    expect(result.out).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(result.code, result.out).toBe(0);
  });

  it('each alert has a case that fires it (exact labels and summary) and one that does not', () => {
    expect(Object.keys(CASES).sort()).toEqual(rules.map((r) => r.alert).sort());
    for (const [alert, cases] of Object.entries(CASES)) {
      expect(cases.some((c) => c.fires && c.fires.length > 0), `${alert} fires somewhere`).toBe(true);
      expect(cases.some((c) => !c.fires), `${alert} stays silent somewhere`).toBe(true);
    }
  });

  // By the cases, not by the rules file: an alert removed from the file leaves its cases to fail.
  it.each(Object.keys(CASES).map((a) => [a]))('promtool test rules: %s fires on its series and stays silent otherwise', async (alert) => {
    const result = await promtool(['test', 'rules', `--run=^${escapeRegExp(alert)}: `, testFile]);
    expect(result.out, result.out).toContain('SUCCESS');
    expect(result.code, result.out).toBe(0);
  });

  it('every dashboard expression parses (as a recording rule promtool checks)', async () => {
    const exprs = dashboardExpressions().filter((e) => !e.variable);
    expect(exprs.length).toBeGreaterThan(25);
    // Grafana's variables, as Grafana substitutes them before Prometheus sees the query.
    const substitute = (expr: string) =>
      expr
        .replace(/\$__rate_interval|\$\{__rate_interval\}|\$__interval|\$\{__interval\}/g, '5m')
        .replace(/\$__range|\$\{__range\}/g, '1h')
        .replace(/\$\{?[A-Za-z_]\w*\}?/g, '.*');
    const file = join(dir, 'dashboard-exprs.yaml');
    writeFileSync(
      file,
      stringify({ groups: [{ name: 'dashboard', rules: exprs.map((e, i) => ({ record: `dashboard:expr_${i}`, expr: substitute(e.expr) })) }] }),
    );
    const result = await promtool(['check', 'rules', file]);
    expect(result.code, result.out).toBe(0);
    expect(result.out).toContain(`SUCCESS: ${exprs.length} rules found`);
    // And promtool does refuse a broken expression (so the check above can fail).
    writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: [{ record: 'dashboard:broken', expr: 'sum(rate(x[5m])' }] }] }));
    expect((await promtool(['check', 'rules', file])).code).not.toBe(0);
  });

  describe('metrics named by alerts and panels are exported by a running gateway', () => {
    let gateway: ChildProcess | undefined;
    let exported: Set<string>;

    beforeAll(async () => {
      // The production entry point (the image's `gateway`), on the example catalog file and the
      // memory ledger: the metrics it registers do not depend on where money is kept.
      const env: Record<string, string | undefined> = { ...process.env };
      delete env.REDIS_URL;
      delete env.DATABASE_URL;
      const [port, metricsPort] = [await freePort(), await freePort()];
      gateway = spawn(process.execPath, ['--import', 'tsx', 'src/gateway-main.ts'], {
        cwd: ROOT,
        env: { ...env, HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: String(metricsPort), LOG_LEVEL: 'warn' },
        stdio: 'ignore',
      });
      const deadline = Date.now() + 30_000;
      let text = '';
      while (!text) {
        text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => (r.ok ? r.text() : ''), () => '');
        if (!text && Date.now() > deadline) throw new Error('the gateway did not serve /metrics within 30 s');
        if (!text) await new Promise((r) => setTimeout(r, 200));
      }
      exported = new Set<string>();
      for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
        exported.add(name ?? '');
        if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) exported.add(`${name ?? ''}${s}`);
        if (type === 'summary') for (const s of ['_sum', '_count']) exported.add(`${name ?? ''}${s}`);
      }
      // promtool's own lint of the exposition (names, help, types).
      const lint = await new Promise<{ code: number; out: string }>((resolve) => {
        const child = execFile(toolPath('promtool'), ['check', 'metrics'], (err, stdout, stderr) => resolve({ code: err ? 1 : 0, out: `${stdout}${stderr}` }));
        child.stdin?.end(text);
      });
      expect(lint.out).not.toMatch(/error/i);
    }, 60_000);
    afterAll(() => {
      gateway?.kill('SIGKILL');
    });

    it('every metric an alert selects', () => {
      const missing = rules.flatMap((r) => metricNames(r.expr).filter((n) => !exported.has(n)).map((n) => `${r.alert}: ${n}`));
      expect(exported.size).toBeGreaterThan(20);
      expect(missing).toEqual([]);
    });

    it('every metric a dashboard panel or variable selects', () => {
      const missing = dashboardExpressions().flatMap((e) => metricNames(e.expr).filter((n) => !exported.has(n)).map((n) => `${e.where}: ${n}`));
      expect(missing).toEqual([]);
    });
  });
});
