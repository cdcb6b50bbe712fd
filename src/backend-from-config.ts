// Memory ledger for the one-machine run; Redis when REDIS_URL is set. One choice, made at start.
import { Redis } from 'ioredis';
import { createMemoryBackend, createRedisBackend, DEFAULT_REDIS_NAMESPACE, type Backend } from './billing/backends.js';
import { redisKeys } from './billing/redis-keys.js';
import { RedisJournalStream } from './billing/redis-journal-stream.js';
import { LedgerHealth } from './billing/ledger-health.js';
import type { GatewayConfig } from './config.js';

export interface OwnedBackend {
  backend: Backend;
  kind: 'memory' | 'redis';
  /** The Redis copy of the journal (settlements PostgreSQL has yet to commit); none in memory. */
  journalStream?: RedisJournalStream;
  /** Whether the ledger can be used now (always, for the memory ledger). */
  health: LedgerHealth;
  close(): Promise<void>;
}

/**
 * The ledger's Redis connection and its health. Every command has a deadline: a paused or unreachable
 * Redis fails requests in about a second (503, retryable) instead of holding each one for the length
 * of the outage; the connection is retried in the background and health follows it.
 */
export function connectLedgerRedis(url: string, config: Pick<GatewayConfig, 'redisCommandTimeoutMs'>): { redis: Redis; health: LedgerHealth } {
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    enableAutoPipelining: true,
    commandTimeout: config.redisCommandTimeoutMs,
    connectTimeout: Math.max(1000, config.redisCommandTimeoutMs),
    retryStrategy: (times) => Math.min(times * 100, 2000),
  });
  const health = new LedgerHealth({ probe: () => redis.ping() });
  health.watch(redis);
  return { redis, health };
}

export function backendFromConfig(config: GatewayConfig): OwnedBackend {
  if (config.redisUrl === undefined) {
    const backend = createMemoryBackend({ keyMarker: config.keyMarker, usageMaxRecords: config.usageMaxRecords });
    return { backend, kind: 'memory', health: new LedgerHealth(), close: async () => undefined };
  }
  const { redis, health } = connectLedgerRedis(config.redisUrl, config);
  const backend = createRedisBackend({ redis, keyMarker: config.keyMarker, usageMaxRecords: config.usageMaxRecords });
  return {
    backend,
    kind: 'redis',
    health,
    journalStream: new RedisJournalStream(redis, redisKeys(DEFAULT_REDIS_NAMESPACE)),
    close: async () => {
      health.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
