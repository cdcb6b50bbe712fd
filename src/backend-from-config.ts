// Memory ledger for the one-machine run; Redis when REDIS_URL is set. One choice, made at start.
import { Redis } from 'ioredis';
import { createMemoryBackend, createRedisBackend, DEFAULT_REDIS_NAMESPACE, type Backend } from './billing/backends.js';
import { redisKeys } from './billing/redis-keys.js';
import { RedisJournalStream } from './billing/redis-journal-stream.js';
import type { GatewayConfig } from './config.js';

export interface OwnedBackend {
  backend: Backend;
  kind: 'memory' | 'redis';
  /** The Redis copy of the journal (settlements PostgreSQL has yet to commit); none in memory. */
  journalStream?: RedisJournalStream;
  close(): Promise<void>;
}

export function backendFromConfig(config: GatewayConfig): OwnedBackend {
  if (config.redisUrl === undefined) {
    const backend = createMemoryBackend({ keyMarker: config.keyMarker, usageMaxRecords: config.usageMaxRecords });
    return { backend, kind: 'memory', close: async () => undefined };
  }
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2, enableAutoPipelining: true });
  const backend = createRedisBackend({ redis, keyMarker: config.keyMarker, usageMaxRecords: config.usageMaxRecords });
  return {
    backend,
    kind: 'redis',
    journalStream: new RedisJournalStream(redis, redisKeys(DEFAULT_REDIS_NAMESPACE)),
    close: async () => {
      await redis.quit();
    },
  };
}
