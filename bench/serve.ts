// One benchmark target in its own process (forked with IPC), so the load generator does not share
// its event loop and its memory can be measured alone. BENCH_SERVE_SPEC is a JSON ServeSpec; the process
// answers {type:'ready', url, key?} once listening, {type:'memory', ...} on request, and exits on 'stop'.
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { ExportResult } from '@opentelemetry/core';
import { Redis } from 'ioredis';
import { existsSync, readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { constants as perfConstants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { parse } from 'yaml';
import { createRedisBackend, DEFAULT_KEY_MARKER } from '../src/billing/backends.js';
import { recordedBackend } from '../src/record/recorded-backend.js';
import { redisKeys } from '../src/billing/redis-keys.js';
import { RedisJournalStream } from '../src/record/redis-journal-stream.js';
import { buildSnapshot } from '../src/catalog/build-snapshot.js';
import type { CatalogSnapshot, CatalogSource } from '../src/catalog/snapshot.js';
import type { ModelCatalogSpec, ModelSpec } from '../src/catalog/types.js';
import { readConfig } from '../src/config.js';
import { startGateway } from '../src/gateway.js';
import { openPostgres } from '../src/record/database.js';
import { JOURNAL_WRITER_PERIOD_MS, JournalWriter } from '../src/record/journal-writer.js';
import { JournaledLedger } from '../src/record/journaled-ledger.js';
import { DelegatingLedger } from '../src/billing/delegating-ledger.js';
import type { Ledger, ReservationOutcome, ReservationRequest, SettlementOutcome, SettlementRequest } from '../src/billing/ledger.js';
import type { Simulator } from '../src/simulator/server.js';
import { GatewayMetrics } from '../src/telemetry/metrics.js';
import { DISABLED_TRACING, initTracing, type Tracing } from '../src/telemetry/tracing.js';
import { startFloorProxy } from './floor-proxy.js';
import { BENCH_MODELS, memoryModel } from './models.js';

export type TracingMode = 'off' | 'sampled-0' | 'sampled-100';

export type ServeSpec =
  /** `listeners` > 1 starts that many simulators (one port each) in the process; `urls` lists them. */
  | { role: 'simulator'; firstTokenDelayMs?: number; tokenDelayMs?: number; replyTokens?: number; listeners?: number }
  | { role: 'floor'; upstream: string }
  /**
   * `spread` adds one OpenAI-format model per origin (`memoryModel(i)`), for the memory benchmark;
   * `keyCacheTtlMs` overrides the key cache's 1 s default.
   */
  | {
      role: 'gateway';
      redisUrl: string;
      upstream: string;
      namespace: string;
      tracing: TracingMode;
      spread?: string[];
      keyCacheTtlMs?: number;
      /** Journal every settlement to this PostgreSQL (the production set-up); without it, none. */
      databaseUrl?: string;
      /**
       * With databaseUrl: the journal can be turned off and on between rounds ('journal-off' and
       * 'journal-on' messages, answered by {type:'journal'}), so both modes are measured in one process.
       */
      journalSwitch?: boolean;
    };

export type ServeMessage =
  | { type: 'ready'; url: string; urls: string[]; key?: string }
  | { type: 'memory'; rss: number; heapUsed: number; heapTotal: number; external: number; arrayBuffers: number }
  | { type: 'journal'; on: boolean; gcMs: { minor: number; major: number }; atUs: number }
  /** Answers 'profile-stop': the V8 CPU profile taken since 'profile-start' (bench/journal.ts --profile). */
  | { type: 'profile'; profile: object };

function benchCatalog(upstream: string, spread: string[]): ModelCatalogSpec {
  // From bench/ in the sources, or .bench-build/bench/ in the build (bench/build.ts).
  const here = new URL('../examples/catalog.yaml', import.meta.url);
  const file = existsSync(here) ? here : new URL('../../examples/catalog.yaml', import.meta.url);
  const example = (parse(readFileSync(file, 'utf8')) as { spec: ModelCatalogSpec }).spec
    .models[0] as ModelSpec;
  const model = (id: string, format: 'openai' | 'anthropic'): ModelSpec => ({
    ...example,
    id,
    displayName: id,
    upstreams: [{ name: 'sim', format, baseUrl: format === 'openai' ? `${upstream}/v1` : upstream, model: `sim-${id}` }],
  });
  const spreadModels = spread.map((origin, i): ModelSpec => ({
    ...model(memoryModel(i), 'openai'),
    upstreams: [{ name: `sim${i}`, format: 'openai', baseUrl: `${origin}/v1`, model: `sim-${memoryModel(i)}` }],
  }));
  return { models: [model(BENCH_MODELS.openai, 'openai'), model(BENCH_MODELS.anthropic, 'anthropic'), ...spreadModels] };
}

/** The SDK is loaded only when tracing is on, as the gateway does: a baseline without tracing holds none of it. */
async function tracingFor(mode: TracingMode): Promise<Tracing> {
  if (mode === 'off') return DISABLED_TRACING;
  const { AlwaysOnSampler, BatchSpanProcessor, TraceIdRatioBasedSampler } = await import('@opentelemetry/sdk-trace-base');
  const { ExportResultCode } = await import('@opentelemetry/core');
  /** An exporter that drops spans: the cost measured is the SDK's, not a collector's. */
  const discard: SpanExporter = {
    export: (_spans: ReadableSpan[], done: (result: ExportResult) => void) => done({ code: ExportResultCode.SUCCESS }),
    shutdown: async () => undefined,
  };
  return initTracing({
    env: {},
    spanProcessors: [new BatchSpanProcessor(discard)],
    sampler: mode === 'sampled-0' ? new TraceIdRatioBasedSampler(0) : new AlwaysOnSampler(),
  });
}

interface Running {
  url: string;
  urls: string[];
  key?: string;
  close(): Promise<void>;
  /** A gateway started with journalSwitch: turns the journal off (after committing what it holds) or on. */
  switchJournal?: (on: boolean) => Promise<void>;
}

/** Longer than any run: a switched writer's own timers never fire (setTimeout's largest delay). */
const NEVER_MS = 2 ** 31 - 1;

/**
 * The journal on or off in one gateway process: fresh processes of the same code differ by up to 15% in
 * CPU per request (placement, JIT, heap sizing), more than the journal's cost, so the bench compares the
 * modes within one process, in slices of one continuous load (bench/journal-slices.ts). Off, requests
 * go to a Redis ledger that journals nothing. The writer commits and trims on this class's clock, at
 * the production period, and only while the journal is on: what an "on" slice settled is committed in
 * an "on" slice, never in the "off" one after it.
 */
class SwitchedJournal extends DelegatingLedger {
  private readonly journaled: JournaledLedger;
  private on = false;
  private clock: NodeJS.Timeout | undefined;
  /** Requests in flight by the mode that reserved them: each is settled by the ledger that reserved it. */
  private readonly reservedIn = { on: new Set<string>(), off: new Set<string>() };

  constructor(
    journalingHot: Ledger,
    private readonly plainHot: Ledger,
    private readonly writer: JournalWriter,
  ) {
    super(journalingHot);
    this.journaled = new JournaledLedger(journalingHot, writer);
  }

  turn(on: boolean): Promise<void> {
    this.on = on;
    if (on) {
      this.clock ??= setInterval(() => {
        void this.writer.flush();
        void this.writer.trim();
      }, JOURNAL_WRITER_PERIOD_MS);
    } else if (this.clock !== undefined) {
      clearInterval(this.clock);
      this.clock = undefined;
    }
    return Promise.resolve();
  }

  // The same steps either way (a set entry, an await), so the switch itself costs both modes alike.
  override async reserve(req: ReservationRequest): Promise<ReservationOutcome> {
    const reserved = this.on ? this.reservedIn.on : this.reservedIn.off;
    reserved.add(req.requestId);
    const outcome = await (this.on ? this.journaled : this.plainHot).reserve(req);
    if (!outcome.admitted) reserved.delete(req.requestId);
    return outcome;
  }

  override settle(req: SettlementRequest): Promise<SettlementOutcome> {
    if (this.reservedIn.on.delete(req.requestId)) return this.journaled.settle(req);
    this.reservedIn.off.delete(req.requestId);
    return this.plainHot.settle(req);
  }

  override async close(): Promise<void> {
    await this.turn(false);
    await super.close();
  }
}

async function serve(spec: ServeSpec): Promise<Running> {
  if (spec.role === 'simulator') {
    // Loaded only in the simulator's process, so the gateway's measured memory holds no simulator code.
    const { startSimulator } = await import('../src/simulator/server.js');
    const sims: Simulator[] = [];
    for (let i = 0; i < (spec.listeners ?? 1); i++) {
      sims.push(
        await startSimulator({
          log: false,
          firstTokenDelayMs: spec.firstTokenDelayMs ?? 0,
          tokenDelayMs: spec.tokenDelayMs ?? 0,
          ...(spec.replyTokens === undefined ? {} : { replyTokens: spec.replyTokens }),
        }),
      );
    }
    return {
      url: (sims[0] as Simulator).url,
      urls: sims.map((s) => s.url),
      close: async () => {
        await Promise.all(sims.map((s) => s.close()));
      },
    };
  }
  if (spec.role === 'floor') {
    const floor = await startFloorProxy(spec.upstream);
    return { ...floor, urls: [floor.url] };
  }
  const redis = new Redis(spec.redisUrl, { enableAutoPipelining: true });
  const hot = createRedisBackend({ redis, namespace: spec.namespace });
  const db = spec.databaseUrl === undefined ? undefined : await openPostgres(spec.databaseUrl, { max: 4 });
  // With a database, the production composition: accounts, keys and credits commit to PostgreSQL first,
  // and the Redis ledger loads each account's money from it (seeded, with a generation).
  const backend = db === undefined ? hot : recordedBackend(hot, db, DEFAULT_KEY_MARKER);
  const account = await backend.accounts.createAccount('bench');
  // A balance no run can exhaust (1,000,000 USD), in integer micro-USD.
  await backend.ledger.credit(account.id, 1_000_000_000_000, `bench-${spec.namespace}`);
  const { secret } = await backend.accounts.createKey(account.id, { name: 'bench' });
  const snapshot: CatalogSnapshot = buildSnapshot([{ source: 'bench', spec: benchCatalog(spec.upstream, spec.spread ?? []) }], 1);
  const catalog: CatalogSource = { current: () => snapshot, onSwap: () => () => undefined, close: async () => undefined };
  const tracing = await tracingFor(spec.tracing);
  const stream = new RedisJournalStream(redis, redisKeys(spec.namespace));
  // A switched writer commits and trims on SwitchedJournal's clock instead of its own timers.
  const clock = spec.journalSwitch === true ? { intervalMs: NEVER_MS, trimIntervalMs: NEVER_MS } : {};
  const journal = db === undefined ? undefined : new JournalWriter({ db, stream, maxLagMs: 120_000, ...clock });
  // The switch: the gateway's own composition (a JournaledLedger over a journaling Redis ledger) beside a
  // second Redis ledger on the same keys that journals nothing, and each request goes through the one
  // the bench has chosen.
  const switched = journal === undefined || spec.journalSwitch !== true ? undefined : new SwitchedJournal(backend.ledger, createRedisBackend({ redis, namespace: spec.namespace }).ledger, journal);
  const gateway = await startGateway({
    // The reaper is slowed so Redis command counts are the requests' own.
    config: {
      ...readConfig({}),
      port: 0,
      metricsPort: 0,
      reaperIntervalMs: 600_000,
      ...(spec.keyCacheTtlMs === undefined ? {} : { keyCacheTtlMs: spec.keyCacheTtlMs }),
    },
    catalog,
    backend: switched === undefined ? backend : { ...backend, ledger: switched },
    secrets: { resolve: () => undefined },
    metrics: new GatewayMetrics(),
    tracing,
    ...(journal === undefined || switched !== undefined ? {} : { journal }),
  });
  return {
    url: gateway.url,
    urls: [gateway.url],
    key: secret,
    ...(switched === undefined ? {} : { switchJournal: (on: boolean) => switched.turn(on) }),
    async close() {
      await gateway.close();
      // The gateway closes a journal it was given; a switched one is the bench's own.
      if (switched !== undefined) await journal?.close();
      await db?.close();
      await tracing.shutdown();
      await backend.ledger.close();
      await redis.quit();
    },
  };
}

let inspector: Promise<Session> | undefined;
/** The process's own V8 profiler, connected on first use (a target that is never profiled loads none of it). */
function profiler(): Promise<Session> {
  inspector ??= (async () => {
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    return session;
  })();
  return inspector;
}

const send = (m: ServeMessage): void => {
  process.send?.(m);
};

/**
 * Milliseconds of garbage collection since the first call: scavenges, and the rest (mark-compact and its
 * increments). Observed only in a gateway whose journal the bench switches, from its first switch (the
 * warm-up), so no other target pays for the observer.
 */
let gcMs: { minor: number; major: number } | undefined;
function gcTotals(): { minor: number; major: number } {
  if (gcMs === undefined) {
    const totals = { minor: 0, major: 0 };
    new PerformanceObserver((list) => {
      for (const e of list.getEntries() as (PerformanceEntry & { detail?: { kind?: number } })[]) {
        if (e.detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) totals.minor += e.duration;
        else totals.major += e.duration;
      }
    }).observe({ entryTypes: ['gc'] });
    gcMs = totals;
  }
  return { ...gcMs };
}

const running = await serve(JSON.parse(process.env.BENCH_SERVE_SPEC ?? '{}') as ServeSpec);
send({ type: 'ready', url: running.url, urls: running.urls, ...(running.key ? { key: running.key } : {}) });
process.on('message', (m: unknown) => {
  if (m === 'memory') {
    global.gc?.();
    const u = process.memoryUsage();
    send({ type: 'memory', rss: u.rss, heapUsed: u.heapUsed, heapTotal: u.heapTotal, external: u.external, arrayBuffers: u.arrayBuffers });
  } else if ((m === 'journal-on' || m === 'journal-off') && running.switchJournal !== undefined) {
    const on = m === 'journal-on';
    // atUs: this moment on the monotonic clock V8's profiles are timed by, so a profile's samples can be
    // split by the slices they fell in.
    void running.switchJournal(on).then(() => send({ type: 'journal', on, gcMs: gcTotals(), atUs: Number(process.hrtime.bigint() / 1000n) }));
  } else if (m === 'profile-start') {
    void profiler().then((p) => p.post('Profiler.start'));
  } else if (m === 'profile-stop') {
    void profiler()
      .then((p) => p.post('Profiler.stop'))
      .then((r) => send({ type: 'profile', profile: r.profile }));
  } else if (m === 'stop') {
    // A close that stalls (a flush, a lingering socket) must not stall the benchmark.
    setTimeout(() => process.exit(0), 2_000).unref();
    void running.close().finally(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
