// Redis loses everything in the middle of steady traffic through two gateway processes, with the
// production backend over a real PostgreSQL record (TOLLGATE_TEST_RECORD): once by FLUSHALL, once by a
// SIGKILL and a restart with no data. Afterwards every account's balance, every key's lifetime and
// monthly spend and every usage record equal the start plus exactly the traffic that completed (each
// served request recorded once, at its usage's price); no key's spend plus holds was ever seen past a
// cap, and none is past it in the record; Redis, once it has loaded the accounts again, agrees with
// PostgreSQL; reconciliation reports no difference. On the code before the rebuild (e5de806^) the
// wiped accounts read as empty: every request after the wipe got 402, in-flight requests went free, and
// the record and Redis disagreed.
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
import { startRedisServer, type OwnRedisProcess } from '../helpers/redis-server.js';
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
  lifetimeCap?: number;
  monthlyCap?: number;
}

async function setUp() {
  const redis = await startRedisServer({});
  cleanups.push(() => redis.stop());
  const database = await createTestDatabase('wipe');
  cleanups.push(() => database.drop());
  const db: Database = await openPostgres(database.url, { max: 4 });
  cleanups.push(() => db.close());
  const conn = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  conn.on('error', () => undefined);
  cleanups.push(async () => {
    conn.disconnect();
  });
  const namespace = `wipe-${randomBytes(4).toString('hex')}`;
  const hot = createRedisBackend({ redis: conn, namespace });
  const backend = recordedBackend(hot, db, 'tg', { rebuildWindowMs: 0 });
  const sim = await startSimulator({ tokenDelayMs: 3 });
  cleanups.push(() => sim.close());
  // Accounts and keys, created through the record as the dashboard and admin API do. One request costs
  // about ten micro-USD: the caps are reached during the run.
  const keys: KeyUnderTest[] = [];
  for (let a = 0; a < 3; a++) {
    const account = await backend.accounts.createAccount(`wipe-${a}`);
    await backend.ledger.credit(account.id, START, `start-${account.id}`);
    const caps = [{ lifetimeCap: 300 }, { monthlyCap: 250 }, {}][a] ?? {};
    for (const c of [caps, {}]) {
      const { record, secret } = await backend.accounts.createKey(account.id, c);
      keys.push({ accountId: account.id, keyId: record.id, secret, ...c });
    }
  }
  const env = {
    REDIS_URL: redis.url,
    TOLLGATE_TEST_NAMESPACE: namespace,
    TOLLGATE_SIMULATOR_URL: sim.url,
    TOLLGATE_TEST_DATABASE_URL: database.url,
    TOLLGATE_TEST_RECORD: '1',
    TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '500',
    TOLLGATE_REBUILD_WINDOW_MS: '1500',
  };
  const gateways = [await startGatewayProcess(env), await startGatewayProcess(env)];
  cleanups.push(async () => {
    for (const g of gateways) await g.kill();
  });
  return { redis, db, conn, hot, backend, keys, gateways, namespace };
}

type World = Awaited<ReturnType<typeof setUp>>;

/** Clients that send requests without pause until stopped, recording what each answer says. */
function traffic(w: World, clients: number) {
  const served: Served[] = [];
  const statuses = new Map<number, number>();
  const codes = new Set<string>();
  let running = true;
  let sent = 0;
  const loops = Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; running; i++) {
      const k = w.keys[(c + i) % w.keys.length] as KeyUnderTest;
      const gateway = w.gateways[(c + i) % 2] as { url: string };
      sent++;
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
    sent: () => sent,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Samples every capped key's spend plus holds in Redis every few ms; the peak above its cap, if any. */
function capWatch(w: World) {
  const over: string[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const k of w.keys) {
        const s = await w.hot.ledger.keySpend(k.accountId, k.keyId).catch(() => undefined);
        if (s === undefined) continue;
        if (k.lifetimeCap !== undefined && s.lifetimeSpent + s.lifetimeHeld > k.lifetimeCap) over.push(`${k.keyId} lifetime ${s.lifetimeSpent}+${s.lifetimeHeld}`);
        if (k.monthlyCap !== undefined && s.monthSpent + s.monthHeld > k.monthlyCap) over.push(`${k.keyId} month ${s.monthSpent}+${s.monthHeld}`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    over,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

async function checkBooks(w: World, served: Served[]): Promise<void> {
  // Every served request reaches the record once, at its usage's price (the writers commit every 100 ms).
  await until(
    'every served request in the record',
    async () => {
      const r = await w.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM usage_records WHERE status = 'completed'`);
      return (r.rows[0]?.n ?? 0) >= served.length ? true : undefined;
    },
    20_000,
  );
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
    // Redis, loaded again and caught up (the writers' trim runs every second), agrees to the micro-dollar.
    await w.backend.ledger.seed(accountId);
    await until(
      'Redis caught up',
      async () => ((await w.hot.ledger.balance(accountId)).balance === START - charged ? true : undefined),
      10_000,
    ).catch(() => undefined);
    expect(await w.hot.ledger.balance(accountId)).toEqual({ balance: START - charged, held: 0 });
  }
  for (const k of w.keys) {
    const spent = served.filter((s) => s.keyId === k.keyId).reduce((t, s) => t + s.cost, 0);
    const life = await w.db.query<{ lifetime_spent: number }>('SELECT lifetime_spent FROM api_keys WHERE id = $1', [k.keyId]);
    expect(life.rows[0]?.lifetime_spent, 'recorded key lifetime spend').toBe(spent);
    const month = await w.db.query<{ spent: number }>('SELECT COALESCE(sum(spent), 0)::bigint AS spent FROM key_month_spend WHERE key_id = $1', [k.keyId]);
    expect(month.rows[0]?.spent, 'recorded key month spend').toBe(spent);
    if (k.lifetimeCap !== undefined) expect(spent).toBeLessThanOrEqual(k.lifetimeCap);
    if (k.monthlyCap !== undefined) expect(spent).toBeLessThanOrEqual(k.monthlyCap);
    expect(await w.hot.ledger.keySpend(k.accountId, k.keyId)).toMatchObject({ lifetimeSpent: spent, monthSpent: spent, lifetimeHeld: 0, monthHeld: 0 });
  }
  const books = reconcileSources(w.db, w.backend, new RedisJournalStream(w.conn, redisKeys(w.namespace)), undefined);
  const report = await reconcile(books, accounts);
  expect(report.differences).toEqual([]);
  expect(report.totalDifference).toBe(0);
}

async function runWithWipe(wipe: (w: World) => Promise<void>): Promise<void> {
  const w = await setUp();
  const load = traffic(w, 8);
  const caps = capWatch(w);
  await until('traffic flowing', async () => (load.served.length >= 40 ? true : undefined), 15_000);
  const before = load.served.length;
  await wipe(w);
  // Steady traffic goes on through the reload; the run ends once well past it.
  await until('served after the wipe', async () => (load.served.length >= before + 150 ? true : undefined), 30_000);
  await load.stop();
  await caps.stop();
  expect(caps.over, 'spend plus holds past a cap').toEqual([]);
  // Nothing but successes, limits reached (402) and, while Redis is down, the retryable 503.
  for (const status of load.statuses.keys()) expect([200, 402, 503]).toContain(status);
  for (const code of load.codes) expect(code).toMatch(/^(402 (insufficient_quota|key_lifetime_cap_reached|key_monthly_cap_reached|.*cap.*)|503 ledger_unavailable)$/);
  // Some requests hit the caps (the caps were reached during the run).
  expect(load.statuses.get(402) ?? 0, JSON.stringify([...load.statuses])).toBeGreaterThan(0);
  await checkBooks(w, load.served);
}

describe('Redis loses everything under traffic through two gateways', () => {
  it('FLUSHALL: balances, key spend and usage equal the start plus the traffic that completed; no cap passed', async () => {
    await runWithWipe(async (w) => {
      await w.conn.flushall();
    });
  }, 90_000);

  it('a Redis restart with no data: the same, with 503s only while it is down', async () => {
    await runWithWipe(async (w: World) => {
      await w.redis.kill();
      await new Promise((r) => setTimeout(r, 500));
      const again: OwnRedisProcess = await startRedisServer({ port: w.redis.port });
      cleanups.push(() => again.stop());
    });
  }, 90_000);
});
