// Money in and refunds with PostgreSQL first, on both hot paths (memory, Redis): a credit or refund
// applied twice, or racing, moves money once, on the record and on the hot path; a refund's amount is
// the charge of record and only the account that made the request can have it back; a movement whose
// hot-path step failed (Redis down after the commit) is applied by the sweeper, once.
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { createMemoryBackend, createRedisBackend, type HotBackend } from '../../src/billing/backends.js';
import { isJournalingLedger, type Ledger } from '../../src/billing/ledger.js';
import { commitJournal, journalEntryOf } from '../../src/record/journal.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const record = useTestDatabase('recmove');
const testRedis = useTestRedis('t-recmove');
let nsCounter = 0;

interface World {
  hot: HotBackend;
  ledger: RecordedLedger;
  accounts: ReturnType<typeof recordedBackend>['accounts'];
}

function world(hot: HotBackend): World {
  // The timer stays off (an hour); the tests sweep by hand, with no grace.
  const b = recordedBackend(hot, record.db, 'tg', { movementSweepMs: 3_600_000, movementSweepGraceMs: 0 });
  if (!(b.ledger instanceof RecordedLedger)) throw new Error('the recorded backend has a RecordedLedger');
  return { hot, ledger: b.ledger, accounts: b.accounts };
}

const hotPaths: Array<[string, () => HotBackend]> = [
  ['memory', () => createMemoryBackend({ keyMarker: 'tg' })],
  ['redis', () => createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-${nsCounter++}`, keyMarker: 'tg' })],
];

async function recordBalance(accountId: string): Promise<number> {
  return (await record.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [accountId])).rows[0]?.balance ?? 0;
}

async function entries(accountId: string, kind: string): Promise<Array<{ amount: number; applied: boolean }>> {
  return (
    await record.db.query<{ amount: number; applied: boolean }>(
      'SELECT amount, applied_at IS NOT NULL AS applied FROM ledger_entries WHERE account_id = $1 AND kind = $2 ORDER BY id',
      [accountId, kind],
    )
  ).rows;
}

let requestCounter = 0;

/** A request reserved, settled on the hot path and journaled to the record, as the gateway does it. */
async function settledRequest(ledger: Ledger, accountId: string, keyId: string, cost: number): Promise<string> {
  const requestId = `req_mv_${process.pid}_${requestCounter++}`;
  // The gateway's JournaledLedger asks the same of the hot path: settlements come back with their journal mark.
  if (isJournalingLedger(ledger)) ledger.journalSettlements();
  const reserved = await ledger.reserve({ requestId, accountId, keyId, amount: cost + 500, holdTtlMs: 60_000 });
  expect(reserved.admitted).toBe(true);
  const req = { requestId, accountId, keyId, model: 'm', usage: { input: 10, output: 5, cachedInput: 0, reasoning: 0 }, cost, status: 'completed' as const, latencyMs: 3 };
  const outcome = await ledger.settle(req);
  const entry = journalEntryOf(req, outcome);
  if (entry === undefined) throw new Error('a first settlement is journaled');
  await commitJournal(record.db, [entry]);
  return requestId;
}

async function fundedAccount(w: World, usd = 5_000_000): Promise<{ accountId: string; keyId: string }> {
  const acct = await w.accounts.createAccount('mv');
  const key = await w.accounts.createKey(acct.id, { name: 'k' });
  await w.ledger.credit(acct.id, usd, `fund-${acct.id}`);
  return { accountId: acct.id, keyId: key.record.id };
}

describe.each(hotPaths)('movements, hot path %s', (_name, makeHot) => {
  it('credits repeated and racing (property): each idempotency key moves money once, on the record and the hot path', async () => {
    const w = world(makeHot());
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fc.nat(5), { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 5 }), async (waves) => {
        const { accountId } = await fundedAccount(w, 1);
        // Each wave's credits run concurrently; a key's amount is fixed, so repeats are true repeats.
        for (const wave of waves) {
          await Promise.all(wave.map((k) => w.ledger.credit(accountId, 1_000 * (k + 1), `c-${accountId}-${k}`)));
        }
        const keys = new Set(waves.flat());
        const expected = 1 + [...keys].reduce((s, k) => s + 1_000 * (k + 1), 0);
        expect((await w.ledger.balance(accountId)).balance).toBe(expected);
        expect(await recordBalance(accountId)).toBe(expected);
        const credits = await entries(accountId, 'admin_credit');
        expect(credits).toHaveLength(keys.size + 1);
        expect(credits.every((e) => e.applied)).toBe(true);
        expect((await w.ledger.audit(accountId)).difference).toBe(0);
      }),
      { numRuns: 12 },
    );
  });

  it('refunds the charge of record once, however often or concurrently it is asked', async () => {
    const w = world(makeHot());
    const { accountId, keyId } = await fundedAccount(w);
    const requestId = await settledRequest(w.ledger, accountId, keyId, 1_234);
    const before = (await w.ledger.balance(accountId)).balance;
    expect(before).toBe(5_000_000 - 1_234);
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => w.ledger.refund(accountId, requestId)));
    expect(outcomes.filter((o) => o.refunded === 1_234 && !o.duplicate)).toHaveLength(1);
    expect(outcomes.filter((o) => o.duplicate && o.refunded === 0)).toHaveLength(5);
    expect(await w.ledger.refund(accountId, requestId)).toEqual({ refunded: 0, unknown: false, duplicate: true });
    expect((await w.ledger.balance(accountId)).balance).toBe(5_000_000);
    expect(await recordBalance(accountId)).toBe(5_000_000);
    expect(await entries(accountId, 'refund')).toEqual([{ amount: 1_234, applied: true }]);
    const usage = await record.db.query<{ refunded: boolean }>('SELECT refunded_at IS NOT NULL AS refunded FROM usage_records WHERE request_id = $1', [requestId]);
    expect(usage.rows).toEqual([{ refunded: true }]);
    expect((await w.ledger.audit(accountId)).difference).toBe(0);
    const totals = await record.db.query<{ refunded: number; charged: number }>('SELECT refunded, charged FROM account_totals WHERE account_id = $1', [accountId]);
    expect(totals.rows[0]).toEqual({ refunded: 1_234, charged: 1_234 });
  });

  it("refuses a refund of another account's request, and of one never recorded; a free request is refunded as 0", async () => {
    const w = world(makeHot());
    const a = await fundedAccount(w);
    const b = await fundedAccount(w);
    const ofA = await settledRequest(w.ledger, a.accountId, a.keyId, 777);
    expect(await w.ledger.refund(b.accountId, ofA)).toEqual({ refunded: 0, unknown: true, duplicate: false });
    expect(await w.ledger.refund(a.accountId, 'req_never')).toEqual({ refunded: 0, unknown: true, duplicate: false });
    expect((await w.ledger.balance(b.accountId)).balance).toBe(5_000_000);
    expect((await w.ledger.balance(a.accountId)).balance).toBe(5_000_000 - 777);
    expect(await entries(b.accountId, 'refund')).toEqual([]);
    expect(await entries(a.accountId, 'refund')).toEqual([]);
    const free = await settledRequest(w.ledger, a.accountId, a.keyId, 0);
    expect(await w.ledger.refund(a.accountId, free)).toEqual({ refunded: 0, unknown: false, duplicate: false });
    expect(await w.ledger.refund(a.accountId, free)).toEqual({ refunded: 0, unknown: false, duplicate: true });
    expect(await entries(a.accountId, 'refund')).toEqual([]);
    // a's own request is still refundable after b's attempt.
    expect((await w.ledger.refund(a.accountId, ofA)).refunded).toBe(777);
  });
});

describe('Redis down between the commit and the hot-path step', () => {
  it('the movement stays on the record, and the sweeper applies it once when Redis is back', async () => {
    // The gateway's connection, which goes down; a second one reads Redis meanwhile.
    const flaky = new Redis(inject('redisUrl'), { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true });
    flaky.on('error', () => undefined);
    await flaky.connect();
    try {
      const namespace = `${testRedis.namespace}-down`;
      const pending: string[] = [];
      const w = world(createRedisBackend({ redis: flaky, namespace, keyMarker: 'tg' }));
      w.ledger = new RecordedLedger(w.hot.ledger, record.db, { movementSweepMs: 3_600_000, movementSweepGraceMs: 0, onHotPathPending: (_e, m) => pending.push(m.idempotencyKey) });
      const reader = createRedisBackend({ redis: testRedis.redis, namespace, keyMarker: 'tg' }).ledger;
      const { accountId, keyId } = await fundedAccount(w);
      const requestId = await settledRequest(w.ledger, accountId, keyId, 2_000);
      expect((await reader.balance(accountId)).balance).toBe(4_998_000);

      flaky.disconnect();
      expect(await w.ledger.credit(accountId, 300_000, 'while-down')).toBe(true);
      expect((await w.ledger.refund(accountId, requestId)).refunded).toBe(2_000);
      expect(pending).toEqual(['while-down', `refund:${requestId}`]);
      // On the record, not yet on the hot path.
      expect(await recordBalance(accountId)).toBe(5_300_000);
      expect((await reader.balance(accountId)).balance).toBe(4_998_000);
      expect((await entries(accountId, 'refund')).map((e) => e.applied)).toEqual([false]);
      expect(await w.ledger.sweepMovements()).toBe(0);

      await flaky.connect();
      // Two gateways' sweepers at once, and a late retry of the original step: still once.
      const other = world(createRedisBackend({ redis: testRedis.redis, namespace, keyMarker: 'tg' }));
      const swept = await Promise.all([w.ledger.sweepMovements(), other.ledger.sweepMovements()]);
      expect(swept.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(2);
      await w.ledger.applyCommitted(
        { accountId, kind: 'admin_credit', amount: 300_000, idempotencyKey: 'while-down' },
        { entryId: 0, recordTx: '0', duplicate: false, applied: false },
      );
      expect((await reader.balance(accountId)).balance).toBe(5_300_000);
      expect(await recordBalance(accountId)).toBe(5_300_000);
      expect((await entries(accountId, 'refund')).map((e) => e.applied)).toEqual([true]);
      expect(await w.ledger.sweepMovements()).toBe(0);
      expect((await reader.audit(accountId)).difference).toBe(0);
    } finally {
      flaky.disconnect();
    }
  });
});
