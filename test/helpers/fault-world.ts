// One gateway process over its own Redis server and a simulator, with a funded account and a key: the
// world the fault tests break pieces of (Redis killed or paused, SIGTERM mid-stream).
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createRedisBackend, type Backend } from '../../src/billing/backends.js';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.js';
import { startRedisServer, type OwnRedisProcess } from './redis-server.js';

export interface FaultWorld {
  redis: OwnRedisProcess;
  /** The test's own connection to that Redis (one retry, errors swallowed: Redis is meant to fail). */
  conn: Redis;
  backend: Backend;
  sim: Simulator;
  gateway: GatewayProcess;
  accountId: string;
  secret: string;
}

export interface FaultWorldOptions {
  /** Redis keeps an append-only file, so a restart brings the data back. */
  appendOnly?: boolean;
  /** The gateway process's environment, on top of the Redis, namespace and simulator settings. */
  env?: Record<string, string>;
  sim?: Parameters<typeof startSimulator>[0];
  /** Names the namespace and the account. */
  label: string;
}

export async function startFaultWorld(opts: FaultWorldOptions): Promise<FaultWorld> {
  const redis = await startRedisServer(opts.appendOnly === true ? { appendOnly: true } : {});
  const conn = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  conn.on('error', () => undefined);
  const namespace = `${opts.label}-${randomBytes(4).toString('hex')}`;
  const backend = createRedisBackend({ redis: conn, namespace });
  const account = await backend.accounts.createAccount(opts.label);
  await backend.ledger.credit(account.id, 100_000_000, 'start');
  const { secret } = await backend.accounts.createKey(account.id, { name: opts.label });
  const sim = await startSimulator({ log: true, ...opts.sim });
  const gateway = await startGatewayProcess({ REDIS_URL: redis.url, TOLLGATE_TEST_NAMESPACE: namespace, TOLLGATE_SIMULATOR_URL: sim.url, ...opts.env });
  return { redis, conn, backend, sim, gateway, accountId: account.id, secret };
}

/** Stops everything the world started; a paused Redis is resumed first so it can be stopped. */
export async function stopFaultWorld(w: FaultWorld): Promise<void> {
  await w.gateway.kill();
  w.redis.resume();
  w.conn.disconnect();
  await w.sim.close();
  await w.redis.stop();
}
