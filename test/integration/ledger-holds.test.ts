// The ledger-wide holds sample behind the tollgate_holds_outstanding / tollgate_held_micro_usd gauges,
// for both ledgers (memory and real Redis): what counts as outstanding through reserve, refusal, retry,
// settlement, reaping and late settlement, across accounts; and the reaper reporting it each tick.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createMemoryBackend, createRedisBackend, type Backend } from '../../src/billing/backends.js';
import type { HoldsSummary, SettlementRequest } from '../../src/billing/ledger.js';
import { startReaper } from '../../src/billing/reaper.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-holds');

// A namespace per backend: the sample covers a whole ledger, so tests must not see each other's holds.
let fixtureNo = 0;
const backends: Array<[string, () => Backend]> = [
  ['memory', () => createMemoryBackend()],
  ['redis', () => createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-${++fixtureNo}` })],
];

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);
let seq = 0;
const rid = (): string => `req_${++seq}_${randomBytes(3).toString('hex')}`;

async function account(b: Backend, balance: number, caps: { lifetimeCap?: number } = {}) {
  const acct = await b.accounts.createAccount('t');
  const { record } = await b.accounts.createKey(acct.id, caps);
  await b.ledger.credit(acct.id, balance, `initial-${acct.id}`);
  return { accountId: acct.id, keyId: record.id };
}

function settlement(a: { accountId: string; keyId: string }, requestId: string, cost: number): SettlementRequest {
  return {
    requestId, accountId: a.accountId, keyId: a.keyId, model: 'm1',
    usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost, status: 'completed', latencyMs: 1, now: T0,
  };
}

describe.each(backends)('holds summary (%s)', (_name, make) => {
  it('counts every outstanding hold and its amount, across accounts, exactly', async () => {
    const b = make();
    expect(await b.ledger.holdsSummary()).toEqual<HoldsSummary>({ count: 0, held: 0 });
    const x = await account(b, 10_000);
    const y = await account(b, 10_000, { lifetimeCap: 500 });
    const hold = (a: typeof x, amount: number, requestId = rid(), ttl = 60_000) =>
      b.ledger.reserve({ requestId, accountId: a.accountId, keyId: a.keyId, amount, holdTtlMs: ttl, now: T0 });

    const x1 = rid();
    expect(await hold(x, 1_000, x1)).toEqual({ admitted: true });
    expect(await hold(x, 1_000, x1)).toEqual({ admitted: true }); // a retried reserve holds once
    const x2 = rid();
    await hold(x, 2_500, x2, 1_000);
    const y1 = rid();
    await hold(y, 300, y1);
    // Refused reservations hold nothing.
    expect((await hold(y, 201)).admitted).toBe(false);
    expect((await hold(x, 1_000_000)).admitted).toBe(false);
    expect(await b.ledger.holdsSummary()).toEqual({ count: 3, held: 3_800 });

    // Settling releases the whole hold, whatever it charged.
    await b.ledger.settle(settlement(x, x1, 10));
    expect(await b.ledger.holdsSummary()).toEqual({ count: 2, held: 2_800 });

    // A reaped hold is no longer outstanding; its late settlement does not bring it back.
    expect(await b.ledger.reapExpired(T0 + 1_000)).toBe(1);
    expect(await b.ledger.holdsSummary()).toEqual({ count: 1, held: 300 });
    expect((await b.ledger.settle(settlement(x, x2, 100))).late).toBe(true);
    expect(await b.ledger.holdsSummary()).toEqual({ count: 1, held: 300 });

    await b.ledger.settle(settlement(y, y1, 300));
    expect(await b.ledger.holdsSummary()).toEqual({ count: 0, held: 0 });
    // The sample agrees with the per-account books.
    for (const a of [x, y]) expect((await b.ledger.balance(a.accountId)).held).toBe(0);
  });

  it('the reaper reports the sample after each pass, with returned holds already gone', async () => {
    const b = make();
    const x = await account(b, 10_000);
    const short = rid();
    const long = rid();
    await b.ledger.reserve({ requestId: short, accountId: x.accountId, keyId: x.keyId, amount: 700, holdTtlMs: 1 });
    await b.ledger.reserve({ requestId: long, accountId: x.accountId, keyId: x.keyId, amount: 450, holdTtlMs: 60_000 });
    const samples: HoldsSummary[] = [];
    const reaped: number[] = [];
    const reaper = startReaper(b.ledger, { intervalMs: 20, onReaped: (n) => reaped.push(n), onHolds: (s) => samples.push(s) });
    const waitFor = async (what: string, ok: () => boolean): Promise<void> => {
      for (let i = 0; i < 250 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
      if (!ok()) throw new Error(`timed out waiting for ${what}; samples ${JSON.stringify(samples)}`);
    };
    try {
      await waitFor('a first sample', () => samples.length > 0);
      // The expired hold is returned in the pass that reports the first sample.
      expect(reaped).toEqual([1]);
      expect(samples[0]).toEqual({ count: 1, held: 450 });
      await b.ledger.settle(settlement(x, long, 200));
      const settledAt = samples.length;
      await waitFor('a sample after the settlement', () => samples.length > settledAt + 1);
      expect(samples.at(-1)).toEqual({ count: 0, held: 0 });
    } finally {
      reaper.stop();
    }
  });

  it('the Redis sample reads every account of a large reaper index once', async () => {
    // Only meaningful for Redis (several ZSCAN steps); the memory ledger runs it as a plain check.
    const b = make();
    const accounts = await Promise.all(Array.from({ length: 1_200 }, () => account(b, 1_000)));
    await Promise.all(
      accounts.map((a, i) => b.ledger.reserve({ requestId: rid(), accountId: a.accountId, keyId: a.keyId, amount: 1 + (i % 7), holdTtlMs: 60_000 })),
    );
    const expectedHeld = accounts.reduce((s, _a, i) => s + 1 + (i % 7), 0);
    expect(await b.ledger.holdsSummary()).toEqual({ count: 1_200, held: expectedHeld });
  }, 60_000);
});
