// Per-key rate limits inside the reservation, for both ledgers (memory and real Redis running
// reserve.lua / settle.lua): requests and tokens per window and requests in flight, the account's
// default for keys and a key's own override, the token limit's worst case given back at settlement,
// and every way a hold ends (settle, zero release, reaper) freeing its place in flight. Windows are set
// by the `now` each call passes, so nothing here depends on the wall clock.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createMemoryBackend, createRedisBackend, type Backend } from '../../src/billing/backends.js';
import type { ReservationOutcome, SettlementRequest } from '../../src/billing/ledger.js';
import type { RateLimits } from '../../src/accounts/rate-limits.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-rate');
let fixtureNo = 0;
const backends: Array<[string, () => Backend]> = [
  ['memory', () => createMemoryBackend()],
  ['redis', () => createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-${++fixtureNo}` })],
];

const WINDOW = 60_000;
// The start of a window: T0 + x stays in it for x < WINDOW.
const T0 = Math.floor(Date.UTC(2026, 10, 21, 12, 0, 0) / WINDOW) * WINDOW;
let seq = 0;
const rid = (): string => `req_${++seq}_${randomBytes(3).toString('hex')}`;

interface Key {
  accountId: string;
  keyId: string;
}

async function account(b: Backend, opts: { own?: RateLimits; defaults?: RateLimits } = {}): Promise<Key> {
  const acct = await b.accounts.createAccount('t');
  if (opts.defaults !== undefined) await b.accounts.setAccountRateLimits(acct.id, opts.defaults);
  const { record } = await b.accounts.createKey(acct.id, opts.own === undefined ? {} : { rateLimits: opts.own });
  await b.ledger.credit(acct.id, 100_000_000, `initial-${acct.id}`);
  return { accountId: acct.id, keyId: record.id };
}

function reserve(b: Backend, k: Key, opts: { now: number; tokens?: number; requestId?: string; ttl?: number; amount?: number }): Promise<ReservationOutcome> {
  return b.ledger.reserve({
    requestId: opts.requestId ?? rid(),
    accountId: k.accountId,
    keyId: k.keyId,
    amount: opts.amount ?? 1_000,
    holdTtlMs: opts.ttl ?? 600_000,
    now: opts.now,
    rateLimitTokens: opts.tokens ?? 100,
    rateLimitWindowMs: WINDOW,
  });
}

function settlement(k: Key, requestId: string, input: number, output: number, now: number, cost = 10): SettlementRequest {
  return {
    requestId, accountId: k.accountId, keyId: k.keyId, model: 'm1',
    usage: { input, output, cachedInput: 0, reasoning: 0 }, cost, status: 'completed', latencyMs: 1, now,
  };
}

const reasonOf = (o: ReservationOutcome): string => (o.admitted ? 'admitted' : o.reason);

describe.each(backends)('rate limits in the reservation (%s)', (_name, make) => {
  it('requests per window: N admitted, the next refused with the time to the window end, the next window admits again', async () => {
    const b = make();
    const k = await account(b, { own: { requestsPerMinute: 3 } });
    const first = await reserve(b, k, { now: T0 + 1_000 });
    expect(first).toMatchObject({ admitted: true, rateLimit: { requests: { limit: 3, remaining: 2 }, resetMs: WINDOW - 1_000 } });
    expect(reasonOf(await reserve(b, k, { now: T0 + 2_000 }))).toBe('admitted');
    expect(reasonOf(await reserve(b, k, { now: T0 + 3_000 }))).toBe('admitted');
    const held = (await b.ledger.balance(k.accountId)).held;
    const refused = await reserve(b, k, { now: T0 + 50_000 });
    expect(refused).toMatchObject({ admitted: false, reason: 'rate_limit_requests', needed: 1, available: 0, rateLimit: { requests: { limit: 3, remaining: 0 }, resetMs: 10_000 } });
    // A refusal holds no money and counts nothing.
    expect((await b.ledger.balance(k.accountId)).held).toBe(held);
    const next = await reserve(b, k, { now: T0 + WINDOW });
    expect(next).toMatchObject({ admitted: true, rateLimit: { requests: { limit: 3, remaining: 2 }, resetMs: WINDOW } });
  });

  it("tokens per window count the worst case; a settlement gives back the unused part in the same window only", async () => {
    const b = make();
    const k = await account(b, { own: { tokensPerMinute: 1_000 } });
    const r1 = rid();
    expect(await reserve(b, k, { now: T0, tokens: 600, requestId: r1 })).toMatchObject({ admitted: true, rateLimit: { tokens: { limit: 1_000, remaining: 400 } } });
    const over = await reserve(b, k, { now: T0 + 1, tokens: 600 });
    expect(over).toMatchObject({ admitted: false, reason: 'rate_limit_tokens', needed: 600, available: 400 });
    // 60 in + 40 out used of the 600 counted: 500 go back.
    await b.ledger.settle(settlement(k, r1, 60, 40, T0 + 2));
    const r2 = rid();
    expect(await reserve(b, k, { now: T0 + 3, tokens: 600, requestId: r2 })).toMatchObject({ admitted: true, rateLimit: { tokens: { limit: 1_000, remaining: 300 } } });
    // Settled in the next window: nothing is given back to a window that was never charged.
    await b.ledger.settle(settlement(k, r2, 1, 1, T0 + WINDOW + 5));
    expect(await reserve(b, k, { now: T0 + WINDOW + 6, tokens: 1_000 })).toMatchObject({ admitted: true, rateLimit: { tokens: { remaining: 0 } } });
    // A request alone larger than the limit is refused whatever the window holds.
    expect(await reserve(b, k, { now: T0 + 3 * WINDOW, tokens: 1_001 })).toMatchObject({ admitted: false, reason: 'rate_limit_tokens', needed: 1_001, available: 1_000 });
  });

  it('requests in flight: every way a hold ends frees its place (settlement, zero release, the reaper)', async () => {
    const b = make();
    const k = await account(b, { own: { concurrentRequests: 2 } });
    const a1 = rid();
    const a2 = rid();
    expect(await reserve(b, k, { now: T0, requestId: a1 })).toMatchObject({ admitted: true, rateLimit: { concurrency: { limit: 2, inFlight: 1 } } });
    expect(reasonOf(await reserve(b, k, { now: T0, requestId: a2, ttl: 1_000 }))).toBe('admitted');
    // A retried reserve of a request in flight is the same request, not a third.
    expect(reasonOf(await reserve(b, k, { now: T0, requestId: a1 }))).toBe('admitted');
    expect(await reserve(b, k, { now: T0 + 1 })).toMatchObject({ admitted: false, reason: 'rate_limit_concurrency', available: 0 });
    await b.ledger.settle(settlement(k, a1, 5, 5, T0 + 2));
    const a3 = rid();
    expect(reasonOf(await reserve(b, k, { now: T0 + 3, requestId: a3 }))).toBe('admitted');
    // A zero-cost release (what the exchange sends for a hold whose request never ran) frees it too.
    await b.ledger.settle(settlement(k, a3, 0, 0, T0 + 4, 0));
    const a4 = rid();
    expect(reasonOf(await reserve(b, k, { now: T0 + 5, requestId: a4 }))).toBe('admitted');
    expect(reasonOf(await reserve(b, k, { now: T0 + 6 }))).toBe('rate_limit_concurrency');
    // a2's hold (1 s) is past its deadline and reaped, never settled: its place is free again.
    expect(await b.ledger.reapExpired(T0 + 1_001)).toBe(1);
    expect(await reserve(b, k, { now: T0 + 1_002 })).toMatchObject({ admitted: true, rateLimit: { concurrency: { limit: 2, inFlight: 2 } } });
  });

  it("the account's default applies to keys without their own; a key's own value overrides it", async () => {
    const b = make();
    const k = await account(b, { defaults: { requestsPerMinute: 1, concurrentRequests: 5 } });
    const own = await b.accounts.createKey(k.accountId, { rateLimits: { requestsPerMinute: 2 } });
    const o: Key = { accountId: k.accountId, keyId: own.record.id };
    expect(await reserve(b, k, { now: T0 })).toMatchObject({ admitted: true, rateLimit: { requests: { limit: 1, remaining: 0 }, concurrency: { limit: 5 } } });
    expect(reasonOf(await reserve(b, k, { now: T0 + 1 }))).toBe('rate_limit_requests');
    expect(await reserve(b, o, { now: T0 + 2 })).toMatchObject({ admitted: true, rateLimit: { requests: { limit: 2, remaining: 1 }, concurrency: { limit: 5 } } });
    expect(reasonOf(await reserve(b, o, { now: T0 + 3 }))).toBe('admitted');
    expect(reasonOf(await reserve(b, o, { now: T0 + 4 }))).toBe('rate_limit_requests');
    // Cleared defaults and limits: nothing refuses, and no rate-limit state is reported.
    await b.accounts.setAccountRateLimits(k.accountId, {});
    await b.accounts.setKeyRateLimits(o.accountId, o.keyId, {});
    expect(await reserve(b, k, { now: T0 + 5 })).toEqual({ admitted: true });
    expect(await reserve(b, o, { now: T0 + 6 })).toEqual({ admitted: true });
  });

  it('money is checked first: a request the balance cannot pay is a 402 reason and counts against no rate limit', async () => {
    const b = make();
    const k = await account(b, { own: { requestsPerMinute: 1 } });
    expect(reasonOf(await reserve(b, k, { now: T0, amount: 200_000_000 }))).toBe('insufficient_balance');
    expect(await reserve(b, k, { now: T0 + 1 })).toMatchObject({ admitted: true, rateLimit: { requests: { remaining: 0 } } });
  });
});
