import { describe, expect, it } from 'vitest';
import type { CatalogModel, CatalogSnapshot, CatalogUpstream } from '../../src/catalog/snapshot.js';
import { GatewayMetrics, UNKNOWN_MODEL, statusLabel } from '../../src/telemetry/metrics.js';

function upstream(name: string): CatalogUpstream {
  return {
    name,
    baseUrl: 'http://127.0.0.1:1/v1',
    format: 'openai',
    upstreamModel: 'm',
    weight: 1,
    timeouts: { connectMs: 1000, firstByteMs: 1000, idleMs: 1000 },
    healthy: true,
  } as CatalogUpstream;
}

function model(id: string, upstreams: string[], aliases: string[] = []): CatalogModel {
  return {
    id,
    displayName: id,
    kind: 'Abliterated',
    contextWindow: 128_000,
    contextDisplay: '128K',
    pricing: { input: 1_000_000, output: 2_000_000, display: { input: '1', output: '2' } },
    supportsTools: true,
    supportsVision: false,
    supportsReasoning: false,
    abliterated: true,
    defaultMaxOutputTokens: 4096,
    aliases,
    created: 1_700_000_000,
    upstreams: upstreams.map(upstream),
    source: 'test',
  };
}

function snapshot(generation: number, builtAt: number, models: CatalogModel[]): CatalogSnapshot {
  const byId = new Map<string, CatalogModel>();
  for (const m of models) {
    byId.set(m.id, m);
    for (const a of m.aliases) byId.set(a, m);
  }
  return { generation, builtAt, models, byId };
}

async function value(m: GatewayMetrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = m.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const data = await metric.get();
  const found = data.values.find(
    (v) =>
      (v as { metricName?: string }).metricName === undefined &&
      Object.entries(labels).every(([k, val]) => String((v.labels as Record<string, unknown>)[k]) === val) &&
      Object.keys(v.labels).length === Object.keys(labels).length,
  );
  return found?.value ?? 0;
}

/** A histogram's _count or _sum for exactly these labels. */
async function histo(
  m: GatewayMetrics,
  name: string,
  labels: Record<string, string>,
  part: 'count' | 'sum',
): Promise<number> {
  const data = await m.registry.getSingleMetric(name)!.get();
  const found = data.values.find(
    (v) =>
      (v as { metricName?: string }).metricName === `${name}_${part}` &&
      Object.entries(labels).every(([k, val]) => String((v.labels as Record<string, unknown>)[k]) === val),
  );
  return found?.value ?? 0;
}

const REQUIRED = [
  'tollgate_requests_total',
  'tollgate_request_duration_seconds',
  'tollgate_upstream_duration_seconds',
  'tollgate_upstream_time_to_first_token_seconds',
  'tollgate_upstream_errors_total',
  'tollgate_tokens_total',
  'tollgate_cost_micro_usd_total',
  'tollgate_reservations_total',
  'tollgate_holds_outstanding',
  'tollgate_held_micro_usd',
  'tollgate_reaper_returned_holds_total',
  'tollgate_reaper_returned_micro_usd_total',
  'tollgate_reaper_errors_total',
  'tollgate_active_streams',
  'tollgate_ledger_call_duration_seconds',
  'tollgate_ledger_errors_total',
  'tollgate_catalog_generation',
  'tollgate_catalog_snapshot_age_seconds',
  'tollgate_catalog_ready',
  'tollgate_process_cpu_seconds_total',
  'tollgate_nodejs_eventloop_lag_seconds',
];

describe('GatewayMetrics', () => {
  it('registers every required metric, all prefixed tollgate_, on its own registry', async () => {
    const a = new GatewayMetrics();
    const b = new GatewayMetrics(); // a second instance must not collide with the first
    const names = (await a.registry.getMetricsAsJSON()).map((m) => m.name);
    for (const required of REQUIRED) expect(names).toContain(required);
    for (const name of names) expect(name).toMatch(/^tollgate_/);
    expect(a.registry).not.toBe(b.registry);
  });

  it('never has a label naming a key or an account', async () => {
    const m = new GatewayMetrics();
    m.onCatalog(snapshot(1, Date.now(), [model('m1', ['u1'])]));
    m.requestFinished('/v1/chat/completions', 'openai', 'm1', 200, 5);
    m.tokens('m1', { input: 1, output: 1, cachedInput: 0, reasoning: 0 });
    for (const metric of await m.registry.getMetricsAsJSON()) {
      for (const v of metric.values) {
        for (const label of Object.keys(v.labels)) expect(label).not.toMatch(/key|account|user|tenant/i);
      }
    }
    const text = await m.render();
    expect(text).not.toMatch(/\b(key|key_id|account|account_id)="/);
  });

  it('counts requests and observes durations with exact deltas', async () => {
    const m = new GatewayMetrics();
    m.onCatalog(snapshot(3, Date.now(), [model('m1', ['u1'], ['m1-alias'])]));
    const labels = { route: '/v1/chat/completions', format: 'openai', model: 'm1', status: '200' };
    expect(await value(m, 'tollgate_requests_total', labels)).toBe(0);
    m.requestFinished('/v1/chat/completions', 'openai', 'm1', 200, 250);
    m.requestFinished('/v1/chat/completions', 'openai', 'm1-alias', 200, 750);
    m.requestFinished('/v1/messages', 'anthropic', 'm1', 402, 3);
    expect(await value(m, 'tollgate_requests_total', labels)).toBe(2);
    expect(
      await value(m, 'tollgate_requests_total', { route: '/v1/messages', format: 'anthropic', model: 'm1', status: '402' }),
    ).toBe(1);
    const h = { route: '/v1/chat/completions', format: 'openai', model: 'm1' };
    expect(await histo(m, 'tollgate_request_duration_seconds', h, 'count')).toBe(2);
    expect(await histo(m, 'tollgate_request_duration_seconds', h, 'sum')).toBeCloseTo(1.0, 9);
  });

  it('bounds labels: unknown models, unknown routes, odd statuses, unknown upstreams', async () => {
    const m = new GatewayMetrics();
    m.onCatalog(snapshot(1, Date.now(), [model('m1', ['u1'])]));
    for (let i = 0; i < 200; i++) {
      m.requestFinished(`/v1/random-${i}`, 'openai', `random-model-${i}`, 200 + (i % 50), 1);
      m.upstreamError(`random-model-${i}`, `up-${i}`, 'timeout');
      m.tokens(`random-model-${i}`, { input: 1, output: 0, cachedInput: 0, reasoning: 0 });
    }
    const requests = await m.registry.getSingleMetric('tollgate_requests_total')!.get();
    const models = new Set(requests.values.map((v) => v.labels.model));
    const routes = new Set(requests.values.map((v) => v.labels.route));
    expect([...models]).toEqual([UNKNOWN_MODEL]);
    expect([...routes]).toEqual(['other']);
    expect(requests.values.length).toBeLessThanOrEqual(3); // 200, 2xx ... exact + class labels only
    expect(await value(m, 'tollgate_upstream_errors_total', { model: 'unknown', upstream: 'unknown', class: 'timeout' })).toBe(200);
    expect(await value(m, 'tollgate_tokens_total', { model: 'unknown', kind: 'input' })).toBe(200);
    expect(statusLabel(200)).toBe('200');
    expect(statusLabel(418)).toBe('4xx');
    expect(statusLabel(599)).toBe('5xx');
    expect(statusLabel(42)).toBe('other');
  });

  it('records upstream duration, TTFT, errors, tokens, cost in exact micro-USD', async () => {
    const m = new GatewayMetrics();
    m.onCatalog(snapshot(1, Date.now(), [model('m1', ['u1', 'u2'])]));
    m.upstreamFinished('m1', 'u1', 2000, 150);
    m.upstreamFinished('m1', 'u1', 1000);
    m.timeToFirstToken('m1', 'u2', 50);
    const u1 = { model: 'm1', upstream: 'u1' };
    expect(await histo(m, 'tollgate_upstream_duration_seconds', u1, 'count')).toBe(2);
    expect(await histo(m, 'tollgate_upstream_duration_seconds', u1, 'sum')).toBeCloseTo(3, 9);
    expect(await histo(m, 'tollgate_upstream_time_to_first_token_seconds', u1, 'count')).toBe(1);
    expect(await histo(m, 'tollgate_upstream_time_to_first_token_seconds', { model: 'm1', upstream: 'u2' }, 'sum')).toBeCloseTo(0.05, 9);

    m.upstreamError('m1', 'u2', 'stream_cut');
    m.upstreamError('m1', 'u2', 'stream_cut');
    m.upstreamError('m1', 'u1', '5xx');
    expect(await value(m, 'tollgate_upstream_errors_total', { model: 'm1', upstream: 'u2', class: 'stream_cut' })).toBe(2);
    expect(await value(m, 'tollgate_upstream_errors_total', { model: 'm1', upstream: 'u1', class: '5xx' })).toBe(1);

    m.tokens('m1', { input: 1000, output: 200, cachedInput: 300, cacheWrite5m: 120, cacheWrite1h: 80, reasoning: 50 });
    m.tokens('m1', { input: 1, output: 2, cachedInput: 0, reasoning: 0 });
    expect(await value(m, 'tollgate_tokens_total', { model: 'm1', kind: 'cache_write_5m' })).toBe(120);
    expect(await value(m, 'tollgate_tokens_total', { model: 'm1', kind: 'cache_write_1h' })).toBe(80);
    expect(await value(m, 'tollgate_tokens_total', { model: 'm1', kind: 'input' })).toBe(1001);
    expect(await value(m, 'tollgate_tokens_total', { model: 'm1', kind: 'output' })).toBe(202);
    expect(await value(m, 'tollgate_tokens_total', { model: 'm1', kind: 'cached' })).toBe(300);
    expect(await value(m, 'tollgate_tokens_total', { model: 'm1', kind: 'reasoning' })).toBe(50);

    // Integer micros stay exact even near 2^53 (float64 holds every integer up to there).
    m.cost('m1', 2 ** 52);
    m.cost('m1', 1);
    m.cost('m1', -5); // ignored: a counter never goes down and a negative cost is a caller bug
    m.cost('m1', 0.5); // ignored: not integer micros
    expect(await value(m, 'tollgate_cost_micro_usd_total', { model: 'm1' })).toBe(2 ** 52 + 1);
    expect(await m.render()).toContain('tollgate_cost_micro_usd_total{model="m1"} 4503599627370497');
  });

  it('counts reservations by outcome and reason; holds, reaper, streams, ledger, catalog', async () => {
    let now = 1_000_000;
    const m = new GatewayMetrics({ now: () => now });
    m.reservation({ admitted: true });
    m.reservation({ admitted: true });
    m.reservation({ admitted: false, reason: 'key_monthly_cap_reached' });
    expect(await value(m, 'tollgate_reservations_total', { outcome: 'admitted', reason: 'none' })).toBe(2);
    expect(
      await value(m, 'tollgate_reservations_total', { outcome: 'refused', reason: 'key_monthly_cap_reached' }),
    ).toBe(1);

    m.setHolds(7, 12_345);
    expect(await value(m, 'tollgate_holds_outstanding')).toBe(7);
    expect(await value(m, 'tollgate_held_micro_usd')).toBe(12_345);
    m.holdsExpired(3, 999);
    expect(await value(m, 'tollgate_reaper_returned_holds_total')).toBe(3);
    expect(await value(m, 'tollgate_reaper_returned_micro_usd_total')).toBe(999);
    expect(await value(m, 'tollgate_reaper_errors_total')).toBe(0);
    m.reaperFailed();
    m.reaperFailed();
    expect(await value(m, 'tollgate_reaper_errors_total')).toBe(2);

    m.streamOpened();
    m.streamOpened();
    m.streamClosed();
    expect(await value(m, 'tollgate_active_streams')).toBe(1);

    m.ledgerCall('reserve', 0.4);
    m.ledgerCall('settle', 2, true);
    expect(await histo(m, 'tollgate_ledger_call_duration_seconds', { operation: 'reserve' }, 'count')).toBe(1);
    expect(await histo(m, 'tollgate_ledger_call_duration_seconds', { operation: 'reserve' }, 'sum')).toBeCloseTo(0.0004, 12);
    expect(await value(m, 'tollgate_ledger_errors_total', { operation: 'settle' })).toBe(1);
    expect(await value(m, 'tollgate_ledger_errors_total', { operation: 'reserve' })).toBe(0);

    expect(await value(m, 'tollgate_catalog_ready')).toBe(0);
    m.onCatalog(snapshot(9, now - 2_000, [model('a', ['x']), model('b', ['y'])]));
    now += 3_000;
    expect(await value(m, 'tollgate_catalog_ready')).toBe(1);
    expect(await value(m, 'tollgate_catalog_generation')).toBe(9);
    expect(await value(m, 'tollgate_catalog_models')).toBe(2);
    expect(await value(m, 'tollgate_catalog_snapshot_age_seconds')).toBe(5); // computed at scrape time
    m.catalogUpdateRejected();
    expect(await value(m, 'tollgate_catalog_rejected_total')).toBe(1);

    // The journal: records counted once, commits by the way they went in (a merge may add nothing).
    m.journalCommit(300, false);
    m.journalCommit(2, true);
    m.journalCommit(0, true);
    expect(await value(m, 'tollgate_journal_committed_records_total')).toBe(302);
    expect(await value(m, 'tollgate_journal_commits_total', { way: 'load' })).toBe(1);
    expect(await value(m, 'tollgate_journal_commits_total', { way: 'merge' })).toBe(2);
  });

  it('a model removed by a catalog swap is recorded as unknown afterwards', async () => {
    const m = new GatewayMetrics();
    m.onCatalog(snapshot(1, Date.now(), [model('old', ['u'])]));
    m.onCatalog(snapshot(2, Date.now(), [model('new', ['u'])]));
    m.tokens('old', { input: 5, output: 0, cachedInput: 0, reasoning: 0 });
    expect(m.modelLabel('old')).toBe(UNKNOWN_MODEL);
    expect(m.modelLabel('new')).toBe('new');
    expect(await value(m, 'tollgate_tokens_total', { model: 'unknown', kind: 'input' })).toBe(5);
  });

  it('serves GET /metrics on its own port with the Prometheus content type', async () => {
    const m = new GatewayMetrics();
    m.reservation({ admitted: true });
    const server = await m.startServer(0, '127.0.0.1');
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(m.contentType);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const body = await res.text();
      expect(body).toContain('tollgate_reservations_total{outcome="admitted",reason="none"} 1');
      expect((await fetch(`http://127.0.0.1:${server.port}/other`)).status).toBe(404);
      expect((await fetch(`http://127.0.0.1:${server.port}/metrics`, { method: 'POST' })).status).toBe(405);
    } finally {
      await server.close();
    }
  });
});

describe('GatewayMetrics.sample', () => {
  it('sums matching series, including histogram _count and _sum', async () => {
    const m = new GatewayMetrics({ defaultMetrics: false });
    m.onCatalog(snapshot(1, Date.now(), [model('m1', ['u1']), model('m2', ['u1'])]));
    m.requestFinished('/v1/chat/completions', 'openai', 'm1', 200, 100);
    m.requestFinished('/v1/messages', 'anthropic', 'm2', 200, 300);
    m.requestFinished('/v1/messages', 'anthropic', 'm2', 429, 1);
    expect(await m.sample('tollgate_requests_total')).toBe(3);
    expect(await m.sample('tollgate_requests_total', { status: '200' })).toBe(2);
    expect(await m.sample('tollgate_requests_total', { model: 'm2', status: '429' })).toBe(1);
    expect(await m.sample('tollgate_request_duration_seconds_count', { format: 'anthropic' })).toBe(2);
    expect(await m.sample('tollgate_request_duration_seconds_sum')).toBeCloseTo(0.401, 9);
    expect(await m.sample('tollgate_request_duration_seconds_bucket', { model: 'm1', le: '0.1' })).toBe(1);
    await expect(m.sample('tollgate_nope_total')).rejects.toThrow(/no metric/);
  });
});
