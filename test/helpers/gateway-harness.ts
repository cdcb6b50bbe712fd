// Starts a real gateway for end-to-end tests: the simulator as upstream (both wire formats),
// a catalog built from the example models, and the memory or Redis backend, over loopback HTTP.
import { RecordResponsesStore } from '../../src/responses/store.js';
import { inject } from 'vitest';
import { Redis } from 'ioredis';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { createMemoryBackend, createRedisBackend, type Backend, type HotBackend } from '../../src/billing/backends.js';
import { buildSnapshot } from '../../src/catalog/build-snapshot.js';
import type { CatalogSnapshot, CatalogSource, SecretResolver } from '../../src/catalog/snapshot.js';
import type { ModelCatalogSpec, ModelSpec, UpstreamSpec } from '../../src/catalog/types.js';
import { readConfig, type GatewayConfig } from '../../src/config.js';
import { startGateway, type RunningGateway } from '../../src/gateway.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/server.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { GatewayMetrics } from '../../src/telemetry/metrics.js';
import type { Tracing } from '../../src/telemetry/tracing.js';
import type { Database } from '../../src/record/database.js';
import { JournalWriter } from '../../src/record/journal-writer.js';
import { recordedBackend, type RecordedBackendOptions } from '../../src/record/recorded-backend.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';

export const EXAMPLE_MODELS: ModelSpec[] = (
  parse(readFileSync(new URL('../../examples/catalog.yaml', import.meta.url), 'utf8')) as { spec: ModelCatalogSpec }
).spec.models;

/** A catalog source the test can swap by hand. */
export class StaticCatalog implements CatalogSource {
  private snapshot: CatalogSnapshot;
  private readonly listeners = new Set<(s: CatalogSnapshot) => void>();
  constructor(spec: ModelCatalogSpec) {
    this.snapshot = buildSnapshot([{ source: 'test', spec }], 1);
  }
  current(): CatalogSnapshot {
    return this.snapshot;
  }
  swap(spec: ModelCatalogSpec): void {
    this.snapshot = buildSnapshot([{ source: 'test', spec }], this.snapshot.generation + 1);
    for (const l of this.listeners) l(this.snapshot);
  }
  onSwap(listener: (s: CatalogSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  async close(): Promise<void> {}
}

export interface HarnessOptions {
  /** Wire format of every model's upstream (default openai). */
  upstreamFormat?: UpstreamFormatName;
  ledger?: 'memory' | 'redis';
  simulator?: SimulatorOptions;
  /** Starting balance of the test account, micro-USD (default 100 USD). */
  balanceMicros?: number;
  keyCaps?: { lifetimeCap?: number; monthlyCap?: number };
  config?: Partial<GatewayConfig>;
  tracing?: Tracing;
  /** Edit the model specs before the catalog is built. */
  models?: (models: ModelSpec[], sim: Simulator) => ModelSpec[];
  /** Upstream credential the simulator demands (tests that it reaches the upstream). */
  upstreamApiKey?: string;
  /** Usage records the Redis ledger keeps per account (default 10,000). */
  usageMaxRecords?: number;
  /**
   * The record (PostgreSQL): accounts, keys and credits commit there first and every settlement is
   * journaled to it, as in gateway-main with DATABASE_URL. The caller owns (and closes) the database.
   */
  record?: Database;
  /** The Redis of `ledger: 'redis'` (default: the suite's shared one). */
  redisUrl?: string;
  /** Options of the record's backend (`record` only). */
  recordOptions?: RecordedBackendOptions;
}

export interface Harness {
  gateway: RunningGateway;
  simulator: Simulator;
  backend: Backend;
  catalog: StaticCatalog;
  accountId: string;
  keyId: string;
  key: string;
  baseUrl: string;
  /** Log lines the gateway wrote. */
  logLines: string[];
  /** Key prefix of the Redis ledger (`ledger: 'redis'` only). */
  redisNamespace: string | undefined;
  /** The journal to the record (`record` only): flush() commits what the gateway settled so far. */
  journal: JournalWriter | undefined;
  /**
   * Resolves once every request the gateway has answered is settled too: answers (streams and JSON
   * alike) reach the client before their settlement, so a test reads charges after this.
   */
  settled(): Promise<void>;
  close(): Promise<void>;
}

let namespaceCounter = 0;

export function upstreamFor(format: UpstreamFormatName, sim: Simulator, model: string, name = 'sim'): UpstreamSpec {
  return {
    name,
    format,
    baseUrl: format === 'openai' ? sim.openaiBaseUrl : format === 'gemini' ? sim.geminiBaseUrl : sim.anthropicBaseUrl,
    model,
  };
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const format = opts.upstreamFormat ?? 'openai';
  const reasoningModels = EXAMPLE_MODELS.filter((m) => m.capabilities.reasoning).map((m) => `sim-${m.id}`);
  const simulator = await startSimulator({ reasoningModels, ...(opts.upstreamApiKey ? { apiKey: opts.upstreamApiKey } : {}), ...opts.simulator });
  let models = EXAMPLE_MODELS.map((m) => ({
    ...m,
    upstreams: [
      {
        ...upstreamFor(format, simulator, `sim-${m.id}`),
        ...(opts.upstreamApiKey ? { credentialsSecretRef: { name: 'upstream', key: 'token' } } : {}),
      },
    ],
  }));
  if (opts.models) models = opts.models(models, simulator);
  const catalog = new StaticCatalog({ models });
  let hot: HotBackend;
  let redis: Redis | undefined;
  let redisNamespace: string | undefined;
  if (opts.ledger === 'redis') {
    redis = new Redis(opts.redisUrl ?? inject('redisUrl'), { enableAutoPipelining: true });
    redisNamespace = `e2e${process.pid}x${namespaceCounter++}x${Date.now()}`;
    hot = createRedisBackend({ redis, namespace: redisNamespace, ...(opts.usageMaxRecords === undefined ? {} : { usageMaxRecords: opts.usageMaxRecords }) });
  } else {
    hot = createMemoryBackend();
  }
  const backend: Backend = opts.record === undefined ? hot : recordedBackend(hot, opts.record, 'tg', opts.recordOptions);
  const journal =
    opts.record === undefined
      ? undefined
      : new JournalWriter({
          db: opts.record,
          maxLagMs: 60_000,
          ...(redis === undefined || redisNamespace === undefined ? {} : { stream: new RedisJournalStream(redis, redisKeys(redisNamespace)) }),
        });
  const account = await backend.accounts.createAccount('e2e');
  // Keyed by account: idempotency keys are unique across a whole record a test may share.
  await backend.ledger.credit(account.id, opts.balanceMicros ?? 100_000_000, `start-${account.id}`);
  const created = await backend.accounts.createKey(account.id, { name: 'e2e', ...opts.keyCaps });
  const secrets: SecretResolver = { resolve: (ref) => (ref.name === 'upstream' ? opts.upstreamApiKey : undefined) };
  const logLines: string[] = [];
  const destination = {
    write(line: string): void {
      logLines.push(...line.split('\n').filter((l) => l !== ''));
    },
  };
  const config: GatewayConfig = { ...readConfig({}), port: 0, metricsPort: 0, reaperIntervalMs: 200, ...opts.config };
  const gateway = await startGateway({
    config,
    catalog,
    backend,
    secrets,
    metrics: new GatewayMetrics({ defaultMetrics: false }),
    logger: createLogger({ destination }),
    ...(opts.tracing ? { tracing: opts.tracing } : {}),
    ...(journal === undefined ? {} : { journal }),
    ...(opts.record === undefined ? {} : { responsesStore: new RecordResponsesStore(opts.record), record: opts.record }),
  });
  return {
    gateway,
    simulator,
    backend,
    catalog,
    accountId: account.id,
    keyId: created.record.id,
    key: created.secret,
    baseUrl: gateway.url,
    logLines,
    redisNamespace,
    journal,
    async settled() {
      for (const until = Date.now() + 10_000; gateway.inFlight() > 0; await new Promise((r) => setTimeout(r, 2))) {
        if (Date.now() > until) throw new Error(`${gateway.inFlight()} requests still unsettled after 10 s`);
      }
    },
    async close() {
      await gateway.close();
      await simulator.close();
      await backend.ledger.close();
      await backend.accounts.close();
      await redis?.quit();
    },
  };
}
