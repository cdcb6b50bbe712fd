// One redis-server for the whole run (or REDIS_URL when set); tests isolate themselves by key namespace.
// One PostgreSQL server (DATABASE_URL, the machine's, or a throwaway one); each test file makes its own
// database on it (test/helpers/test-database.ts).
import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { findPostgres, type PostgresServer } from './postgres-server.js';
import { startRedisServer, type RedisProcess } from './redis-server.js';

let redis: RedisProcess | undefined;
let postgres: PostgresServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  let url = process.env.REDIS_URL;
  if (!url) {
    redis = await startRedisServer();
    url = redis.url;
  }
  project.provide('redisUrl', url);
  postgres = await findPostgres();
  project.provide('databaseUrl', postgres.adminUrl);
}

export async function teardown(): Promise<void> {
  await redis?.stop();
  await postgres?.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    /** A PostgreSQL connection string whose role may create databases. */
    databaseUrl: string;
  }
}
