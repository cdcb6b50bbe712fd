// Group commit of settlements (src/billing/settlement-batch.ts): settlements of one slot that arrive
// within the window go as one script call, each charged exactly as alone; one settlement's error stays
// its own; repeats inside a batch are duplicates; a window of 0 sends each alone.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRedisBackend, type Backend } from '../../src/billing/backends.js';
import type { SettlementRequest } from '../../src/billing/ledger.js';
import { RedisLedger } from '../../src/billing/redis-ledger.js';
import { redisKeys } from '../../src/billing/redis-keys.js';

let redis: Redis;
let admin: Redis;
const namespaces: string[] = [];

beforeAll(() => {
  redis = new Redis(inject('redisUrl'));
  admin = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  for (const ns of namespaces) {
    const keys = await admin.keys(`${ns}*`);
    for (let i = 0; i < keys.length; i += 500) await admin.del(...keys.slice(i, i + 500));
  }
  await Promise.all([redis.quit(), admin.quit()]);
});

/** Script calls Redis has run so far (EVALSHA and EVAL), from INFO commandstats. */
async function scriptCalls(): Promise<number> {
  const info = await admin.info('commandstats');
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(m[2]);
  return calls;
}

async function world(settleBatchMs: number): Promise<{ backend: Backend; ledger: RedisLedger; accountId: string; keyId: string }> {
  const ns = `t-settle-batch-${randomBytes(4).toString('hex')}`;
  namespaces.push(ns);
  const backend = createRedisBackend({ redis, namespace: ns });
  // A ledger of its own over the same keys, with the window under test.
  const ledger = new RedisLedger({ redis, keys: redisKeys(ns), usageMaxRecords: 10_000, markerTtlSeconds: 3600, now: Date.now, settleBatchMs });
  const account = await backend.accounts.createAccount('batch');
  const { record } = await backend.accounts.createKey(account.id, {});
  await backend.ledger.credit(account.id, 10_000_000, 'topup');
  return { backend, ledger, accountId: account.id, keyId: record.id };
}

const settlement = (accountId: string, keyId: string, requestId: string, cost: number): SettlementRequest => ({
  requestId,
  accountId,
  keyId,
  cost,
  model: 'm',
  usage: { input: 10, output: 5, cachedInput: 0, reasoning: 0 },
  status: 'completed',
  latencyMs: 3,
});

describe('group commit of settlements', () => {
  it('settles 40 concurrent settlements of one account in far fewer script calls, each charged exactly', async () => {
    const { backend, ledger, accountId, keyId } = await world(5);
    const ids = Array.from({ length: 40 }, (_, i) => `req-${i}`);
    for (const id of ids) {
      const r = await ledger.reserve({ requestId: id, accountId, keyId, amount: 1000, holdTtlMs: 60_000 });
      expect(r.admitted).toBe(true);
    }
    const before = await scriptCalls();
    const outcomes = await Promise.all(ids.map((id, i) => ledger.settle(settlement(accountId, keyId, id, 100 + i))));
    const calls = (await scriptCalls()) - before;
    expect(outcomes.map((o) => o.charged)).toEqual(ids.map((_, i) => 100 + i));
    expect(outcomes.map((o) => o.released)).toEqual(ids.map((_, i) => 1000 - (100 + i)));
    expect(outcomes.every((o) => !o.duplicate)).toBe(true);
    // One account is one slot: one batch call (two at most, if the window split them).
    expect(calls).toBeLessThanOrEqual(2);
    const charged = ids.reduce((sum, _, i) => sum + 100 + i, 0);
    const b = await backend.ledger.balance(accountId);
    expect(b).toMatchObject({ held: 0, balance: 10_000_000 - charged });
  });

  it('keeps one settlement\'s error its own, and a repeat inside a batch is a duplicate, not a second charge', async () => {
    const { backend, ledger, accountId, keyId } = await world(5);
    for (const id of ['a', 'b', 'c']) await ledger.reserve({ requestId: id, accountId, keyId, amount: 1000, holdTtlMs: 60_000 });
    const results = await Promise.allSettled([
      ledger.settle(settlement(accountId, keyId, 'a', 300)),
      // The hold of b belongs to keyId; settled under another key, the script refuses it.
      ledger.settle(settlement(accountId, 'another-key', 'b', 300)),
      ledger.settle(settlement(accountId, keyId, 'c', 200)),
      ledger.settle(settlement(accountId, keyId, 'c', 200)),
    ]);
    expect(results[0]).toMatchObject({ status: 'fulfilled', value: { charged: 300, duplicate: false } });
    expect(results[1].status).toBe('rejected');
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/another key/);
    const cs = [results[2], results[3]].map((r) => (r as PromiseFulfilledResult<{ charged: number; duplicate: boolean }>).value);
    expect(cs.filter((c) => c.duplicate)).toHaveLength(1);
    expect(cs.filter((c) => !c.duplicate)).toEqual([expect.objectContaining({ charged: 200 })]);
    // b is still held; settled under its own key it is charged once.
    expect(await ledger.settle(settlement(accountId, keyId, 'b', 300))).toMatchObject({ charged: 300, duplicate: false });
    expect(await backend.ledger.balance(accountId)).toMatchObject({ held: 0, balance: 10_000_000 - 800 });
  });

  it('spreads settlements of many accounts into one call per slot, and a window of 0 sends each alone', async () => {
    for (const windowMs of [5, 0]) {
      const worlds = await Promise.all(Array.from({ length: 6 }, () => world(windowMs)));
      for (const w of worlds) {
        for (const id of ['x', 'y', 'z']) await w.ledger.reserve({ requestId: id, accountId: w.accountId, keyId: w.keyId, amount: 500, holdTtlMs: 60_000 });
      }
      const before = await scriptCalls();
      const outcomes = await Promise.all(worlds.flatMap((w) => ['x', 'y', 'z'].map((id) => w.ledger.settle(settlement(w.accountId, w.keyId, id, 50)))));
      const calls = (await scriptCalls()) - before;
      expect(outcomes.every((o) => o.charged === 50 && !o.duplicate)).toBe(true);
      // Six accounts: six slots (at most), so at most six calls batched; eighteen alone.
      if (windowMs > 0) expect(calls).toBeLessThanOrEqual(6);
      else expect(calls).toBe(18);
      for (const w of worlds) expect(await w.backend.ledger.balance(w.accountId)).toMatchObject({ held: 0, balance: 10_000_000 - 150 });
    }
  });
});
