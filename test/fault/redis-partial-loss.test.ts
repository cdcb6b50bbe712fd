// Redis loses its last writes, not everything, under steady traffic through two gateway processes over
// a real PostgreSQL record: (a) a restart from an older snapshot (what an AOF `everysec` restart or a
// crash between RDB saves comes back with), (b) a failover to a replica that was behind (detached with
// REPLICAOF NO ONE while the master went on taking writes, then given the clients' address). The
// account's generation survives both, so nothing would reload it; the per-account seq (every money
// script adds 1, the gateways and the record remember the highest) shows that Redis is behind and the
// account is loaded again from the record. Afterwards every served request is recorded once at its
// usage's price, balances and key spend in Redis equal the record's, no hold is left, and reconciliation
// reports no difference. On ef46cfd a settlement whose hold was lost was taken as a duplicate (charged
// 0, no usage record) and Redis kept money the record had spent.
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { costMicros } from '../../src/billing/money.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';
import { openPostgres, type Database } from '../../src/record/database.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { startSimulator } from '../../src/simulator/server.js';
import { EXAMPLE_MODELS } from '../helpers/gateway-harness.js';
import { killGatewayProcesses, startGatewayProcess } from '../helpers/gateway-process.js';
import { startRedisEndpoint, startRedisServer } from '../helpers/redis-server.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { until } from '../e2e/e2e-support.js';

const MODEL = 'outlaw-1-xploded';
const pricing = EXAMPLE_MODELS.find((m) => m.id === MODEL)?.pricing;
const prices = { input: usdPerMillionToMicros(pricing?.input ?? '0'), output: usdPerMillionToMicros(pricing?.output ?? '0'), display: { input: '', output: '' } };
const START = 50_000_000;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(() => killGatewayProcesses());

interface Served {
  requestId: string;
  accountId: string;
  keyId: string;
  cost: number;
}

interface KeyUnderTest {
  accountId: string;
  keyId: string;
  secret: string;
}

/** Accounts, keys and two gateway processes, every client (the test's own too) on `redisUrl`. */
async function setUp(redisUrl: string) {
  const database = await createTestDatabase('partial');
  cleanups.push(() => database.drop());
  const db: Database = await openPostgres(database.url, { max: 4 });
  cleanups.push(() => db.close());
  const conn = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  conn.on('error', () => undefined);
  cleanups.push(async () => {
    conn.disconnect();
  });
  const namespace = `partial-${randomBytes(4).toString('hex')}`;
  const hot = createRedisBackend({ redis: conn, namespace });
  const backend = recordedBackend(hot, db, 'tg', { rebuildWindowMs: 0, movementSweepMs: 0, keySweepMs: 0 });
  const sim = await startSimulator({ tokenDelayMs: 3 });
  cleanups.push(() => sim.close());
  const keys: KeyUnderTest[] = [];
  for (let a = 0; a < 3; a++) {
    const account = await backend.accounts.createAccount(`partial-${a}`);
    await backend.ledger.credit(account.id, START, `start-${account.id}`);
    for (let k = 0; k < 2; k++) {
      const { record, secret } = await backend.accounts.createKey(account.id, { name: `k${k}` });
      keys.push({ accountId: account.id, keyId: record.id, secret });
    }
  }
  const env = {
    REDIS_URL: redisUrl,
    TOLLGATE_TEST_NAMESPACE: namespace,
    TOLLGATE_SIMULATOR_URL: sim.url,
    TOLLGATE_TEST_DATABASE_URL: database.url,
    TOLLGATE_TEST_RECORD: '1',
    TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '500',
    TOLLGATE_REBUILD_WINDOW_MS: '1000',
  };
  const gateways = [await startGatewayProcess(env), await startGatewayProcess(env)];
  cleanups.push(async () => {
    for (const g of gateways) await g.kill();
  });
  return { db, conn, hot, backend, keys, gateways, namespace };
}

type World = Awaited<ReturnType<typeof setUp>>;

/** Clients that send requests without pause until stopped, recording what each answer says. */
function traffic(w: World, clients: number) {
  const served: Served[] = [];
  const statuses = new Map<number, number>();
  const codes = new Set<string>();
  let running = true;
  const loops = Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; running; i++) {
      const k = w.keys[(c + i) % w.keys.length] as KeyUnderTest;
      const gateway = w.gateways[(c + i) % 2] as { url: string };
      try {
        const res = await fetch(`${gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${k.secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, max_tokens: 60, sim_reply_tokens: 5 + ((c + i) % 20), messages: [{ role: 'user', content: `Request ${c}-${i}.` }] }),
        });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const body = (await res.json()) as { usage?: { prompt_tokens: number; completion_tokens: number }; error?: { code?: string } };
        if (res.status === 200 && body.usage !== undefined) {
          const cost = costMicros({ input: body.usage.prompt_tokens, output: body.usage.completion_tokens, cachedInput: 0, reasoning: 0 }, prices);
          served.push({ requestId: res.headers.get('x-request-id') ?? '', accountId: k.accountId, keyId: k.keyId, cost });
        } else if (body.error?.code !== undefined) codes.add(`${res.status} ${body.error.code}`);
      } catch (err) {
        codes.add(`fetch failed: ${String(err)}`);
      }
    }
  });
  return {
    served,
    statuses,
    codes,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

async function checkBooks(w: World, served: Served[]): Promise<void> {
  // Every served request reaches the record once, at its usage's price.
  await until(
    'every served request in the record',
    async () => {
      const r = await w.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM usage_records WHERE status = 'completed'`);
      return (r.rows[0]?.n ?? 0) >= served.length ? true : undefined;
    },
    20_000,
  ).catch(() => undefined);
  const rows = await w.db.query<{ request_id: string; account_id: string; key_id: string; cost: number }>(
    `SELECT request_id, account_id, key_id, cost FROM usage_records WHERE status = 'completed' ORDER BY request_id`,
  );
  const expected = [...served].sort((a, b) => (a.requestId < b.requestId ? -1 : 1)).map((s) => ({ request_id: s.requestId, account_id: s.accountId, key_id: s.keyId, cost: s.cost }));
  expect(rows.rows).toEqual(expected);

  const accounts = [...new Set(w.keys.map((k) => k.accountId))];
  for (const accountId of accounts) {
    const charged = served.filter((s) => s.accountId === accountId).reduce((t, s) => t + s.cost, 0);
    const totals = await w.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [accountId]);
    expect(totals.rows[0]?.balance, 'recorded balance = start - served').toBe(START - charged);
    // Redis, caught up (the writers' trim runs after each commit), agrees to the micro-dollar.
    await until('Redis caught up', async () => ((await w.hot.ledger.balance(accountId)).balance === START - charged ? true : undefined), 10_000).catch(() => undefined);
    expect(await w.hot.ledger.balance(accountId), 'Redis balance = the record').toEqual({ balance: START - charged, held: 0 });
  }
  for (const k of w.keys) {
    const spent = served.filter((s) => s.keyId === k.keyId).reduce((t, s) => t + s.cost, 0);
    const life = await w.db.query<{ lifetime_spent: number }>('SELECT lifetime_spent FROM api_keys WHERE id = $1', [k.keyId]);
    expect(life.rows[0]?.lifetime_spent, 'recorded key lifetime spend').toBe(spent);
    expect(await w.hot.ledger.keySpend(k.accountId, k.keyId), 'Redis key spend = the record').toMatchObject({ lifetimeSpent: spent, monthSpent: spent, lifetimeHeld: 0, monthHeld: 0 });
  }
  const books = reconcileSources(w.db, w.backend, new RedisJournalStream(w.conn, redisKeys(w.namespace)), undefined);
  const report = await reconcile(books, accounts);
  expect(report.differences).toEqual([]);
  expect(report.totalDifference).toBe(0);
}

/**
 * Traffic, then `lose` (which takes the point Redis will go back to, lets traffic write past it, and puts
 * the older Redis in place), then traffic well past the loss; then the books.
 */
async function runWithLoss(w: World, lose: (afterPoint: () => Promise<void>) => Promise<void>): Promise<void> {
  const load = traffic(w, 8);
  await until('traffic flowing', async () => (load.served.length >= 40 ? true : undefined), 15_000);
  await lose(async () => {
    // Writes Redis acknowledged and will lose: served and journaled to the record meanwhile.
    const at = load.served.length;
    await until('served past the point Redis goes back to', async () => (load.served.length >= at + 60 ? true : undefined), 15_000);
  });
  const after = load.served.length;
  await until('served after the loss', async () => (load.served.length >= after + 150 ? true : undefined), 30_000);
  await load.stop();
  for (const status of load.statuses.keys()) expect([200, 503]).toContain(status);
  for (const code of load.codes) expect(code).toMatch(/^503 ledger_unavailable$/);
  await checkBooks(w, load.served);
}

describe('Redis loses its last writes under traffic through two gateways', () => {
  it('a restart from an older snapshot: balances, key spend and usage equal the record; reconciliation 0', async () => {
    const redis = await startRedisServer({});
    cleanups.push(() => redis.stop());
    const w = await setUp(redis.url);
    const older = mkdtempSync(join(tmpdir(), 'tollgate-redis-older-'));
    await runWithLoss(w, async (writePastPoint) => {
      // The point Redis comes back to: an RDB of now (what AOF everysec or the last save would give).
      await w.conn.call('SAVE');
      copyFileSync(join(redis.dir, 'dump.rdb'), join(older, 'dump.rdb'));
      await writePastPoint();
      await redis.kill();
      const again = await startRedisServer({ port: redis.port, dir: older });
      cleanups.push(() => again.stop());
    });
  }, 120_000);

  it('a failover to a replica that was behind: the same', async () => {
    const master = await startRedisServer({});
    cleanups.push(() => master.stop());
    const replica = await startRedisServer({ replicaOf: master.port });
    cleanups.push(() => replica.stop());
    const replicaConn = new Redis(replica.url, { maxRetriesPerRequest: 1 });
    replicaConn.on('error', () => undefined);
    cleanups.push(async () => {
      replicaConn.disconnect();
    });
    await until('replica in sync', async () => ((await replicaConn.info('replication')).includes('master_link_status:up') ? true : undefined), 10_000);
    const endpoint = await startRedisEndpoint(master.port);
    cleanups.push(() => endpoint.close());
    const w = await setUp(endpoint.url);
    await runWithLoss(w, async (writePastPoint) => {
      // The replica stops following here: everything the master takes from now on, it will not have.
      await replicaConn.call('REPLICAOF', 'NO', 'ONE');
      await writePastPoint();
      await master.kill();
      endpoint.switchTo(replica.port);
    });
  }, 120_000);
});
