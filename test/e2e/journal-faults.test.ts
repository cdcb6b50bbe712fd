// The journal under faults, with gateways in their own processes and a real PostgreSQL:
//   - a gateway SIGKILLed right after it settled (before its writer committed): the settlement is only
//     in Redis, and another gateway's sweeper commits it to PostgreSQL, once;
//   - PostgreSQL stopped under traffic: requests are served up to the lag bound, then refused with a
//     503 in the client's wire format; once it is back the gateway serves again by itself and every
//     served request's record arrives exactly once, agreeing with Redis to the micro-dollar.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createRedisBackend, type Backend } from '../../src/billing/backends.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { openPostgres, type Database } from '../../src/record/database.js';
import { migrate } from '../../src/record/migrate.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import { startSimulator } from '../../src/simulator/server.js';
import { startThrowaway } from '../helpers/postgres-server.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { until } from './e2e-support.js';
import { killGatewayProcesses, startGatewayProcess } from '../helpers/gateway-process.js';

/** Waits until `cond` holds. */
const waitFor = (what: string, cond: () => Promise<boolean>, ms: number): Promise<true> => until(what, async () => ((await cond()) ? true : undefined), ms);

const MODEL = 'outlaw-1-xploded';
const START = 100_000_000;
afterAll(() => killGatewayProcesses());

/** An account with money and a key, in Redis and in the record alike. */
async function fundedAccount(backend: Backend, db: Database, name: string): Promise<{ accountId: string; keyId: string; secret: string }> {
  const account = await backend.accounts.createAccount(name);
  await db.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [account.id, name]);
  await backend.ledger.credit(account.id, START, 'start');
  await db.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key) VALUES ($1, 'top_up', $2, $3)`, [account.id, START, `start:${account.id}`]);
  const { record, secret } = await backend.accounts.createKey(account.id, { name });
  await db.query(`INSERT INTO api_keys (id, account_id, secret_hash, display_prefix, last_four, name) VALUES ($1, $2, $3, 'sk-tg-x', 'abcd', $4)`, [
    record.id,
    account.id,
    randomBytes(16).toString('hex'),
    name,
  ]);
  return { accountId: account.id, keyId: record.id, secret };
}

function chat(url: string, secret: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 50, sim_reply_tokens: 5 }),
  });
}

function message(url: string, secret: string): Promise<Response> {
  return fetch(`${url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 50, sim_reply_tokens: 5 }),
  });
}

async function usageRows(db: Database, accountId: string): Promise<{ request_id: string; cost: number }[]> {
  return (await db.query<{ request_id: string; cost: number }>('SELECT request_id, cost FROM usage_records WHERE account_id = $1 ORDER BY request_id', [accountId])).rows;
}

describe('journal: a gateway killed right after settling', () => {
  it("its settlement reaches PostgreSQL once, through another gateway's sweeper", async () => {
    const redis = new Redis(inject('redisUrl'));
    const namespace = `e2e-journal-kill-${randomBytes(4).toString('hex')}`;
    const backend = createRedisBackend({ redis, namespace });
    const database = await createTestDatabase('journal_kill');
    const db = await openPostgres(database.url, { max: 2 });
    const simulator = await startSimulator({});
    try {
      const { accountId, keyId, secret } = await fundedAccount(backend, db, 'kill');
      const base = { REDIS_URL: inject('redisUrl'), TOLLGATE_TEST_NAMESPACE: namespace, TOLLGATE_SIMULATOR_URL: simulator.url, TOLLGATE_TEST_DATABASE_URL: database.url };
      // The victim would commit only after a minute, and sweeps nothing: its settlement lives in its
      // memory and in the Redis stream alone when it dies.
      const victim = await startGatewayProcess({ ...base, TOLLGATE_TEST_JOURNAL_INTERVAL_MS: '60000', TOLLGATE_TEST_JOURNAL_SWEEP_MS: '0' });
      const res = await chat(victim.url, secret);
      expect(res.status, await res.clone().text()).toBe(200);
      const requestId = res.headers.get('x-request-id') ?? '';
      await res.text();
      // The answer reaches the client before its settlement: killed once the settlement is applied.
      const stream = redisKeys(namespace).journal(accountId);
      await waitFor('the settlement in the Redis journal', async () => (await redis.xlen(stream)) === 1, 5_000);
      await victim.kill();
      expect(await usageRows(db, accountId), 'and not yet in PostgreSQL').toEqual([]);
      const spent = (await backend.ledger.keySpend(accountId, keyId)).lifetimeSpent;
      expect(spent).toBeGreaterThan(0);

      // A surviving gateway sweeps every 200 ms for entries older than 300 ms.
      const survivor = await startGatewayProcess({ ...base, TOLLGATE_TEST_JOURNAL_SWEEP_MS: '200', TOLLGATE_TEST_JOURNAL_GRACE_MS: '300' });
      await waitFor('the swept record', async () => (await usageRows(db, accountId)).length === 1 && (await redis.xlen(stream)) === 0, 10_000);
      expect(await usageRows(db, accountId)).toEqual([{ request_id: requestId, cost: spent }]);
      const entries = await db.query<{ amount: number; request_id: string; memo: string }>(`SELECT amount, request_id, memo FROM ledger_entries WHERE account_id = $1 AND kind = 'usage'`, [accountId]);
      expect(entries.rows).toEqual([{ amount: -spent, request_id: requestId, memo: '1 request' }]);
      // Sweeps go on; the record stays single.
      await new Promise((r) => setTimeout(r, 600));
      expect(await usageRows(db, accountId)).toHaveLength(1);
      const report = await reconcile(reconcileSources(db, backend, new RedisJournalStream(redis, redisKeys(namespace)), undefined), [accountId]);
      expect(report.differences).toEqual([]);
      await survivor.kill();
    } finally {
      await simulator.close();
      await db.close();
      await database.drop();
      await redis.quit();
    }
  }, 60_000);
});

describe('journal: PostgreSQL stopped under traffic', () => {
  it('serves up to the lag bound, then refuses with 503 in each wire format, and recovers with every record once', async () => {
    const server = await startThrowaway();
    const redis = new Redis(inject('redisUrl'));
    const namespace = `e2e-journal-pgdown-${randomBytes(4).toString('hex')}`;
    const backend = createRedisBackend({ redis, namespace });
    const simulator = await startSimulator({});
    const dbUrl = server.adminUrl;
    let db = await openPostgres(dbUrl, { max: 2 });
    try {
      await migrate(db);
      const { accountId, keyId, secret } = await fundedAccount(backend, db, 'pgdown');
      const MAX_LAG_MS = 1_500;
      const gw = await startGatewayProcess({
        REDIS_URL: inject('redisUrl'),
        TOLLGATE_TEST_NAMESPACE: namespace,
        TOLLGATE_SIMULATOR_URL: simulator.url,
        TOLLGATE_TEST_DATABASE_URL: dbUrl,
        TOLLGATE_JOURNAL_MAX_LAG_MS: String(MAX_LAG_MS),
        TOLLGATE_TEST_JOURNAL_SWEEP_MS: '0',
      });
      const served: string[] = [];
      const serve = async (): Promise<Response> => {
        const res = await chat(gw.url, secret);
        if (res.status === 200) served.push(res.headers.get('x-request-id') ?? '');
        return res;
      };
      for (let i = 0; i < 5; i++) expect((await serve()).status).toBe(200);
      await waitFor('the first records', async () => (await usageRows(db, accountId)).length === 5, 5_000);
      await db.close();

      await server.halt();
      const haltedAt = Date.now();
      // Served while the oldest uncommitted settlement is younger than the bound...
      let servedWhileDown = 0;
      let refused: Response | undefined;
      while (Date.now() - haltedAt < MAX_LAG_MS * 4) {
        const res = await serve();
        if (res.status === 200) {
          servedWhileDown++;
          await res.text();
        } else {
          refused = res;
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(servedWhileDown, 'requests were served while PostgreSQL was down, up to the bound').toBeGreaterThan(0);
      // ...then refused, clearly, before any money is held.
      expect(refused?.status).toBe(503);
      expect(Date.now() - haltedAt).toBeGreaterThanOrEqual(MAX_LAG_MS);
      const body = (await refused?.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('usage_records_unavailable');
      expect(body.error.message).toMatch(/try again/);
      expect(refused?.headers.get('retry-after')).toBe('5');
      const anthropic = await message(gw.url, secret);
      expect(anthropic.status).toBe(503);
      const aBody = (await anthropic.json()) as { type: string; error: { type: string; message: string } };
      expect(aBody.type).toBe('error');
      expect(aBody.error.message).toMatch(/Usage records cannot be saved/);
      // The last served answer may still be settling; a refused request must leave nothing held after it.
      await waitFor('no hold left (a refused request holds nothing)', async () => (await backend.ledger.balance(accountId)).held === 0, 5_000);

      // PostgreSQL returns: the gateway catches up and serves again by itself.
      await server.resume();
      db = await openPostgres(dbUrl, { max: 2 });
      await waitFor('the backlog after PostgreSQL returned', async () => (await usageRows(db, accountId)).length === served.length, 15_000);
      const after = await serve();
      expect(after.status).toBe(200);
      await after.text();
      await waitFor('the last record', async () => (await usageRows(db, accountId)).length === served.length, 5_000);

      const rows = await usageRows(db, accountId);
      expect(rows.map((r) => r.request_id)).toEqual([...served].sort());
      const spend = await backend.ledger.keySpend(accountId, keyId);
      expect(rows.reduce((s, r) => s + r.cost, 0)).toBe(spend.lifetimeSpent);
      // The usage postings count every charged record once and sum to what was charged.
      const entries = await db.query<{ n: number; total: number }>(
        `SELECT COALESCE(sum(split_part(memo, ' ', 1)::int), 0)::int AS n, COALESCE(-sum(amount), 0)::bigint AS total FROM ledger_entries WHERE account_id = $1 AND kind = 'usage'`,
        [accountId],
      );
      expect(entries.rows[0]).toEqual({ n: rows.filter((r) => r.cost > 0).length, total: spend.lifetimeSpent });
      const report = await reconcile(reconcileSources(db, backend, new RedisJournalStream(redis, redisKeys(namespace)), undefined), [accountId]);
      expect(report.differences).toEqual([]);
      await gw.kill();
    } finally {
      await db.close().catch(() => undefined);
      await simulator.close();
      await redis.quit();
      await server.stop();
    }
  }, 90_000);
});
