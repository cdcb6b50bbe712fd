// The chart's alert rules and Grafana dashboard, as files: the metric-name tokenizer the k8s tests use
// (test/helpers/promql-names.ts), and the rules' and panels' shape. That the expressions parse, that
// each alert fires on its series and stays silent otherwise (promtool), and that every metric they
// name is exported by a running gateway is test/k8s/promtool.test.ts.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { alertRules, metricNames } from '../helpers/promql-names.js';

const CHART = new URL('../../charts/tollgate/', import.meta.url);

describe('PromQL tokenizer', () => {
  it('extracts metric names and nothing else', () => {
    expect(metricNames('up')).toEqual(['up']);
    expect(
      metricNames(
        'histogram_quantile(0.95, sum by (le, model) (rate(tollgate_request_duration_seconds_bucket{model=~"$model", route!="x{y}"}[$__rate_interval])))',
      ),
    ).toEqual(['tollgate_request_duration_seconds_bucket']);
    expect(
      metricNames('sum(rate(a_total[5m] offset 1h)) / on (pod) group_left (x) max without (le) (b:rec) > 1e-9 and bool c'),
    ).toEqual(['a_total', 'b:rec', 'c']);
    expect(metricNames('sum(increase(x_total[$__range])) / 1e6 * 3600')).toEqual(['x_total']);
    expect(metricNames('count(foo) by (bar) unless absent(baz{a="("})')).toEqual(['foo', 'baz']);
    expect(() => metricNames('sum(rate(x{a="b}[5m]))')).toThrow(/unterminated/);
  });
});

describe('alert rules and dashboard are well formed', () => {
  it('each alert has a severity, a summary, a description and a duration', () => {
    const alerts = alertRules().groups.flatMap((g) => g.rules);
    for (const r of alerts) {
      expect(r.alert, JSON.stringify(r)).toMatch(/^Tollgate[A-Za-z0-9]+$/);
      expect(['info', 'warning', 'critical']).toContain(r.labels?.severity);
      expect(r.annotations?.summary).toBeTruthy();
      expect(r.annotations?.description).toBeTruthy();
      expect(r.for).toMatch(/^\d+[smh]$/);
    }
    const names = new Set(alerts.map((a) => a.alert));
    expect(names.size).toBe(alerts.length);
    // The alerts the design asks for.
    for (const a of [
      'TollgateUpstreamErrorRatioHigh',
      'TollgateRequestLatencyP95High',
      'TollgateTimeToFirstTokenP95High',
      'TollgateReservationRefusalsSpike',
      'TollgateReaperReturningHolds',
      'TollgateLedgerErrors',
      'TollgateLedgerLatencyHigh',
      'TollgateCatalogNotReady',
      'TollgateCatalogSnapshotStale',
    ]) {
      expect(names).toContain(a);
    }
  });

  it('dashboard panels have unique ids and use the datasource variable', () => {
    const dash = JSON.parse(readFileSync(new URL('dashboards/tollgate.json', CHART), 'utf8')) as {
      uid: string;
      panels: { id: number; type: string; datasource?: { uid: string } }[];
    };
    expect(dash.uid).toBe('tollgate-gateway');
    const ids = dash.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of dash.panels.filter((x) => x.type !== 'row')) expect(p.datasource?.uid).toBe('${datasource}');
  });
});
