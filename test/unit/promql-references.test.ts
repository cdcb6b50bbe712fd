// Every PromQL expression the chart ships (Grafana dashboard panels and variables, alert rules) must
// reference only metrics the gateway actually exports: a renamed metric otherwise leaves an empty
// panel or, worse, an alert that can never fire.
//
// Why a hand-written tokenizer: we only need the metric names an expression selects, not a full
// parse tree, and the one maintained PromQL parser for JavaScript (Prometheus' Lezer grammar) would
// be a dependency for this one test. Metric names are the identifiers that are not function or
// aggregation names (those are followed by `(`), not keywords, not inside a label matcher `{…}`, a
// range `[…]` or a string, and not in the label list after by/without/on/ignoring/group_*.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { GatewayMetrics } from '../../src/telemetry/metrics.js';

const CHART = new URL('../../charts/tollgate/', import.meta.url);

const KEYWORDS = new Set([
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'and', 'or', 'unless',
  'atan2', 'inf', 'nan', 'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values',
  'bottomk', 'topk', 'quantile', 'limitk', 'limit_ratio',
]);
const LABEL_LIST_KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

/** Metric names selected by a PromQL expression (Grafana `$variables` allowed). */
export function metricNames(expr: string): string[] {
  const names: string[] = [];
  let i = 0;
  const n = expr.length;
  const skipString = (): void => {
    const quote = expr[i];
    i++;
    while (i < n && expr[i] !== quote) i += expr[i] === '\\' ? 2 : 1;
    if (i >= n) throw new Error(`unterminated string in: ${expr}`);
    i++;
  };
  /** Skips a balanced `open…close` block, honouring strings inside it. */
  const skipBlock = (open: string, close: string): void => {
    let depth = 0;
    while (i < n) {
      const c = expr[i]!;
      if (c === '"' || c === "'" || c === '`') {
        skipString();
        continue;
      }
      if (c === open) depth++;
      else if (c === close && --depth === 0) {
        i++;
        return;
      }
      i++;
    }
    throw new Error(`unbalanced ${open}${close} in: ${expr}`);
  };
  const nextNonSpace = (from: number): string | undefined => {
    let j = from;
    while (j < n && /\s/.test(expr[j]!)) j++;
    return expr[j];
  };

  while (i < n) {
    const c = expr[i]!;
    if (/\s/.test(c)) i++;
    else if (c === '#') while (i < n && expr[i] !== '\n') i++; // comment
    else if (c === '"' || c === "'" || c === '`') skipString();
    else if (c === '{') skipBlock('{', '}');
    else if (c === '[') skipBlock('[', ']');
    else if (c === '$') {
      // Grafana variable: $name, ${name}, $__rate_interval
      i++;
      if (expr[i] === '{') skipBlock('{', '}');
      else while (i < n && /[A-Za-z0-9_]/.test(expr[i]!)) i++;
    } else if (/[0-9.]/.test(c)) {
      // number, 1e-9, 0x1f, or a duration (5m, 1h30m)
      const m = /^(?:0x[0-9a-f]+|[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?[a-z0-9]*)/i.exec(expr.slice(i));
      i += m ? m[0].length : 1;
    } else if (/[A-Za-z_:]/.test(c)) {
      const m = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(expr.slice(i))!;
      const word = m[0];
      i += word.length;
      const lower = word.toLowerCase();
      if (LABEL_LIST_KEYWORDS.has(lower)) {
        if (nextNonSpace(i) === '(') {
          while (expr[i] !== '(') i++;
          skipBlock('(', ')');
        }
      } else if (KEYWORDS.has(lower)) {
        // operator keyword or aggregation name
      } else if (nextNonSpace(i) === '(') {
        // function call
      } else {
        names.push(word);
      }
    } else i++;
  }
  return names;
}

/** The metric names a registry exposes, with histogram series suffixes. */
async function exportedNames(): Promise<Set<string>> {
  const metrics = new GatewayMetrics();
  const names = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    names.add(m.name);
    const type = String(m.type);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m.name + s);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(m.name + s);
  }
  return names;
}

interface Target {
  expr?: string;
}
interface Panel {
  title?: string;
  type?: string;
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  panels: Panel[];
  templating: { list: { name: string; query?: string | { query?: string } }[] };
}

function dashboardExpressions(): { where: string; expr: string }[] {
  const dash = JSON.parse(readFileSync(new URL('dashboards/tollgate.json', CHART), 'utf8')) as Dashboard;
  const out: { where: string; expr: string }[] = [];
  const walk = (panels: Panel[]): void => {
    for (const p of panels) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ where: `panel "${p.title}"`, expr: t.expr });
      walk(p.panels ?? []);
    }
  };
  walk(dash.panels);
  for (const v of dash.templating.list) {
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    // Grafana's label_values(metric, label) is not PromQL: check its metric argument.
    const lv = q ? /^label_values\(\s*([^,]+),/.exec(q) : null;
    if (lv) out.push({ where: `variable ${v.name}`, expr: lv[1]! });
  }
  return out;
}

interface RuleFile {
  groups: { name: string; rules: { alert?: string; record?: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }[] }[];
}
const rules = parseYaml(readFileSync(new URL('rules/tollgate-alerts.yaml', CHART), 'utf8')) as RuleFile;

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

describe('dashboard and alert rules reference only exported metrics', () => {
  it('every dashboard expression', async () => {
    const exported = await exportedNames();
    const exprs = dashboardExpressions();
    expect(exprs.length).toBeGreaterThan(25);
    const missing: string[] = [];
    for (const { where, expr } of exprs) {
      const names = metricNames(expr);
      expect(names.length, `${where}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) if (!exported.has(name)) missing.push(`${where}: ${name}`);
    }
    expect(missing).toEqual([]);
  });

  it('every alert rule', async () => {
    const exported = await exportedNames();
    const missing: string[] = [];
    let count = 0;
    for (const group of rules.groups) {
      for (const rule of group.rules) {
        count++;
        const names = metricNames(rule.expr);
        expect(names.length, rule.alert).toBeGreaterThan(0);
        for (const name of names) if (!exported.has(name)) missing.push(`${rule.alert}: ${name}`);
      }
    }
    expect(count).toBeGreaterThanOrEqual(8);
    expect(missing).toEqual([]);
  });

  it('a misspelt metric is caught', async () => {
    const exported = await exportedNames();
    const names = metricNames('sum(rate(tollgate_request_total[5m]))');
    expect(names.filter((x) => !exported.has(x))).toEqual(['tollgate_request_total']);
  });
});

describe('alert rules and dashboard are well formed', () => {
  it('each alert has a severity, a summary, a description and a duration', () => {
    const alerts = rules.groups.flatMap((g) => g.rules);
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

  it('templates are toggled by the agreed values keys and include files that exist', () => {
    const t = (f: string): string => readFileSync(new URL(`templates/${f}`, CHART), 'utf8');
    const sm = t('servicemonitor.yaml');
    expect(sm).toMatch(/^\{\{- if \.Values\.metrics\.serviceMonitor\.enabled \}\}$/m);
    expect(sm).toContain('.Values.metrics.serviceMonitor.interval');
    expect(sm).toMatch(/- port: metrics$/m);
    // Selects the gateway Service by the chart's own selector labels (defined in _helpers.tpl).
    expect(sm).toContain('include "tollgate.gateway.selectorLabels"');
    const pr = t('prometheusrule.yaml');
    expect(pr).toMatch(/^\{\{- if \.Values\.metrics\.prometheusRule\.enabled \}\}$/m);
    expect(pr).toContain('.Files.Get "rules/tollgate-alerts.yaml"');
    const gd = t('grafana-dashboard-configmap.yaml');
    expect(gd).toMatch(/^\{\{- if \.Values\.metrics\.grafanaDashboard\.enabled \}\}$/m);
    expect(gd).toContain('{{ .Values.metrics.grafanaDashboard.sidecarLabel }}: {{ .Values.metrics.grafanaDashboard.sidecarLabelValue | quote }}');
    expect(gd).toContain('.Files.Get "dashboards/tollgate.json"');
    for (const f of [sm, pr, gd]) {
      const opens = f.match(/\{\{-? *(if|with|range)\b/g)?.length ?? 0;
      const ends = f.match(/\{\{-? *end *-?\}\}/g)?.length ?? 0;
      expect(ends).toBe(opens);
    }
  });
});
