// Metric names selected by a PromQL expression, for checking that every name the chart's alerts and
// dashboard select is one the gateway exports (promtool parses the expressions; it has no offline way
// to list their selectors).
//
// Why a hand-written tokenizer: we only need the metric names an expression selects, not a full
// parse tree, and the one maintained PromQL parser for JavaScript (Prometheus' Lezer grammar) would
// be a dependency for this one job. Metric names are the identifiers that are not function or
// aggregation names (those are followed by `(`), not keywords, not inside a label matcher `{…}`, a
// range `[…]` or a string, and not in the label list after by/without/on/ignoring/group_*.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';

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


const CHART = new URL('../../charts/tollgate/', import.meta.url);

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

/** Every PromQL expression of the Grafana dashboard (panel targets; label_values' metric argument). */
export function dashboardExpressions(): { where: string; expr: string; variable: boolean }[] {
  const dash = JSON.parse(readFileSync(new URL('dashboards/tollgate.json', CHART), 'utf8')) as Dashboard;
  const out: { where: string; expr: string; variable: boolean }[] = [];
  const walk = (panels: Panel[]): void => {
    for (const p of panels) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ where: `panel "${p.title}"`, expr: t.expr, variable: false });
      walk(p.panels ?? []);
    }
  };
  walk(dash.panels);
  for (const v of dash.templating.list) {
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    // Grafana's label_values(metric, label) is not PromQL: its metric argument is.
    const lv = q ? /^label_values\(\s*([^,]+),/.exec(q) : null;
    if (lv) out.push({ where: `variable ${v.name}`, expr: lv[1]!, variable: true });
  }
  return out;
}

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface RuleFile {
  groups: { name: string; rules: AlertRule[] }[];
}
export const ALERT_RULES_PATH = fileURLToPath(new URL('rules/tollgate-alerts.yaml', CHART));
export function alertRules(): RuleFile {
  return parseYaml(readFileSync(ALERT_RULES_PATH, 'utf8')) as RuleFile;
}
