// One conformance suite for both ledgers (memory and real Redis): reserve, settle, refuse, reap, credit, refund, audit.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AccountStore, KeyCaps } from '../../src/accounts/account-store.js';
import { createMemoryBackend, createRedisBackend, type Backend } from '../../src/billing/backends.js';
import type { Ledger, SettlementRequest } from '../../src/billing/ledger.js';
import { startReaper } from '../../src/billing/reaper.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-ledger');

// Each fixture gets its own namespace, as each memory backend has its own state: reapExpired sweeps a whole namespace.
let fixtureNo = 0;
type Make = (opts?: { usageMaxRecords?: number }) => Backend;
const backends: Array<[string, Make]> = [
  ['memory', (o) => createMemoryBackend({ ...o })],
  ['redis', (o) => createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-${++fixtureNo}`, ...o })],
];

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);

interface Fixture {
  accounts: AccountStore;
  ledger: Ledger;
  accountId: string;
  keyId: string;
}

async function fixture(make: Make, balance: number, caps: KeyCaps = {}, opts?: { usageMaxRecords?: number }): Promise<Fixture> {
  const { accounts, ledger } = make(opts);
  const acct = await accounts.createAccount('t');
  const { record } = await accounts.createKey(acct.id, caps);
  if (balance > 0) await ledger.credit(acct.id, balance, `initial-${acct.id}`);
  return { accounts, ledger, accountId: acct.id, keyId: record.id };
}

let seq = 0;
const rid = (): string => `req_${++seq}_${randomBytes(3).toString('hex')}`;

function settlement(f: Fixture, requestId: string, cost: number, now = T0): SettlementRequest {
  return {
    requestId, accountId: f.accountId, keyId: f.keyId, model: 'm1',
    usage: { input: 10, output: 20, cachedInput: 2, reasoning: 3 }, cost, status: 'completed', latencyMs: 12, now,
  };
}

async function reserve(f: Fixture, amount: number, opts: { now?: number; ttl?: number; requestId?: string; keyId?: string } = {}) {
  const requestId = opts.requestId ?? rid();
  const outcome = await f.ledger.reserve({
    requestId, accountId: f.accountId, keyId: opts.keyId ?? f.keyId, amount, holdTtlMs: opts.ttl ?? 60_000, now: opts.now ?? T0,
  });
  return { requestId, outcome };
}

async function expectBooksBalance(f: Fixture): Promise<void> {
  const audit = await f.ledger.audit(f.accountId);
  expect(audit.difference).toBe(0);
  expect(audit.drawnDown).toBe(audit.credited + audit.refunded - audit.balance);
}

describe.each(backends)('ledger (%s)', (_name, make) => {
  it('holds the worst case, charges the actual cost and releases the rest', async () => {
    const f = await fixture(make, 1_000_000, { lifetimeCap: 500_000, monthlyCap: 400_000 });
    const { requestId, outcome } = await reserve(f, 300_000);
    expect(outcome).toEqual({ admitted: true });
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 1_000_000, held: 300_000 });
    expect(await f.ledger.keySpend(f.accountId, f.keyId, T0)).toEqual({ lifetimeSpent: 0, lifetimeHeld: 300_000, monthSpent: 0, monthHeld: 300_000 });
    const s = await f.ledger.settle(settlement(f, requestId, 123_456));
    expect(s).toMatchObject({ charged: 123_456, released: 176_544, duplicate: false, late: false });
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 876_544, held: 0 });
    expect(await f.ledger.keySpend(f.accountId, f.keyId, T0)).toEqual({ lifetimeSpent: 123_456, lifetimeHeld: 0, monthSpent: 123_456, monthHeld: 0 });
    const usage = await f.ledger.listUsage(f.accountId);
    expect(usage).toEqual([
      {
        requestId, accountId: f.accountId, keyId: f.keyId, model: 'm1',
        usage: { input: 10, output: 20, cachedInput: 2, reasoning: 3 }, cost: 123_456, status: 'completed', latencyMs: 12, time: T0,
      },
    ]);
    await expectBooksBalance(f);
  });

  it('keeps the usage record\'s cache writes by lifetime apart from the reads', async () => {
    const f = await fixture(make, 1_000_000);
    const { requestId } = await reserve(f, 300_000);
    const usage = { input: 100, output: 20, cachedInput: 30, cacheWrite5m: 25, cacheWrite1h: 15, reasoning: 0 };
    await f.ledger.settle({ ...settlement(f, requestId, 1_234), usage });
    const [rec] = await f.ledger.listUsage(f.accountId);
    expect(rec?.usage).toEqual(usage);
  });

  it('never charges more than was held', async () => {
    const f = await fixture(make, 1000);
    const { requestId } = await reserve(f, 400);
    expect(await f.ledger.settle(settlement(f, requestId, 999))).toMatchObject({ charged: 400, released: 0, duplicate: false, late: false });
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 600, held: 0 });
    await expectBooksBalance(f);
  });

  it('refuses on the balance with exact amounts', async () => {
    const f = await fixture(make, 1000, { lifetimeCap: 5000, monthlyCap: 2000 });
    expect((await reserve(f, 400)).outcome.admitted).toBe(true);
    expect((await reserve(f, 700)).outcome).toMatchObject({
      admitted: false, reason: 'insufficient_balance', needed: 700, available: 600, availableOverall: 600,
    });
    const empty = await fixture(make, 0);
    expect((await reserve(empty, 1)).outcome).toMatchObject({
      admitted: false, reason: 'insufficient_balance', needed: 1, available: 0, availableOverall: 0,
    });
  });

  it('refuses on the lifetime cap, counting spend and holds', async () => {
    const f = await fixture(make, 1_000_000, { lifetimeCap: 1000 });
    const a = await reserve(f, 600);
    await f.ledger.settle(settlement(f, a.requestId, 500));
    expect((await reserve(f, 300)).outcome.admitted).toBe(true);
    expect((await reserve(f, 201)).outcome).toMatchObject({
      admitted: false, reason: 'key_lifetime_cap_reached', needed: 201, available: 200, availableOverall: 200,
    });
    expect((await reserve(f, 200)).outcome.admitted).toBe(true);
    expect((await reserve(f, 1)).outcome).toMatchObject({ reason: 'key_lifetime_cap_reached', available: 0 });
  });

  it('refuses on the monthly cap; the next UTC month starts fresh', async () => {
    const f = await fixture(make, 1_000_000, { monthlyCap: 1000 });
    const jan = Date.UTC(2026, 0, 31, 23, 59, 59, 999);
    const feb = Date.UTC(2026, 1, 1, 0, 0, 0, 0);
    expect((await reserve(f, 800, { now: jan })).outcome.admitted).toBe(true);
    expect((await reserve(f, 300, { now: jan })).outcome).toMatchObject({
      admitted: false, reason: 'key_monthly_cap_reached', needed: 300, available: 200, availableOverall: 200,
    });
    expect((await reserve(f, 1000, { now: feb })).outcome.admitted).toBe(true);
    expect((await reserve(f, 1, { now: feb })).outcome).toMatchObject({ reason: 'key_monthly_cap_reached', available: 0 });
  });

  it('a hold made in one month settles into that month', async () => {
    const f = await fixture(make, 1_000_000, { monthlyCap: 1000 });
    const jan = Date.UTC(2026, 0, 31, 23, 59, 59, 900);
    const feb = Date.UTC(2026, 1, 1, 0, 0, 1, 0);
    const { requestId } = await reserve(f, 900, { now: jan });
    expect((await f.ledger.settle(settlement(f, requestId, 700, feb))).charged).toBe(700);
    expect(await f.ledger.keySpend(f.accountId, f.keyId, jan)).toEqual({ lifetimeSpent: 700, lifetimeHeld: 0, monthSpent: 700, monthHeld: 0 });
    expect(await f.ledger.keySpend(f.accountId, f.keyId, feb)).toEqual({ lifetimeSpent: 700, lifetimeHeld: 0, monthSpent: 0, monthHeld: 0 });
    expect((await reserve(f, 1000, { now: feb })).outcome.admitted).toBe(true);
    expect((await reserve(f, 301, { now: jan })).outcome).toMatchObject({ reason: 'key_monthly_cap_reached', available: 300 });
  });

  it('names the limit with the least left, whichever order the limits would be checked in', async () => {
    // Every amount below exceeds more than one limit: the one named is the one that binds.
    const f = await fixture(make, 100, { lifetimeCap: 50, monthlyCap: 20 });
    expect((await reserve(f, 150)).outcome).toMatchObject({ admitted: false, reason: 'key_monthly_cap_reached', needed: 150, available: 20, availableOverall: 20 });
    expect((await reserve(f, 60)).outcome).toMatchObject({ admitted: false, reason: 'key_monthly_cap_reached', needed: 60, available: 20, availableOverall: 20 });
    expect((await reserve(f, 21)).outcome).toMatchObject({ admitted: false, reason: 'key_monthly_cap_reached', needed: 21, available: 20, availableOverall: 20 });
    expect((await reserve(f, 20)).outcome).toEqual({ admitted: true });
  });

  it('both caps, the monthly one binds: spend this month leaves it below the lifetime cap', async () => {
    const f = await fixture(make, 1_000_000, { lifetimeCap: 10_000, monthlyCap: 8_000 });
    const a = await reserve(f, 5_000);
    await f.ledger.settle(settlement(f, a.requestId, 5_000));
    // Left: balance 995,000, lifetime 5,000, monthly 3,000.
    expect((await reserve(f, 6_000)).outcome).toMatchObject({ admitted: false, reason: 'key_monthly_cap_reached', needed: 6_000, available: 3_000, availableOverall: 3_000 });
    expect((await reserve(f, 3_001)).outcome).toMatchObject({ admitted: false, reason: 'key_monthly_cap_reached', needed: 3_001, available: 3_000, availableOverall: 3_000 });
    // Holds count as well as spend.
    expect((await reserve(f, 1_000)).outcome.admitted).toBe(true);
    expect((await reserve(f, 4_500)).outcome).toMatchObject({ reason: 'key_monthly_cap_reached', available: 2_000, availableOverall: 2_000 });
  });

  it('both caps, the lifetime one binds: last month\'s spend counts against it only', async () => {
    const f = await fixture(make, 1_000_000, { lifetimeCap: 10_000, monthlyCap: 8_000 });
    const jan = Date.UTC(2026, 0, 15);
    const feb = Date.UTC(2026, 1, 15);
    const a = await reserve(f, 7_000, { now: jan });
    await f.ledger.settle(settlement(f, a.requestId, 7_000, jan));
    // In February: balance 993,000, lifetime 3,000, monthly 8,000.
    expect((await reserve(f, 9_000, { now: feb })).outcome).toMatchObject({ admitted: false, reason: 'key_lifetime_cap_reached', needed: 9_000, available: 3_000, availableOverall: 3_000 });
    expect((await reserve(f, 3_001, { now: feb })).outcome).toMatchObject({ admitted: false, reason: 'key_lifetime_cap_reached', needed: 3_001, available: 3_000, availableOverall: 3_000 });
    expect((await reserve(f, 3_000, { now: feb })).outcome).toEqual({ admitted: true });
  });

  it('both caps, the balance binds: it is named though both caps would refuse too', async () => {
    const f = await fixture(make, 500, { lifetimeCap: 900, monthlyCap: 700 });
    expect((await reserve(f, 1_000)).outcome).toMatchObject({ admitted: false, reason: 'insufficient_balance', needed: 1_000, available: 500, availableOverall: 500 });
    expect((await reserve(f, 501)).outcome).toMatchObject({ admitted: false, reason: 'insufficient_balance', needed: 501, available: 500, availableOverall: 500 });
    expect((await reserve(f, 500)).outcome).toEqual({ admitted: true });
  });

  it('on a tie, names the balance before the lifetime cap before the monthly cap', async () => {
    const all = await fixture(make, 300, { lifetimeCap: 300, monthlyCap: 300 });
    expect((await reserve(all, 301)).outcome).toMatchObject({ admitted: false, reason: 'insufficient_balance', needed: 301, available: 300, availableOverall: 300 });
    const caps = await fixture(make, 1_000, { lifetimeCap: 300, monthlyCap: 300 });
    expect((await reserve(caps, 301)).outcome).toMatchObject({ admitted: false, reason: 'key_lifetime_cap_reached', needed: 301, available: 300, availableOverall: 300 });
    const exhausted = await fixture(make, 0, { lifetimeCap: 0, monthlyCap: 0 });
    expect((await reserve(exhausted, 1)).outcome).toMatchObject({ admitted: false, reason: 'insufficient_balance', needed: 1, available: 0, availableOverall: 0 });
  });

  it('refuses revoked and unknown keys; cap changes apply at once', async () => {
    const f = await fixture(make, 1000);
    expect((await reserve(f, 10, { keyId: 'key_nope' })).outcome).toMatchObject({ admitted: false, reason: 'unknown_key' });
    await f.accounts.setKeyCaps(f.accountId, f.keyId, { lifetimeCap: 5 });
    expect((await reserve(f, 10)).outcome).toMatchObject({ reason: 'key_lifetime_cap_reached', available: 5 });
    await f.accounts.setKeyCaps(f.accountId, f.keyId, {});
    expect((await reserve(f, 10)).outcome.admitted).toBe(true);
    await f.accounts.revokeKey(f.accountId, f.keyId);
    expect((await reserve(f, 10)).outcome).toMatchObject({ admitted: false, reason: 'key_revoked', needed: 10, available: 0, availableOverall: 0 });
  });

  it('settles exactly once per request id, and a retried reserve holds once', async () => {
    const f = await fixture(make, 1000);
    const { requestId } = await reserve(f, 500);
    expect((await reserve(f, 500, { requestId })).outcome.admitted).toBe(true);
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 1000, held: 500 });
    const results = await Promise.all([1, 2, 3].map(() => f.ledger.settle(settlement(f, requestId, 100))));
    expect(results.filter((r) => !r.duplicate)).toMatchObject([{ charged: 100, released: 400, duplicate: false, late: false }]);
    expect(results.filter((r) => r.duplicate)).toEqual([
      { charged: 0, released: 0, duplicate: true, late: false },
      { charged: 0, released: 0, duplicate: true, late: false },
    ]);
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 900, held: 0 });
    expect(await f.ledger.listUsage(f.accountId)).toHaveLength(1);
    // A settlement for a request that was never reserved changes nothing.
    expect(await f.ledger.settle(settlement(f, 'never-reserved', 50))).toMatchObject({ charged: 0, duplicate: true });
    await expectBooksBalance(f);
  });

  it('reaps expired holds; a late settlement charges once', async () => {
    const f = await fixture(make, 1000);
    const { requestId } = await reserve(f, 400, { ttl: 1000 });
    const other = await reserve(f, 100, { ttl: 60_000 });
    expect(await f.ledger.reapExpired(T0 + 999)).toBe(0);
    expect(await f.ledger.reapExpired(T0 + 1000)).toBe(1);
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 1000, held: 100 });
    expect((await f.ledger.audit(f.accountId)).holdsOutstanding).toBe(1);
    expect(await f.ledger.reapExpired(T0 + 2000)).toBe(0);
    expect(await f.ledger.settle(settlement(f, requestId, 300))).toMatchObject({ charged: 300, released: 0, duplicate: false, late: true });
    expect(await f.ledger.settle(settlement(f, requestId, 300))).toMatchObject({ duplicate: true, charged: 0 });
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 700, held: 100 });
    expect(await f.ledger.settle(settlement(f, other.requestId, 50))).toMatchObject({ charged: 50, late: false });
    const usage = await f.ledger.listUsage(f.accountId);
    expect(usage.map((u) => [u.requestId, u.cost])).toEqual([[other.requestId, 50], [requestId, 300]]);
    await expectBooksBalance(f);
  });

  it('a late settlement never takes the balance below zero or a key past its caps', async () => {
    // Balance: the reaped hold's room went to another request.
    const f = await fixture(make, 1000);
    const a = await reserve(f, 1000, { ttl: 10 });
    expect(await f.ledger.reapExpired(T0 + 10)).toBe(1);
    expect((await reserve(f, 800)).outcome.admitted).toBe(true);
    expect(await f.ledger.settle(settlement(f, a.requestId, 1000))).toMatchObject({ charged: 200, released: 0, duplicate: false, late: true });
    expect((await f.ledger.balance(f.accountId)).balance).toBe(800);
    await expectBooksBalance(f);
    // Lifetime cap: fully used by another request meanwhile.
    const g = await fixture(make, 1_000_000, { lifetimeCap: 1000 });
    const b = await reserve(g, 600, { ttl: 10 });
    await g.ledger.reapExpired(T0 + 10);
    const c = await reserve(g, 1000);
    expect(c.outcome.admitted).toBe(true);
    expect(await g.ledger.settle(settlement(g, b.requestId, 500))).toMatchObject({ charged: 0, released: 0, duplicate: false, late: true });
    await g.ledger.settle(settlement(g, c.requestId, 1000));
    expect((await g.ledger.keySpend(g.accountId, g.keyId, T0)).lifetimeSpent).toBe(1000);
    // Monthly cap, in the hold's month.
    const h = await fixture(make, 1_000_000, { monthlyCap: 1000 });
    const d = await reserve(h, 700, { ttl: 10 });
    await h.ledger.reapExpired(T0 + 10);
    await h.ledger.settle(settlement(h, (await reserve(h, 600)).requestId, 600));
    expect(await h.ledger.settle(settlement(h, d.requestId, 700))).toMatchObject({ charged: 400, late: true });
    expect((await h.ledger.keySpend(h.accountId, h.keyId, T0)).monthSpent).toBe(1000);
    await expectBooksBalance(h);
  });

  it('refuses a reused idempotency key with a different amount, and credits nothing for it', async () => {
    const f = await fixture(make, 0);
    expect(await f.ledger.credit(f.accountId, 5_000_000, 'pay_1')).toBe(true);
    await expect(f.ledger.credit(f.accountId, 5_000_001, 'pay_1')).rejects.toThrow(/different amount/);
    await expect(f.ledger.credit(f.accountId, 1, 'pay_1')).rejects.toThrow(/different amount/);
    expect(await f.ledger.credit(f.accountId, 5_000_000, 'pay_1')).toBe(false);
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 5_000_000, held: 0 });
    expect((await f.ledger.audit(f.accountId)).credited).toBe(5_000_000);
  });

  it('credits once per idempotency key', async () => {
    const f = await fixture(make, 0);
    expect(await f.ledger.credit(f.accountId, 5_000_000, 'pay_1')).toBe(true);
    expect(await f.ledger.credit(f.accountId, 5_000_000, 'pay_1')).toBe(false);
    expect(await f.ledger.credit(f.accountId, 7, 'pay_2')).toBe(true);
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 5_000_007, held: 0 });
    await expect(f.ledger.credit(f.accountId, 0, 'pay_3')).rejects.toThrow(RangeError);
    await expect(f.ledger.credit(f.accountId, 1.5, 'pay_4')).rejects.toThrow(RangeError);
    await expect(f.ledger.credit('acct_missing', 5, 'pay_5')).rejects.toThrow(/unknown account/);
    await expect(f.ledger.credit(f.accountId, Number.MAX_SAFE_INTEGER - 5_000_006, 'pay_6')).rejects.toThrow(/largest exact amount/);
    expect(await f.ledger.credit(f.accountId, Number.MAX_SAFE_INTEGER - 5_000_007, 'pay_7')).toBe(true);
    expect((await f.ledger.balance(f.accountId)).balance).toBe(Number.MAX_SAFE_INTEGER);
    await expect(f.ledger.credit(f.accountId, 1, 'pay_8')).rejects.toThrow(RangeError);
    expect((await f.ledger.audit(f.accountId)).credited).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('refunds a settled request once; the audit accounts for it', async () => {
    const f = await fixture(make, 1000);
    const { requestId } = await reserve(f, 500);
    await f.ledger.settle(settlement(f, requestId, 321));
    expect(await f.ledger.refund(f.accountId, requestId)).toEqual({ refunded: 321, unknown: false, duplicate: false });
    expect(await f.ledger.refund(f.accountId, requestId)).toEqual({ refunded: 0, unknown: false, duplicate: true });
    expect(await f.ledger.refund(f.accountId, 'unknown')).toEqual({ refunded: 0, unknown: true, duplicate: false });
    expect(await f.ledger.refund('acct_missing', requestId)).toEqual({ refunded: 0, unknown: true, duplicate: false });
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 1000, held: 0 });
    const [rec] = await f.ledger.listUsage(f.accountId);
    expect(rec).toMatchObject({ requestId, cost: 321, refunded: true });
    expect(await f.ledger.audit(f.accountId)).toEqual({
      accountId: f.accountId, credited: 1000, refunded: 321, balance: 1000, drawnDown: 321, usageTotal: 321, difference: 0, holdsOutstanding: 0,
    });
  });

  it('lists usage per key, newest first, with a limit', async () => {
    const f = await fixture(make, 10_000);
    const second = await f.accounts.createKey(f.accountId);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const keyId = i % 2 === 0 ? f.keyId : second.record.id;
      const r = await reserve(f, 100, { keyId });
      await f.ledger.settle({ ...settlement(f, r.requestId, i + 1), keyId });
      ids.push(r.requestId);
    }
    expect((await f.ledger.listUsage(f.accountId)).map((u) => u.requestId)).toEqual([...ids].reverse());
    expect((await f.ledger.listUsage(f.accountId, { keyId: f.keyId })).map((u) => u.requestId)).toEqual([ids[4], ids[2], ids[0]]);
    expect((await f.ledger.listUsage(f.accountId, { keyId: second.record.id, limit: 2 })).map((u) => u.cost)).toEqual([6, 4]);
  });

  it('keeps a bounded usage log without losing the books', async () => {
    const f = await fixture(make, 1_000_000, {}, { usageMaxRecords: 5 });
    for (let i = 0; i < 23; i++) {
      const r = await reserve(f, 100);
      await f.ledger.settle(settlement(f, r.requestId, 10 + i));
    }
    const usage = await f.ledger.listUsage(f.accountId, { limit: 100 });
    expect(usage.length).toBeGreaterThanOrEqual(5);
    expect(usage.length).toBeLessThanOrEqual(6);
    expect(usage[0]?.cost).toBe(32);
    const audit = await f.ledger.audit(f.accountId);
    expect(audit.usageTotal).toBe(Array.from({ length: 23 }, (_, i) => 10 + i).reduce((a, b) => a + b, 0));
    expect(audit.difference).toBe(0);
  });

  it('is exact for amounts near 2^53', async () => {
    const big = 9_007_199_254_740_000;
    const f = await fixture(make, big, { lifetimeCap: big - 1 });
    const { requestId, outcome } = await reserve(f, 4_503_599_627_370_497);
    expect(outcome.admitted).toBe(true);
    expect(await f.ledger.settle(settlement(f, requestId, 4_503_599_627_370_493))).toMatchObject({ charged: 4_503_599_627_370_493, released: 4 });
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: big - 4_503_599_627_370_493, held: 0 });
    expect((await reserve(f, 4_503_599_627_370_000)).outcome).toMatchObject({
      admitted: false, reason: 'key_lifetime_cap_reached', needed: 4_503_599_627_370_000,
      available: 4_503_599_627_369_506, availableOverall: 4_503_599_627_369_506,
    });
    await expectBooksBalance(f);
  });

  it('the reaper returns holds on a timer', async () => {
    const f = await fixture(make, 1000);
    await f.ledger.reserve({ requestId: rid(), accountId: f.accountId, keyId: f.keyId, amount: 250, holdTtlMs: 1 });
    const reaped: number[] = [];
    const reaper = startReaper(f.ledger, { intervalMs: 20, onReaped: (n) => reaped.push(n) });
    try {
      // Wait for both: the hold gone and the reaper's report of it (which follows the ledger call).
      for (let i = 0; i < 100 && ((await f.ledger.balance(f.accountId)).held > 0 || reaped.length === 0); i++) await new Promise((r) => setTimeout(r, 20));
    } finally {
      reaper.stop();
    }
    expect(await f.ledger.balance(f.accountId)).toEqual({ balance: 1000, held: 0 });
    expect(reaped.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
  });
});
