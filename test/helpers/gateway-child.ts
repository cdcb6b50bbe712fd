// A gateway in its own process, for tests that must kill it (SIGKILL mid-stream) and show what the
// ledger does without it. Reads REDIS_URL, TOLLGATE_TEST_NAMESPACE (the Redis key prefix the test's
// own backend uses), TOLLGATE_SIMULATOR_URL and the usual TOLLGATE_* settings (request timeout, hold
// margin) through readConfig; prints one JSON line {"url": ...} once it listens.
// Run with: node --import tsx test/helpers/gateway-child.ts
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { parse } from 'yaml';
import { createRedisBackend } from '../../src/billing/backends.js';
import { buildSnapshot } from '../../src/catalog/build-snapshot.js';
import type { CatalogSource } from '../../src/catalog/snapshot.js';
import type { ModelCatalogSpec } from '../../src/catalog/types.js';
import { readConfig } from '../../src/config.js';
import { startGateway } from '../../src/gateway.js';

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

const redis = new Redis(redisUrl);
const backend = createRedisBackend({ redis, namespace });
const gateway = await startGateway({
  config: { ...readConfig(process.env), port: 0, metricsPort: 0 },
  catalog,
  backend,
  secrets: { resolve: () => undefined },
  serveMetrics: false,
});
process.stdout.write(`${JSON.stringify({ url: gateway.url })}\n`);
