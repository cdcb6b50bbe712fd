// A gateway in its own process, for tests that must kill it (SIGKILL mid-stream) and show what the
// ledger does without it. Reads REDIS_URL, TOLLGATE_TEST_NAMESPACE (the Redis key prefix the test's
// own backend uses), TOLLGATE_SIMULATOR_URL and the usual TOLLGATE_* settings (request timeout, hold
// margin) through readConfig; prints one JSON line {"url": ...} once it listens. With
// TOLLGATE_TEST_DATABASE_URL (not DATABASE_URL, which a test run may carry for itself) it journals to
// that PostgreSQL; TOLLGATE_TEST_JOURNAL_INTERVAL_MS, _SWEEP_MS and _GRACE_MS set the
// writer's commit pause, sweep period and sweep grace (a long commit pause leaves a settlement only in
// Redis, for a kill right after settling); TOLLGATE_TEST_RECORD=1 puts the record under the backend too.
// Run with: node --import tsx test/helpers/gateway-child.ts
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { connectLedgerRedis } from '../../src/backend-from-config.js';
import { createRedisBackend } from '../../src/billing/backends.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { buildSnapshot } from '../../src/catalog/build-snapshot.js';
import type { CatalogSource } from '../../src/catalog/snapshot.js';
import type { ModelCatalogSpec } from '../../src/catalog/types.js';
import { readConfig } from '../../src/config.js';
import { startGateway } from '../../src/gateway.js';
import { openPostgres } from '../../src/record/database.js';
import { JournalWriter } from '../../src/record/journal-writer.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';

const redisUrl = process.env.REDIS_URL;
const namespace = process.env.TOLLGATE_TEST_NAMESPACE;
const simulatorUrl = process.env.TOLLGATE_SIMULATOR_URL;
if (!redisUrl || !namespace || !simulatorUrl) {
  process.stderr.write('gateway-child needs REDIS_URL, TOLLGATE_TEST_NAMESPACE and TOLLGATE_SIMULATOR_URL\n');
  process.exit(2);
}

const spec = (parse(readFileSync(new URL('../../examples/catalog.yaml', import.meta.url), 'utf8')) as { spec: ModelCatalogSpec }).spec;
const models = spec.models.map((m) => ({
  ...m,
  upstreams: [{ name: 'sim', format: 'openai' as const, baseUrl: `${simulatorUrl}/v1`, model: `sim-${m.id}` }],
}));
const snapshot = buildSnapshot([{ source: 'child', spec: { models } }], 1);
const catalog: CatalogSource = {
  current: () => snapshot,
  onSwap: () => () => undefined,
  close: async () => undefined,
};

const config = { ...readConfig(process.env), port: 0, metricsPort: 0 };
// The production connection: command deadlines and ledger health, as backendFromConfig makes it.
const { redis, health } = connectLedgerRedis(redisUrl, config);
const hot = createRedisBackend({ redis, namespace, usageMaxRecords: config.usageMaxRecords });
const env = (name: string): number | undefined => (process.env[name] ? Number(process.env[name]) : undefined);
const databaseUrl = process.env.TOLLGATE_TEST_DATABASE_URL;
const db = databaseUrl === undefined || databaseUrl === '' ? undefined : await openPostgres(databaseUrl, { max: 2 });
// With TOLLGATE_TEST_RECORD=1 the backend is the production one over a record: accounts, keys and money
// loaded from PostgreSQL (again after a Redis wipe), as gateway-main builds it with DATABASE_URL.
const backend = db !== undefined && process.env.TOLLGATE_TEST_RECORD === '1' ? recordedBackend(hot, db, config.keyMarker, { rebuildWindowMs: config.rebuildWindowMs, unknownKeyLookupsPerSecond: config.unknownKeyLookupsPerSecond }) : hot;
const journal =
  db === undefined
    ? undefined
    : new JournalWriter({
        db,
        stream: new RedisJournalStream(redis, redisKeys(namespace)),
        maxLagMs: config.journalMaxLagMs,
        ...(env('TOLLGATE_TEST_JOURNAL_INTERVAL_MS') === undefined ? {} : { intervalMs: env('TOLLGATE_TEST_JOURNAL_INTERVAL_MS') }),
        ...(env('TOLLGATE_TEST_JOURNAL_SWEEP_MS') === undefined ? {} : { sweepIntervalMs: env('TOLLGATE_TEST_JOURNAL_SWEEP_MS') }),
        ...(env('TOLLGATE_TEST_JOURNAL_GRACE_MS') === undefined ? {} : { sweepGraceMs: env('TOLLGATE_TEST_JOURNAL_GRACE_MS') }),
      });
const gateway = await startGateway({
  config,
  catalog,
  backend,
  secrets: { resolve: () => undefined },
  serveMetrics: false,
  ledgerHealth: health,
  ...(journal === undefined ? {} : { journal }),
});
process.stdout.write(`${JSON.stringify({ url: gateway.url })}\n`);

// SIGTERM drains as the production entry point does: the gateway first, then its Redis connection.
process.once('SIGTERM', () => {
  void (async () => {
    await gateway.close();
    await redis.quit().catch(() => undefined);
    process.exit(0);
  })();
});

// A leak check asks for a full collection first (SIGUSR2): garbage the collector has not reached yet
// would otherwise count as kept. Answers with one line: {"afterGc": {"rss": bytes, "kept": bytes,
// "outsideHeap": bytes}}, kept being the V8 heap in use plus the memory of Buffers and other objects
// outside it, outsideHeap the resident memory V8's heap does not account for (native allocations).
const collect = (globalThis as { gc?: () => void }).gc;
if (collect !== undefined) {
  process.on('SIGUSR2', () => {
    collect();
    const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
    process.stdout.write(`${JSON.stringify({ afterGc: { rss, kept: heapUsed + external, outsideHeap: rss - heapTotal } })}\n`);
  });
}
