// Prometheus metrics of the gateway. One GatewayMetrics owns its own prom-client Registry (not the
// global one), so tests and several gateways in one process never share series.
//
// Hot path: every label value is bounded and every labelled child is looked up in a prebuilt table
// (rebuilt by onCatalog); the children are bound cells (bound-metrics.ts), so recording costs a
// couple of Map lookups and an addition — no label objects, hashing or strings built per call. Model ids that the catalog does not
// know are recorded as `unknown`, routes outside the configured list as `other`, statuses outside a
// fixed list as their class (`4xx`), so no client input can grow the number of series.
//
// Money: cost is exported as `tollgate_cost_micro_usd_total`, whose value is integer micro-USD.
// A Prometheus sample is a float64, which holds every integer up to 2^53 exactly (~9e9 USD), so
// adding integer micros to it is exact; converting to USD (÷ 1e6) happens only in PromQL, at display
// time, never on the gateway's money path.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { BoundCounter, BoundHistogram } from './bound-metrics.js';
import type { CatalogSnapshot, Micros } from '../catalog/snapshot.js';
import { CLIENT_FORMAT_NAMES, type ClientFormatName } from '../formats/index.js';
import type { RefusalReason, TokenUsage } from '../billing/ledger.js';
import { REFUSAL_REASONS, refusalMetricLabel } from '../limits/limits.js';

export const METRIC_PREFIX = 'tollgate_';
/** Label value for a model id the current catalog does not know (and before any catalog). */
export const UNKNOWN_MODEL = 'unknown';
/** Label value for an upstream name the model does not have. */
export const UNKNOWN_UPSTREAM = 'unknown';
/** Label value for a route outside the configured list. */
export const OTHER_ROUTE = 'other';

export const DEFAULT_ROUTES: readonly string[] = [
  '/v1/chat/completions',
  '/v1/messages',
  '/v1/messages/count_tokens',
  '/v1/models',
  '/v1/responses',
  '/v1/responses/:id',
  '/v1/responses/:id/input_items',
];

/** Seconds; ~1 ms to 10 min: a cached completion answers in ms, a long reasoning stream in minutes. */
export const LLM_LATENCY_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600,
];
/** Seconds; 50 µs to 1 s: a Redis round trip on a healthy cluster is well under a millisecond. */
export const LEDGER_LATENCY_BUCKETS: readonly number[] = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
];

export const UPSTREAM_ERROR_CLASSES = ['timeout', 'connect', '4xx', '5xx', 'stream_cut', 'malformed'] as const;
export type UpstreamErrorClass = (typeof UPSTREAM_ERROR_CLASSES)[number];

export const LEDGER_OPERATIONS = ['reserve', 'settle', 'lookup'] as const;
export type LedgerOperation = (typeof LEDGER_OPERATIONS)[number];

/** Statuses kept as exact codes; anything else becomes its class ("4xx"), bounding the label. */
const EXACT_STATUSES: readonly number[] = [
  200, 400, 401, 402, 403, 404, 405, 408, 409, 413, 415, 422, 429, 499, 500, 502, 503, 504, 529,
];

/** What a reservation attempt ended as; `ReservationOutcome` from the ledger fits. */
export type ReservationResult = { admitted: true } | { admitted: false; reason: RefusalReason };

export interface GatewayMetricsOptions {
  /** Route templates recorded by name; others are recorded as `other`. */
  routes?: readonly string[];
  /** Collect Node process metrics (CPU, memory, event loop lag, GC), prefixed `tollgate_`. Default true. */
  defaultMetrics?: boolean;
  /** Clock for the snapshot age; tests pass their own. */
  now?: () => number;
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

interface CounterChild {
  inc(value?: number): void;
}
interface HistogramChild {
  observe(value: number): void;
}

/** Children of one (route, format, model). */
interface RequestEntry {
  duration: HistogramChild;
  byStatus: Map<number, CounterChild>;
  route: string;
  format: ClientFormatName;
  model: string;
}

interface UpstreamEntry {
  duration: HistogramChild;
  ttft: HistogramChild;
  errors: Record<UpstreamErrorClass, CounterChild>;
}

/** Children of one model. */
interface ModelEntry {
  label: string;
  tokensInput: CounterChild;
  tokensOutput: CounterChild;
  tokensCached: CounterChild;
  tokensCacheWrite5m: CounterChild;
  tokensCacheWrite1h: CounterChild;
  tokensReasoning: CounterChild;
  cost: CounterChild;
  upstreams: Map<string, UpstreamEntry>;
  unknownUpstream: UpstreamEntry | undefined;
  /** route -> client format -> its entry */
  requests: Map<string, Record<ClientFormatName, RequestEntry>>;
}

function statusLabel(status: number): string {
  if (EXACT_STATUSES.includes(status)) return String(status);
  const cls = Math.floor(status / 100);
  return cls >= 1 && cls <= 5 ? `${cls}xx` : 'other';
}

export class GatewayMetrics {
  readonly registry = new Registry();

  private readonly routes: ReadonlySet<string>;
  private readonly routeList: readonly string[];
  private readonly now: () => number;

  // Each metric is defined where its field is declared: initializers run in order, after `registry`.
  private readonly requestsTotal: BoundCounter = new BoundCounter(
    `${METRIC_PREFIX}requests_total`,
    'Client requests finished, by route, wire format, catalog model and HTTP status.',
    ['route', 'format', 'model', 'status'],
    this.registry,
  );
  private readonly requestDuration: BoundHistogram = new BoundHistogram(
    `${METRIC_PREFIX}request_duration_seconds`,
    'Time from request arrival to the last byte sent to the client.',
    ['route', 'format', 'model'],
    LLM_LATENCY_BUCKETS,
    this.registry,
  );
  private readonly upstreamDuration: BoundHistogram = new BoundHistogram(
    `${METRIC_PREFIX}upstream_duration_seconds`,
    'Duration of one upstream call, from sending the request to the end of its body.',
    ['model', 'upstream'],
    LLM_LATENCY_BUCKETS,
    this.registry,
  );
  private readonly upstreamTtft: BoundHistogram = new BoundHistogram(
    `${METRIC_PREFIX}upstream_time_to_first_token_seconds`,
    'Time from sending the upstream request to its first content token.',
    ['model', 'upstream'],
    LLM_LATENCY_BUCKETS,
    this.registry,
  );
  private readonly upstreamErrors: BoundCounter = new BoundCounter(
    `${METRIC_PREFIX}upstream_errors_total`,
    'Failed upstream calls by class: timeout, connect, 4xx, 5xx, stream_cut, malformed.',
    ['model', 'upstream', 'class'],
    this.registry,
  );
  private readonly tokensTotal: BoundCounter = new BoundCounter(
    `${METRIC_PREFIX}tokens_total`,
    'Tokens metered, by model and kind (input, output, cached, cache_write_5m, cache_write_1h, reasoning; the cache kinds ⊂ input, reasoning ⊂ output).',
    ['model', 'kind'],
    this.registry,
  );
  private readonly costTotal: BoundCounter = new BoundCounter(
    `${METRIC_PREFIX}cost_micro_usd_total`,
    'Cost charged, in integer micro-USD (divide by 1e6 for USD).',
    ['model'],
    this.registry,
  );
  private readonly reservationsTotal: BoundCounter = new BoundCounter(
    `${METRIC_PREFIX}reservations_total`,
    'Reservation attempts by outcome (admitted, refused) and refusal reason (none when admitted).',
    ['outcome', 'reason'],
    this.registry,
  );
  private readonly holdsOutstanding: Gauge = new Gauge({
    name: `${METRIC_PREFIX}holds_outstanding`,
    help: 'Holds reserved and not yet settled or returned (ledger-wide, as last sampled).',
    registers: [this.registry],
  });
  private readonly heldMicros: Gauge = new Gauge({
    name: `${METRIC_PREFIX}held_micro_usd`,
    help: 'Micro-USD held by outstanding holds (ledger-wide, as last sampled).',
    registers: [this.registry],
  });
  private readonly reaperHolds: Counter = new Counter({
    name: `${METRIC_PREFIX}reaper_returned_holds_total`,
    help: 'Expired holds returned by the reaper: requests whose pod never settled them.',
    registers: [this.registry],
  });
  private readonly reaperMicros: Counter = new Counter({
    name: `${METRIC_PREFIX}reaper_returned_micro_usd_total`,
    help: 'Micro-USD released by the reaper from expired holds.',
    registers: [this.registry],
  });
  private readonly reaperErrors: Counter = new Counter({
    name: `${METRIC_PREFIX}reaper_errors_total`,
    help: 'Reaper passes that failed (the ledger unreachable or erroring); expired holds wait for the next pass.',
    registers: [this.registry],
  });
  private readonly activeStreams: Gauge = new Gauge({
    name: `${METRIC_PREFIX}active_streams`,
    help: 'Streaming responses currently open to clients.',
    registers: [this.registry],
  });
  private readonly settlementsPending: Gauge = new Gauge({
    name: `${METRIC_PREFIX}settlements_pending`,
    help: 'Settlements that failed (the ledger unreachable) and are kept for retry; each is retried until it succeeds.',
    registers: [this.registry],
  });
  private readonly settlementsAbandoned: Counter = new Counter({
    name: `${METRIC_PREFIX}settlements_abandoned_total`,
    help: 'Settlements still failing when the gateway stopped: logged whole (settlement_abandoned) to apply by hand. Any is an incident.',
    registers: [this.registry],
  });
  private readonly ledgerUp: Gauge = new Gauge({
    name: `${METRIC_PREFIX}ledger_up`,
    help: '1 while the billing ledger answers, 0 while it is down, paused or timing out (requests get 503 ledger_unavailable, /readyz is false).',
    registers: [this.registry],
  });
  private readonly journalPending: Gauge = new Gauge({
    name: `${METRIC_PREFIX}journal_pending_entries`,
    help: 'Settlements this gateway applied (or swept from a dead one) that PostgreSQL has not committed yet.',
    registers: [this.registry],
  });
  private readonly journalLag: Gauge = new Gauge({
    name: `${METRIC_PREFIX}journal_lag_seconds`,
    help: 'Age of the oldest settlement PostgreSQL has not committed yet (0 when none); past the bound, requests get 503.',
    registers: [this.registry],
  });
  private readonly journalCommitted: Counter = new Counter({
    name: `${METRIC_PREFIX}journal_committed_records_total`,
    help: 'Usage records the journal committed to PostgreSQL (repeats of committed ones not counted).',
    registers: [this.registry],
  });
  private readonly journalCommitsByWay: Counter<'way'> = new Counter({
    name: `${METRIC_PREFIX}journal_commits_total`,
    help: 'Journal transactions, by way in: load (COPY of a batch of new requests) or merge (a batch that repeated a committed request).',
    labelNames: ['way'],
    registers: [this.registry],
  });
  private readonly journalErrors: Counter<'stage'> = new Counter({
    name: `${METRIC_PREFIX}journal_errors_total`,
    help: 'Journal steps that failed, by stage (commit, sweep, trim); the entries are kept and retried.',
    labelNames: ['stage'],
    registers: [this.registry],
  });
  private readonly reconcileDifference: Gauge = new Gauge({
    name: `${METRIC_PREFIX}reconcile_difference_micro_usd`,
    help: 'Sum of the absolute differences the last reconciliation found between PostgreSQL, Redis and the usage records.',
    registers: [this.registry],
  });
  private readonly reconcileAccounts: Gauge = new Gauge({
    name: `${METRIC_PREFIX}reconcile_accounts_differing`,
    help: 'Accounts whose books disagreed in the last reconciliation.',
    registers: [this.registry],
  });
  /** Reads the audit log's entry count (its head's seq) at scrape time; none without the record. */
  private auditEntries: (() => Promise<number>) | undefined;
  private readonly ledgerDuration: BoundHistogram = new BoundHistogram(
    `${METRIC_PREFIX}ledger_call_duration_seconds`,
    'Duration of ledger (Redis) calls by operation.',
    ['operation'],
    LEDGER_LATENCY_BUCKETS,
    this.registry,
  );
  private readonly ledgerErrors: BoundCounter = new BoundCounter(
    `${METRIC_PREFIX}ledger_errors_total`,
    'Ledger (Redis) calls that failed, by operation.',
    ['operation'],
    this.registry,
  );
  private readonly catalogGeneration: Gauge = new Gauge({
    name: `${METRIC_PREFIX}catalog_generation`,
    help: 'Generation of the catalog snapshot in use.',
    registers: [this.registry],
  });
  private readonly catalogModels: Gauge = new Gauge({
    name: `${METRIC_PREFIX}catalog_models`,
    help: 'Models in the catalog snapshot in use.',
    registers: [this.registry],
  });
  private readonly catalogReady: Gauge = new Gauge({
    name: `${METRIC_PREFIX}catalog_ready`,
    help: '1 when the gateway serves a validated catalog snapshot, else 0.',
    registers: [this.registry],
  });
  private readonly catalogRejected: Counter = new Counter({
    name: `${METRIC_PREFIX}catalog_rejected_total`,
    help: 'Catalog updates refused by validation (the previous snapshot stays in use).',
    registers: [this.registry],
  });

  private readonly reservationChildren: Map<string, CounterChild>;
  private readonly admittedChild: CounterChild;
  private readonly ledgerChildren: Record<LedgerOperation, { duration: HistogramChild; errors: CounterChild }>;

  private models = new Map<string, ModelEntry>();
  private unknownModel: ModelEntry;
  private snapshotBuiltAt: number | undefined;

  constructor(options: GatewayMetricsOptions = {}) {
    this.now = options.now ?? Date.now;
    this.routeList = [...(options.routes ?? DEFAULT_ROUTES), OTHER_ROUTE];
    this.routes = new Set(this.routeList);
    const registers = [this.registry];
    const p = METRIC_PREFIX;

    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: p });

    this.ledgerUp.set(1);
    // The age is computed at scrape time, so it grows between swaps without any timer.
    const snapshotAge = (): number | undefined =>
      this.snapshotBuiltAt === undefined ? undefined : (this.now() - this.snapshotBuiltAt) / 1000;
    new Gauge({
      name: `${p}catalog_snapshot_age_seconds`,
      help: 'Seconds since the catalog snapshot in use was built.',
      registers,
      collect() {
        const age = snapshotAge();
        if (age !== undefined) this.set(age);
      },
    });

    // Read at scrape time (one row), so the count exported is the log's own: an operator's monitoring that
    // keeps it can tell a log rewritten to fewer entries. No labels: one series per deployment.
    const auditCount = (): (() => Promise<number>) | undefined => this.auditEntries;
    new Gauge({
      name: `${p}audit_log_entries`,
      help: 'Entries written to the audit log since it began (its head: pruned entries count).',
      registers,
      async collect() {
        const read = auditCount();
        if (read === undefined) return;
        try {
          this.set(await read());
        } catch {
          // The record unreachable: the last value stays (the scrape still answers).
        }
      },
    });

    this.catalogReady.set(0);
    this.activeStreams.set(0);
    this.holdsOutstanding.set(0);
    this.heldMicros.set(0);

    this.admittedChild = this.reservationsTotal.bind('admitted', 'none');
    // One child per declared refusal (src/limits/limits.ts), labelled as the declaration says.
    this.reservationChildren = new Map(REFUSAL_REASONS.map((r) => [r, this.reservationsTotal.bind('refused', refusalMetricLabel(r))]));
    this.reservationChildren.set('other', this.reservationsTotal.bind('refused', 'other'));
    const ledger = {} as Record<LedgerOperation, { duration: HistogramChild; errors: CounterChild }>;
    for (const op of LEDGER_OPERATIONS) {
      ledger[op] = { duration: this.ledgerDuration.bind(op), errors: this.ledgerErrors.bind(op) };
    }
    this.ledgerChildren = ledger;
    this.unknownModel = this.buildModel(UNKNOWN_MODEL, []);
  }

  /** Swap in a new catalog snapshot: rebuilds the label tables. Call from CatalogSource.onSwap. */
  onCatalog(snapshot: CatalogSnapshot): void {
    const models = new Map<string, ModelEntry>();
    for (const model of snapshot.models) {
      const entry = this.buildModel(
        model.id,
        model.upstreams.map((u) => u.name),
      );
      models.set(model.id, entry);
    }
    // Aliases map to their model's entry, so a client's alias is recorded under the canonical id.
    for (const [id, model] of snapshot.byId) {
      const entry = models.get(model.id);
      if (entry && !models.has(id)) models.set(id, entry);
    }
    this.models = models;
    this.snapshotBuiltAt = snapshot.builtAt;
    this.catalogGeneration.set(snapshot.generation);
    this.catalogModels.set(snapshot.models.length);
    this.catalogReady.set(1);
  }

  /** A catalog update failed validation; the previous snapshot keeps serving. */
  catalogUpdateRejected(): void {
    this.catalogRejected.inc();
  }

  /** The label a model id is recorded under: the canonical catalog id, or `unknown`. */
  modelLabel(modelId: string | undefined): string {
    return (modelId === undefined ? undefined : this.models.get(modelId))?.label ?? UNKNOWN_MODEL;
  }

  /** One client request finished (any status, including refusals and errors). */
  requestFinished(route: string, format: ClientFormatName, modelId: string | undefined, status: number, durationMs: number): void {
    const model = this.model(modelId);
    const r = this.routes.has(route) ? route : OTHER_ROUTE;
    const entry = model.requests.get(r)?.[format];
    if (entry === undefined) return; // unreachable: every known route has an entry per format
    let child = entry.byStatus.get(status);
    if (child === undefined) {
      child = this.requestsTotal.bind(entry.route, entry.format, entry.model, statusLabel(status));
      // Statuses are few in practice; the cap keeps a misbehaving caller from growing the map.
      if (entry.byStatus.size < 64) entry.byStatus.set(status, child);
    }
    child.inc();
    entry.duration.observe(durationMs / 1000);
  }

  /** One upstream call finished; `ttftMs` when a first content token arrived. */
  upstreamFinished(modelId: string | undefined, upstream: string, durationMs: number, ttftMs?: number): void {
    const u = this.upstream(modelId, upstream);
    u.duration.observe(durationMs / 1000);
    if (ttftMs !== undefined) u.ttft.observe(ttftMs / 1000);
  }

  /** Time to first token alone (e.g. observed the moment it arrives, before the call ends). */
  timeToFirstToken(modelId: string | undefined, upstream: string, ttftMs: number): void {
    this.upstream(modelId, upstream).ttft.observe(ttftMs / 1000);
  }

  upstreamError(modelId: string | undefined, upstream: string, errorClass: UpstreamErrorClass): void {
    const child = this.upstream(modelId, upstream).errors[errorClass];
    // An unexpected class (a caller bug) must not throw on the hot path; it is dropped.
    if (child !== undefined) child.inc();
  }

  /** Tokens metered for one request. */
  tokens(modelId: string | undefined, usage: TokenUsage): void {
    const m = this.model(modelId);
    if (usage.input > 0) m.tokensInput.inc(usage.input);
    if (usage.output > 0) m.tokensOutput.inc(usage.output);
    if (usage.cachedInput > 0) m.tokensCached.inc(usage.cachedInput);
    const write5m = usage.cacheWrite5m ?? 0;
    const write1h = usage.cacheWrite1h ?? 0;
    if (write5m > 0) m.tokensCacheWrite5m.inc(write5m);
    if (write1h > 0) m.tokensCacheWrite1h.inc(write1h);
    if (usage.reasoning > 0) m.tokensReasoning.inc(usage.reasoning);
  }

  /** Cost charged for one request, integer micro-USD (added exactly; see the file comment). */
  cost(modelId: string | undefined, micros: Micros): void {
    if (micros > 0 && Number.isSafeInteger(micros)) this.model(modelId).cost.inc(micros);
  }

  reservation(result: ReservationResult): void {
    if (result.admitted) this.admittedChild.inc();
    else (this.reservationChildren.get(result.reason) ?? this.reservationChildren.get('other'))?.inc();
  }

  /** Ledger-wide holds, as sampled (e.g. by the reaper's scan). */
  setHolds(count: number, heldMicros: Micros): void {
    this.holdsOutstanding.set(count);
    this.heldMicros.set(heldMicros);
  }

  /** The reaper returned `count` expired holds worth `micros`. */
  holdsExpired(count: number, micros: Micros = 0): void {
    if (count > 0) this.reaperHolds.inc(count);
    if (micros > 0 && Number.isSafeInteger(micros)) this.reaperMicros.inc(micros);
  }

  /** A reaper pass failed. */
  reaperFailed(): void {
    this.reaperErrors.inc();
  }

  setSettlementsPending(count: number): void {
    this.settlementsPending.set(count);
  }

  settlementAbandoned(): void {
    this.settlementsAbandoned.inc();
  }

  setLedgerUp(up: boolean): void {
    this.ledgerUp.set(up ? 1 : 0);
  }

  /** The journal's backlog as last sampled. */
  setJournalLag(pending: number, oldestMs: number): void {
    this.journalPending.set(pending);
    this.journalLag.set(oldestMs / 1000);
  }

  journalCommit(records: number, merged: boolean): void {
    if (records > 0) this.journalCommitted.inc(records);
    this.journalCommitsByWay.inc({ way: merged ? 'merge' : 'load' });
  }

  journalFailed(stage: 'commit' | 'sweep' | 'trim'): void {
    this.journalErrors.inc({ stage });
  }

  /** Where the audit log's entry count is read at each scrape (the record's chain head). */
  watchAuditLog(read: () => Promise<number>): void {
    this.auditEntries = read;
  }

  /** The last reconciliation's result. */
  setReconciliation(differenceMicros: Micros, accountsDiffering: number): void {
    this.reconcileDifference.set(differenceMicros);
    this.reconcileAccounts.set(accountsDiffering);
  }

  streamOpened(): void {
    this.activeStreams.inc();
  }

  streamClosed(): void {
    this.activeStreams.dec();
  }

  /** One ledger call; `failed` when it threw (the duration is recorded either way). */
  ledgerCall(operation: LedgerOperation, durationMs: number, failed = false): void {
    const c = this.ledgerChildren[operation];
    c.duration.observe(durationMs / 1000);
    if (failed) c.errors.inc();
  }

  /** The exposition text (what GET /metrics serves). */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /**
   * Sum of the current values of the series `name` whose labels include `labels` (for tests and
   * diagnostics, not the hot path). `name` may be a histogram's `_count`, `_sum` or `_bucket` series.
   */
  async sample(name: string, labels: Readonly<Record<string, string>> = {}): Promise<number> {
    const base = name.replace(/_(count|sum|bucket)$/, '');
    const metric = this.registry.getSingleMetric(name) ?? this.registry.getSingleMetric(base);
    if (metric === undefined) throw new Error(`no metric named ${name}`);
    const data = await metric.get();
    const wanted = Object.entries(labels);
    let total = 0;
    for (const v of data.values) {
      const series = (v as { metricName?: string }).metricName ?? data.name;
      if (series !== name) continue;
      const l = v.labels as Record<string, string | number | undefined>;
      if (wanted.every(([k, val]) => String(l[k]) === val)) total += v.value;
    }
    return total;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Serve GET /metrics on its own port (0 = any free port); `host` defaults to all interfaces. */
  startServer(port: number, host?: string): Promise<MetricsServer> {
    const server = createServer((req, res) => {
      const path = req.url?.split('?', 1)[0];
      if (path !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
        return;
      }
      this.registry.metrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': this.registry.contentType });
          res.end(req.method === 'HEAD' ? undefined : body);
        },
        (err: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(`metrics collection failed: ${err instanceof Error ? err.message : 'error'}\n`);
        },
      );
    });
    // Scrapers keep connections alive; close() must not wait for them.
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve({
          port: (server.address() as AddressInfo).port,
          close: () =>
            new Promise<void>((done, fail) => {
              server.close((err) => (err ? fail(err) : done()));
              server.closeAllConnections();
            }),
        });
      });
    });
  }

  private model(modelId: string | undefined): ModelEntry {
    return (modelId === undefined ? undefined : this.models.get(modelId)) ?? this.unknownModel;
  }

  private upstream(modelId: string | undefined, upstream: string): UpstreamEntry {
    const m = this.model(modelId);
    const u = m.upstreams.get(upstream) ?? m.unknownUpstream;
    if (u !== undefined) return u;
    m.unknownUpstream = this.buildUpstream(m.label, UNKNOWN_UPSTREAM);
    return m.unknownUpstream;
  }

  private buildModel(label: string, upstreams: readonly string[]): ModelEntry {
    const requests = new Map<string, Record<ClientFormatName, RequestEntry>>();
    for (const route of this.routeList) {
      const entry = (format: ClientFormatName): RequestEntry => ({
        duration: this.requestDuration.bind(route, format, label),
        byStatus: new Map(),
        route,
        format,
        model: label,
      });
      requests.set(route, Object.fromEntries(CLIENT_FORMAT_NAMES.map((format) => [format, entry(format)])) as Record<ClientFormatName, RequestEntry>);
    }
    return {
      label,
      tokensInput: this.tokensTotal.bind(label, 'input'),
      tokensOutput: this.tokensTotal.bind(label, 'output'),
      tokensCached: this.tokensTotal.bind(label, 'cached'),
      tokensCacheWrite5m: this.tokensTotal.bind(label, 'cache_write_5m'),
      tokensCacheWrite1h: this.tokensTotal.bind(label, 'cache_write_1h'),
      tokensReasoning: this.tokensTotal.bind(label, 'reasoning'),
      cost: this.costTotal.bind(label),
      upstreams: new Map(upstreams.map((u) => [u, this.buildUpstream(label, u)])),
      unknownUpstream: undefined,
      requests,
    };
  }

  private buildUpstream(model: string, upstream: string): UpstreamEntry {
    const errors = {} as Record<UpstreamErrorClass, CounterChild>;
    for (const cls of UPSTREAM_ERROR_CLASSES) errors[cls] = this.upstreamErrors.bind(model, upstream, cls);
    return {
      duration: this.upstreamDuration.bind(model, upstream),
      ttft: this.upstreamTtft.bind(model, upstream),
      errors,
    };
  }
}

export { statusLabel };
