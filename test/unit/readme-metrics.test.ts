// The metric tables in README.md and docs/observability.md must describe exactly what GatewayMetrics
// registers (name, type, labels), and the README must name every variable tracing reads: a renamed
// or added metric otherwise leaves a reader querying a series that does not exist.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GatewayMetrics, METRIC_PREFIX } from '../../src/telemetry/metrics.js';

const ROOT = new URL('../../', import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, ROOT), 'utf8');

/** Node.js default metrics (collectDefaultMetrics), which the tables sum up in one line or row. */
const DEFAULT_PREFIXES = [`${METRIC_PREFIX}process_`, `${METRIC_PREFIX}nodejs_`];
const isDefault = (name: string): boolean => DEFAULT_PREFIXES.some((p) => name.startsWith(p));

interface Row {
  metric: string;
  type: string;
  labels: string[];
  meaning: string;
}

/** The text under `heading` (a whole line, e.g. `## Observability`) up to the next heading of its level. */
function section(markdown: string, heading: string): string {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`no heading "${heading}"`);
  const level = /^#+/.exec(heading)?.[0].length ?? 0;
  const ends = (line: string): boolean => {
    const hashes = /^(#+)\s/.exec(line)?.[1]?.length;
    return hashes !== undefined && hashes <= level;
  };
  let end = start + 1;
  while (end < lines.length && !ends(lines[end]!)) end++;
  return lines.slice(start + 1, end).join('\n');
}

/** Cells of a Markdown table row, split on pipes that are not escaped. */
function cells(line: string): string[] {
  const inner = line.trim().replace(/^\|/, '').replace(/\|$/, '');
  return inner.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

/** Rows of the `| Metric | Type | Labels | Meaning |` table in `text`; wildcard rows are left out. */
function metricTable(text: string): Row[] {
  const lines = text.split('\n');
  const head = lines.findIndex((l) => /^\|\s*Metric\s*\|\s*Type\s*\|\s*Labels\s*\|\s*Meaning\s*\|\s*$/i.test(l));
  if (head < 0) throw new Error('no "| Metric | Type | Labels | Meaning |" table');
  if (!/^\|(\s*:?-+:?\s*\|){4}\s*$/.test(lines[head + 1] ?? '')) throw new Error('table header has no delimiter row');
  const rows: Row[] = [];
  for (const line of lines.slice(head + 2)) {
    if (!line.trim().startsWith('|')) break;
    const c = cells(line);
    if (c.length !== 4) throw new Error(`expected 4 cells: ${line}`);
    const [metricCell, type, labelCell, meaning] = c as [string, string, string, string];
    if (metricCell.includes('*')) continue; // `tollgate_process_*`: checked against the default metrics
    const name = /^`([a-zA-Z_:][a-zA-Z0-9_:]*)`$/.exec(metricCell);
    if (!name) throw new Error(`metric cell is not one \`name\`: ${line}`);
    const labels = labelCell === '–' || labelCell === '-' || labelCell === '' ? [] : labelCell.split(',').map((l) => l.trim());
    rows.push({ metric: name[1]!, type, labels, meaning });
  }
  return rows;
}

/** `tollgate_…*` wildcards named in `text` (backticked), as prefixes. */
function wildcardPrefixes(text: string): string[] {
  return [...text.matchAll(/`(tollgate_[a-z0-9_]*)\*`/g)].map((m) => m[1]!);
}

interface Exported {
  type: string;
  labels: string[];
}

async function registry(): Promise<{ gateway: Map<string, Exported>; defaults: string[] }> {
  const metrics = new GatewayMetrics();
  const gateway = new Map<string, Exported>();
  const defaults: string[] = [];
  for (const m of metrics.registry.getMetricsAsArray()) {
    if (isDefault(m.name)) {
      defaults.push(m.name);
      continue;
    }
    // prom-client's MetricObject type omits labelNames, which its metrics and our bound ones carry.
    const labels = 'labelNames' in m && Array.isArray(m.labelNames) ? m.labelNames.map(String) : [];
    gateway.set(m.name, { type: String(m.type), labels });
  }
  return { gateway, defaults };
}

/** Differences between a table and the registry, as readable lines (empty when they agree). */
function drift(rows: Row[], gateway: Map<string, Exported>): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const row of rows) {
    if (seen.has(row.metric)) out.push(`listed twice: ${row.metric}`);
    seen.add(row.metric);
    const real = gateway.get(row.metric);
    if (real === undefined) {
      out.push(`not exported: ${row.metric}`);
      continue;
    }
    if (row.type !== real.type) out.push(`${row.metric}: type ${row.type}, exported as ${real.type}`);
    const a = [...row.labels].sort().join(', ');
    const b = [...real.labels].sort().join(', ');
    if (a !== b) out.push(`${row.metric}: labels [${a}], exported with [${b}]`);
    if (row.meaning.length < 10) out.push(`${row.metric}: no meaning given`);
  }
  for (const name of gateway.keys()) if (!seen.has(name)) out.push(`missing: ${name}`);
  return out;
}

const README = read('README.md');
const OBSERVABILITY_DOC = read('docs/observability.md');

describe('README metric table', () => {
  const text = section(README, '## Observability');

  it('lists exactly the gateway metrics, with their types and labels', async () => {
    const { gateway } = await registry();
    expect(gateway.size).toBe(32);
    for (const name of gateway.keys()) expect(name.startsWith(METRIC_PREFIX), name).toBe(true);
    expect(drift(metricTable(text), gateway)).toEqual([]);
  });

  it('covers the default process metrics with the prefixes it names', async () => {
    const { defaults } = await registry();
    expect(defaults.length).toBeGreaterThan(0);
    const prefixes = wildcardPrefixes(text);
    expect(prefixes.sort()).toEqual([...DEFAULT_PREFIXES].sort());
    expect(defaults.filter((d) => !prefixes.some((p) => d.startsWith(p)))).toEqual([]);
  });

  it('names every environment variable tracing, logging and the metrics port read', () => {
    const tracingSource = read('src/telemetry/tracing.ts');
    const vars = new Set([...tracingSource.matchAll(/\benv\.([A-Z][A-Z0-9_]+)/g)].map((m) => m[1]!));
    // The variables the tracing module decides on; the SDK reads the rest of OTEL_* itself.
    expect([...vars].sort()).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
      'OTEL_SDK_DISABLED',
      'OTEL_SERVICE_NAME',
      'OTEL_TRACES_EXPORTER',
      'TOLLGATE_TRACE_CONTENT',
      'TOLLGATE_TRACING',
    ]);
    for (const v of [...vars, 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG', 'LOG_LEVEL', 'METRICS_PORT']) {
      expect(text, v).toMatch(new RegExp(`\\b${v}\\b`));
    }
    expect(text).toContain('](docs/observability.md)');
  });
});

describe('docs/observability.md metric table', () => {
  const text = section(OBSERVABILITY_DOC, '## Prometheus metrics');

  it('lists exactly the gateway metrics, with their types and labels', async () => {
    const { gateway } = await registry();
    expect(drift(metricTable(text), gateway)).toEqual([]);
  });

  it('covers the default process metrics with the prefixes it names', async () => {
    const { defaults } = await registry();
    const prefixes = wildcardPrefixes(text);
    expect(prefixes.sort()).toEqual([...DEFAULT_PREFIXES].sort());
    expect(defaults.filter((d) => !prefixes.some((p) => d.startsWith(p)))).toEqual([]);
  });
});

describe('table parsing', () => {
  const table = [
    'Intro.',
    '',
    '| Metric | Type | Labels | Meaning |',
    '|---|---|---|---|',
    '| `tollgate_a_total` | counter | model, kind | Something counted, with a \\| pipe. |',
    '| `tollgate_b` | gauge | – | Something measured now. |',
    '| `tollgate_process_*` | various | – | Process metrics. |',
    '',
    '| Metric | Other |',
  ].join('\n');

  it('reads names, types and labels, and stops at the end of the table', () => {
    expect(metricTable(table)).toEqual([
      { metric: 'tollgate_a_total', type: 'counter', labels: ['model', 'kind'], meaning: 'Something counted, with a | pipe.' },
      { metric: 'tollgate_b', type: 'gauge', labels: [], meaning: 'Something measured now.' },
    ]);
    expect(wildcardPrefixes(table)).toEqual(['tollgate_process_']);
  });

  it('reports a missing, an unknown and a mislabelled metric', () => {
    const gateway = new Map<string, Exported>([
      ['tollgate_a_total', { type: 'counter', labels: ['kind', 'model', 'upstream'] }],
      ['tollgate_c', { type: 'gauge', labels: [] }],
    ]);
    expect(drift(metricTable(table), gateway)).toEqual([
      'tollgate_a_total: labels [kind, model], exported with [kind, model, upstream]',
      'not exported: tollgate_b',
      'missing: tollgate_c',
    ]);
  });

  it('refuses a malformed row rather than skipping it', () => {
    expect(() => metricTable(table.replace('| gauge | – |', '| gauge |'))).toThrow(/expected 4 cells/);
    expect(() => metricTable(table.replace('`tollgate_b`', 'tollgate_b'))).toThrow(/not one `name`/);
  });

  it('takes a section up to the next heading of its level', () => {
    expect(section('# T\n## A\na\n### A.1\nb\n## B\nc', '## A')).toBe('a\n### A.1\nb');
    expect(section('# T\n## A\na\n# U\nc', '## A')).toBe('a');
    expect(() => section('## A\na', '## C')).toThrow(/no heading/);
  });
});
