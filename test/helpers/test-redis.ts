// A connection to the test Redis (started by the global setup) under a namespace of its own, opened
// before the file's tests and, after them, emptied of that namespace's keys and closed.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, inject } from 'vitest';

export interface TestRedis {
  /** The connection; set once the file's tests start. */
  readonly redis: Redis;
  /** A prefix unique to this file and run; give each backend `${namespace}-<n>`. */
  readonly namespace: string;
}

export function useTestRedis(prefix: string): TestRedis {
  const namespace = `${prefix}-${randomBytes(4).toString('hex')}`;
  let redis: Redis | undefined;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    if (redis === undefined) return;
    const keys = await redis.keys(`${namespace}*`);
    // DEL in slices: a property run leaves thousands of keys, more than one call's arguments should carry.
    for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
    await redis.quit();
  });
  return {
    namespace,
    get redis(): Redis {
      if (redis === undefined) throw new Error('the test Redis is opened in beforeAll; use it inside a test');
      return redis;
    },
  };
}
