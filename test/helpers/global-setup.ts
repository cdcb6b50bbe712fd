// One redis-server for the whole run (or REDIS_URL when set); tests isolate themselves by key namespace.
import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { startRedisServer, type RedisProcess } from './redis-server.js';

let redis: RedisProcess | undefined;

export async function setup(project: TestProject): Promise<void> {
  let url = process.env.REDIS_URL;
  if (!url) {
    redis = await startRedisServer();
    url = redis.url;
  }
  project.provide('redisUrl', url);
}

export async function teardown(): Promise<void> {
  await redis?.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}
