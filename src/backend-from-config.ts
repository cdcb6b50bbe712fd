// Memory ledger for the one-machine run; Redis when REDIS_URL is set, a Redis Cluster when
// REDIS_CLUSTER_NODES is (or REDIS_URL is a redis+cluster:// URL). One choice, made at start.
import { Cluster, Redis } from 'ioredis';
import { createMemoryBackend, createRedisBackend, DEFAULT_REDIS_NAMESPACE, type HotBackend } from './billing/backends.js';
import { redisKeys } from './billing/redis-keys.js';
import { RedisJournalStream } from './record/redis-journal-stream.js';
import { LedgerHealth } from './billing/ledger-health.js';
import type { RedisClient } from './billing/redis-client.js';
import { redisTarget, type RedisTarget } from './billing/redis-target.js';
import type { GatewayConfig } from './config.js';

export interface OwnedBackend {
  backend: HotBackend;
  kind: 'memory' | 'redis' | 'redis-cluster';
  /** The Redis copy of the journal (settlements PostgreSQL has yet to commit); none in memory. */
  journalStream?: RedisJournalStream;
  /** Whether the ledger can be used now (always, for the memory ledger). */
  health: LedgerHealth;
  close(): Promise<void>;
}

/**
 * The ledger's Redis connection and its health. Every command has a deadline: a paused or unreachable
 * Redis fails requests in about a second (503, retryable) instead of holding each one for the length
 * of the outage; the connection is retried in the background and health follows it. A cluster gets
 * the same deadlines on each node's connection, and auto-pipelining per node.
 */
export function connectLedgerRedis(
  target: string | RedisTarget,
  config: Pick<GatewayConfig, 'redisCommandTimeoutMs'>,
): { redis: RedisClient; health: LedgerHealth } {
  const where = typeof target === 'string' ? (redisTarget(target, undefined) ?? { kind: 'single', url: target }) : target;
  const perConnection = {
    maxRetriesPerRequest: 1,
    commandTimeout: config.redisCommandTimeoutMs,
    connectTimeout: Math.max(1000, config.redisCommandTimeoutMs),
  };
  const retryStrategy = (times: number): number => Math.min(times * 100, 2000);
  const redis: RedisClient =
    where.kind === 'single'
      ? new Redis(where.url, { ...perConnection, enableAutoPipelining: true, retryStrategy })
      : new Cluster(where.nodes, {
          // Not auto-pipelined on a cluster: ioredis batches per node and handles MOVED per batch, so after a
          // failover a slot's commands can keep going to the old node and fail with MOVED (redis/ioredis#2075;
          // seen here as MOVED errors for 25 s in the failover tests). Each command alone is redirected.
          enableAutoPipelining: false,
          clusterRetryStrategy: retryStrategy,
          // A moved slot or a failover is retried by the client for about the command deadline, then fails.
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          maxRedirections: 16,
          slotsRefreshTimeout: Math.max(1000, config.redisCommandTimeoutMs),
          redisOptions: {
            ...perConnection,
            ...(where.username === undefined ? {} : { username: where.username }),
            ...(where.password === undefined ? {} : { password: where.password }),
            ...(where.tls ? { tls: {} } : {}),
          },
        });
  const health = new LedgerHealth({ probe: () => redis.ping() });
  health.watch(redis);
  return { redis, health };
}

/** The ledger's Redis as configured, or undefined for the memory ledger. */
export function ledgerRedisTarget(config: Pick<GatewayConfig, 'redisUrl' | 'redisClusterNodes'>): RedisTarget | undefined {
  return redisTarget(config.redisUrl, config.redisClusterNodes);
}

export function backendFromConfig(config: GatewayConfig): OwnedBackend {
  const target = ledgerRedisTarget(config);
  if (target === undefined) {
    const backend = createMemoryBackend({ keyMarker: config.keyMarker, usageMaxRecords: config.usageMaxRecords });
    return { backend, kind: 'memory', health: new LedgerHealth(), close: async () => undefined };
  }
  const { redis, health } = connectLedgerRedis(target, config);
  const backend = createRedisBackend({ redis, keyMarker: config.keyMarker, usageMaxRecords: config.usageMaxRecords });
  return {
    backend,
    kind: target.kind === 'cluster' ? 'redis-cluster' : 'redis',
    health,
    journalStream: new RedisJournalStream(redis, redisKeys(DEFAULT_REDIS_NAMESPACE)),
    close: async () => {
      health.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
