// A revocation whose Redis write fails after PostgreSQL committed it still reaches the gateway: a gateway
// process over a real Redis and PostgreSQL serves a key; the test's own backend (the admin API's or the
// dashboard's, in another process) revokes it while its Redis user is refused every write (a real
// NOPERM from Redis's ACL). The gateway must refuse the key within the key-cache TTL of the commit:
// once when the failure is one write (the writer retries), once when the writer never gets a write
// through (every gateway's key sweeper pushes what the record has). On ef46cfd the first write's
// failure was the end of it: the key list said revoked, the gateway admitted the key indefinitely.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { openPostgres } from '../../src/record/database.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { startSimulator } from '../../src/simulator/server.js';
import { killGatewayProcesses, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { createTestDatabase } from '../helpers/test-database.js';

const TTL_MS = 1_000;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(() => killGatewayProcesses());

async function setUp() {
  const redis = await startRedisServer({});
  cleanups.push(() => redis.stop());
  const database = await createTestDatabase('keyrev');
  cleanups.push(() => database.drop());
  const db = await openPostgres(database.url, { max: 2 });
  cleanups.push(() => db.close());
  // The writer's own Redis user, whose writes the test can have Redis refuse.
  const root = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  cleanups.push(async () => root.disconnect());
  await root.call('ACL', 'SETUSER', 'writer', 'on', '>writer-pw', '~*', '&*', '+@all');
  const conn = new Redis(redis.url, { username: 'writer', password: 'writer-pw', maxRetriesPerRequest: 1 });
  conn.on('error', () => undefined);
  cleanups.push(async () => conn.disconnect());
  const namespace = `keyrev-${randomBytes(4).toString('hex')}`;
  // The writer runs no key sweeper of its own: only its retries, and the gateway's sweeper.
  const backend = recordedBackend(createRedisBackend({ redis: conn, namespace }), db, 'tg', { movementSweepMs: 0, keySweepMs: 0 });
  cleanups.push(() => backend.accounts.close());
  const account = await backend.accounts.createAccount('keyrev');
  await backend.ledger.credit(account.id, 50_000_000, `start-${account.id}`);
  const key = await backend.accounts.createKey(account.id, { name: 'doomed' });
  const sim = await startSimulator({});
  cleanups.push(() => sim.close());
  const gateway = await startGatewayProcess({
    REDIS_URL: redis.url,
    TOLLGATE_TEST_NAMESPACE: namespace,
    TOLLGATE_SIMULATOR_URL: sim.url,
    TOLLGATE_TEST_DATABASE_URL: database.url,
    TOLLGATE_TEST_RECORD: '1',
    TOLLGATE_KEY_CACHE_TTL_MS: String(TTL_MS),
  });
  cleanups.push(async () => {
    await gateway.kill();
  });
  return {
    backend,
    gateway,
    accountId: account.id,
    keyId: key.record.id,
    secret: key.secret,
    refuseWrites: () => root.call('ACL', 'SETUSER', 'writer', '-@write'),
    allowWrites: () => root.call('ACL', 'SETUSER', 'writer', '+@all'),
  };
}

async function ask(gateway: GatewayProcess, secret: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'outlaw-1-xploded', max_tokens: 20, sim_reply_tokens: 3, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const body = (await res.json()) as { error?: { code?: string } };
  return { status: res.status, ...(body.error?.code === undefined ? {} : { code: body.error.code }) };
}

/** Asks until the key is refused (or `limitMs` passes): how long after `from` the first refusal came. */
async function refusedAfter(gateway: GatewayProcess, secret: string, from: number, limitMs: number): Promise<{ ms: number; answer: { status: number; code?: string } }> {
  for (;;) {
    const answer = await ask(gateway, secret);
    const ms = Date.now() - from;
    if (answer.status !== 200 || ms > limitMs) return { ms, answer };
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a revocation whose Redis write fails after COMMIT', () => {
  it('one failed write: the key is refused within the key-cache TTL of the commit', async () => {
    const w = await setUp();
    expect((await ask(w.gateway, w.secret)).status).toBe(200);
    await w.refuseWrites();
    const revoked = await w.backend.accounts.revokeKey(w.accountId, w.keyId).catch(() => 'threw');
    const committed = Date.now();
    await w.allowWrites();
    // The record has it; the list the holder sees says revoked.
    expect((await w.backend.accounts.listKeys(w.accountId))[0]?.revokedAt).toEqual(expect.any(Number));
    const { ms, answer } = await refusedAfter(w.gateway, w.secret, committed, 5_000);
    expect(answer).toEqual({ status: 401, code: 'revoked_api_key' });
    expect(ms).toBeLessThanOrEqual(TTL_MS);
    expect(revoked, 'the revocation is committed and durable, not an error').toBe(true);
  }, 60_000);

  it('every write of the writer fails: the gateway sweeps the change in, within the TTL', async () => {
    const w = await setUp();
    expect((await ask(w.gateway, w.secret)).status).toBe(200);
    await w.refuseWrites();
    await w.backend.accounts.revokeKey(w.accountId, w.keyId).catch(() => 'threw');
    const committed = Date.now();
    const { ms, answer } = await refusedAfter(w.gateway, w.secret, committed, 5_000);
    expect(answer).toEqual({ status: 401, code: 'revoked_api_key' });
    expect(ms).toBeLessThanOrEqual(TTL_MS);
    await w.allowWrites();
  }, 60_000);
});
