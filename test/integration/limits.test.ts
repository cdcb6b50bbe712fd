// Every declared limit (src/limits/limits.ts), against both ledgers (memory, and real Redis running the
// bucket scripts): the suite is built from the declaration, so a new limit is tested here without a line
// of its own. What a limit does follows from its row: its unit (what a request needs of it), its window
// (what a new window gives back), its scope and setting (how it is set), whether the account's default
// applies. Each test reads what a limit has left with a probe that no limit can admit: a reservation of
// more money than exists, refused by the binding money limit (its `available`) with the rate limits'
// state as they stand (what each rate limit has left), and which draws nothing.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { BudgetScope, KeyCaps, ScopeBudgets } from '../../src/accounts/account-store.js';
import type { RateLimits } from '../../src/accounts/rate-limits.js';
import { createMemoryBackend, createRedisBackend, type HotBackend } from '../../src/billing/backends.js';
import { BUCKET_SLOTS, bucketsOf, HELD_SEPARATOR } from '../../src/billing/buckets.js';
import type { ReservationOutcome } from '../../src/billing/ledger.js';
import { isLimitReason, LIMIT_REASONS, LIMITS, rateLimitFamily, type LimitReason, type LimitSpec, type LimitUnit, type LimitWindow } from '../../src/limits/limits.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-limits');
let fixtureNo = 0;
const backends: Array<[string, () => HotBackend]> = [
  ['memory', () => createMemoryBackend()],
  ['redis', () => createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-${++fixtureNo}` })],
];

const WINDOW = 60_000;
// Mid-January, at the start of a rate-limit window; the next month and the next window from it.
const T0 = Math.floor(Date.UTC(2026, 0, 15, 12, 0, 0) / WINDOW) * WINDOW;
const NEXT_MONTH = Math.floor(Date.UTC(2026, 1, 15, 12, 0, 0) / WINDOW) * WINDOW;
const BIG = 1_000_000_000_000;
const spec = (r: LimitReason): LimitSpec => LIMITS[r];

/** Per unit: the limit each test sets, and what one reservation asks of it. */
const SIZES: Record<LimitUnit, { limit: number; step: number }> = {
  money: { limit: 10_000, step: 3_000 },
  tokens: { limit: 10_000, step: 3_000 },
  requests: { limit: 3, step: 1 },
  concurrent_requests: { limit: 3, step: 1 },
};

/** A key in a team, owned by a member: every declared scope is on its requests' path. */
interface Key {
  b: HotBackend;
  accountId: string;
  keyId: string;
  teamId: string;
  memberId: string;
}

/** The id of a key's scope, for the scopes that have budgets. */
const scopeIdOf = (k: Key, scope: BudgetScope): string => (scope === 'team' ? k.teamId : k.memberId);

let seq = 0;
const rid = (): string => `req_${++seq}_${randomBytes(3).toString('hex')}`;

/** Sets the given limits (the rest unset): a scope's own value, or the account's default for keys. */
async function setLimits(k: Key, values: Partial<Record<LimitReason, number>>, where: 'own' | 'default' = 'own'): Promise<void> {
  const caps: KeyCaps = {};
  const own: RateLimits = {};
  const defaults: RateLimits = {};
  const budgets: Record<BudgetScope, ScopeBudgets> = { team: {}, member: {} };
  let balance = BIG;
  for (const [reason, value] of Object.entries(values) as Array<[LimitReason, number]>) {
    const s = spec(reason);
    switch (s.scope) {
      case 'account':
        if (s.unit !== 'money' || s.setting !== undefined) throw new Error(`no setter for the account's ${reason}`);
        balance = value;
        break;
      case 'team':
      case 'member':
        if (s.unit !== 'money' || (s.setting !== 'lifetimeBudget' && s.setting !== 'monthlyBudget')) throw new Error(`no setter for ${reason}`);
        budgets[s.scope][s.setting] = value;
        break;
      case 'key':
        if (s.unit === 'money') {
          if (s.setting !== 'lifetimeCap' && s.setting !== 'monthlyCap') throw new Error(`no setter for ${reason}`);
          caps[s.setting] = value;
        } else if (where === 'default') defaults[s.setting] = value;
        else own[s.setting] = value;
        break;
      default: {
        const never: never = s.scope;
        throw new Error(`no setter for the scope ${String(never)}`);
      }
    }
  }
  for (const scope of ['team', 'member'] as const) await k.b.accounts.restoreScope({ accountId: k.accountId, scope, id: scopeIdOf(k, scope), name: 'search', ...budgets[scope] });
  await k.b.accounts.setKeyCaps(k.accountId, k.keyId, caps);
  await k.b.accounts.setKeyRateLimits(k.accountId, k.keyId, own);
  await k.b.accounts.setAccountRateLimits(k.accountId, defaults);
  await k.b.ledger.credit(k.accountId, balance, `balance-${k.accountId}`);
}

async function keyWith(make: () => HotBackend, values: Partial<Record<LimitReason, number>>, where: 'own' | 'default' = 'own'): Promise<Key> {
  const b = make();
  const acct = await b.accounts.createAccount('limits');
  const teamId = `team_${randomBytes(3).toString('hex')}`;
  const memberId = `user_${randomBytes(3).toString('hex')}`;
  const { record } = await b.accounts.createKey(acct.id, { teamId, ownerId: memberId });
  const k = { b, accountId: acct.id, keyId: record.id, teamId, memberId };
  await setLimits(k, values, where);
  return k;
}

/** A reservation needing `n` of the unit (and little of every other). */
function reserve(k: Key, unit: LimitUnit, n: number, opts: { now?: number; ttl?: number; requestId?: string } = {}): Promise<ReservationOutcome> {
  return k.b.ledger.reserve({
    requestId: opts.requestId ?? rid(),
    accountId: k.accountId,
    keyId: k.keyId,
    teamId: k.teamId,
    memberId: k.memberId,
    amount: unit === 'money' ? n : 1,
    rateLimitTokens: unit === 'tokens' ? n : 1,
    holdTtlMs: opts.ttl ?? 600_000,
    now: opts.now ?? T0,
    rateLimitWindowMs: WINDOW,
  });
}

/**
 * Two holds of a key of the Redis ledger, for the cases that rewrite holds as an older version kept
 * them: one of 3,000 to settle and one of 2,000 to reap (it expires at T0 + 1,000), with the namespace
 * their hashes live in.
 */
async function twoHolds(k: Key): Promise<{ ns: string; settled: string; reaped: string }> {
  const settled = rid();
  const reaped = rid();
  expect(await reserve(k, 'money', 3_000, { requestId: settled })).toMatchObject({ admitted: true });
  expect(await reserve(k, 'money', 2_000, { requestId: reaped, ttl: 1_000 })).toMatchObject({ admitted: true });
  return { ns: `${testRedis.namespace}-${fixtureNo}`, settled, reaped };
}

/** What `reason` has left, read by a probe no limit can admit (it draws nothing). */
async function leftOf(k: Key, reason: LimitReason, now = T0): Promise<number> {
  const probe = await k.b.ledger.reserve({ requestId: rid(), accountId: k.accountId, keyId: k.keyId, teamId: k.teamId, memberId: k.memberId, amount: Number.MAX_SAFE_INTEGER, holdTtlMs: 1, now, rateLimitTokens: 0, rateLimitWindowMs: WINDOW });
  if (probe.admitted) throw new Error('the probe was admitted');
  const s = spec(reason);
  if (s.unit === 'money') {
    expect(probe.reason, `${reason} binds the probe`).toBe(reason);
    return probe.available;
  }
  const family = rateLimitFamily(s.unit);
  if (family === 'concurrency') {
    const c = probe.rateLimit?.concurrency;
    if (c === undefined) throw new Error(`no state of ${reason}`);
    return Math.max(0, c.limit - c.inFlight);
  }
  const state = probe.rateLimit?.[family];
  if (state === undefined) throw new Error(`no state of ${reason}`);
  return state.remaining;
}

function settle(k: Key, requestId: string, cost: number, tokensUsed: number, now = T0) {
  return k.b.ledger.settle({
    requestId, accountId: k.accountId, keyId: k.keyId, teamId: k.teamId, memberId: k.memberId, model: 'm', cost, status: 'completed', latencyMs: 1, now,
    usage: { input: tokensUsed, output: 0, cachedInput: 0, reasoning: 0 },
  });
}

/** What a settlement leaves of a limit: money keeps what was charged, tokens what was used, requests the request; places in flight come back. */
const AFTER_SETTLEMENT: Record<LimitUnit, (limit: number, used: number) => number> = {
  money: (limit, used) => limit - used,
  tokens: (limit, used) => limit - used,
  requests: (limit) => limit - 1,
  concurrent_requests: (limit) => limit,
};

/** What the reaper leaves of a limit a hold of `step` drew from: money and places come back, window counts stay counted. */
const AFTER_REAPING: Record<LimitUnit, (limit: number, step: number) => number> = {
  money: (limit) => limit,
  concurrent_requests: (limit) => limit,
  tokens: (limit, step) => limit - step,
  requests: (limit, step) => limit - step,
};

/** What a limit of each window has left, in the next month, after a request that used `used` of it this month. */
const NEXT_MONTH_LEFT: Record<LimitWindow, ((limit: number, used: number) => number) | undefined> = {
  lifetime: (limit, used) => limit - used,
  month: (limit) => limit,
  minute: (limit) => limit,
  // Places in flight are not counted in time windows.
  in_flight: undefined,
};

/** Pairs of limits of one unit, the first declared first: a tie names the first, else the one with the least left. */
const SAME_UNIT_PAIRS = LIMIT_REASONS.flatMap((a, i) => LIMIT_REASONS.slice(i + 1).filter((b) => spec(a).unit === spec(b).unit).map((b) => [a, b] as const));

describe.each(backends)('every declared limit (%s ledger)', (_name, make) => {
  describe.each(LIMIT_REASONS)('%s', (reason) => {
    const s = spec(reason);
    const { limit, step } = SIZES[s.unit];

    it('admits while it has room and refuses past it, naming itself with what it has left; a refusal draws nothing', async () => {
      const k = await keyWith(make, { [reason]: limit });
      expect(await leftOf(k, reason)).toBe(limit);
      let left = limit;
      while (left >= step) {
        expect(await reserve(k, s.unit, step)).toMatchObject({ admitted: true });
        left -= step;
        expect(await leftOf(k, reason)).toBe(left);
      }
      const refused = await reserve(k, s.unit, step);
      expect(refused).toMatchObject({ admitted: false, reason, needed: step, available: left });
      expect(await leftOf(k, reason)).toBe(left);
      // What is left is all there is: exactly that much is admitted.
      if (left > 0) expect(await reserve(k, s.unit, left)).toMatchObject({ admitted: true });
      expect(await leftOf(k, reason)).toBe(0);
      expect((await reserve(k, s.unit, step)).admitted).toBe(false);
      expect(s.status).toBe(s.unit === 'money' ? 402 : 429);
      // What /v1/key shows of it: the limit and what is used, read without drawing anything.
      if (s.unit !== 'money') return;
      const standing = await k.b.ledger.moneyStanding(k.accountId, { keyId: k.keyId, teamId: k.teamId, memberId: k.memberId }, T0);
      expect(standing.map((st) => st.reason)).toEqual(LIMIT_REASONS.filter((r) => spec(r).unit === 'money'));
      expect(standing.find((st) => st.reason === reason)).toEqual({ reason, limit, used: limit });
    });

    it('a refusal names its limit and whose it is: the value, the scope by name, the account', async () => {
      if (s.unit !== 'money') return;
      const k = await keyWith(make, { [reason]: limit });
      const refused = await reserve(k, s.unit, limit + step);
      expect(refused).toMatchObject({ admitted: false, reason });
      if (refused.admitted) return;
      expect(refused.accountName).toBe('limits');
      if (s.setting !== undefined) expect(refused.limit).toBe(limit);
      if (s.scope === 'team') expect(refused.scopeName).toBe('search');
    });

    it('binds only requests whose path names its scope; a request off its path draws nothing from it', async () => {
      if (s.scope !== 'team' && s.scope !== 'member') return;
      const k = await keyWith(make, { [reason]: limit });
      const off = { ...k, [s.scope === 'team' ? 'teamId' : 'memberId']: undefined } as unknown as Key;
      const requestId = rid();
      expect(await reserve(off, s.unit, limit + step, { requestId })).toMatchObject({ admitted: true });
      expect(await settle(off, requestId, s.unit === 'money' ? limit + step : 1, limit + step)).toMatchObject({ duplicate: false });
      expect(await leftOf(k, reason)).toBe(limit);
      expect(await k.b.ledger.scopeSpend(k.accountId, s.scope, scopeIdOf(k, s.scope), T0)).toEqual({ lifetimeSpent: 0, lifetimeHeld: 0, monthSpent: 0, monthHeld: 0 });
    });

    it('a settlement gives back what the reservation took and the request did not use', async () => {
      const k = await keyWith(make, { [reason]: limit });
      const requestId = rid();
      expect(await reserve(k, s.unit, step, { requestId })).toMatchObject({ admitted: true });
      const used = Math.floor(step / 3);
      // A rate-limited request reserved 1 micro-USD: it is charged that.
      const cost = s.unit === 'money' ? used : 1;
      expect(await settle(k, requestId, cost, used)).toMatchObject({ charged: cost, duplicate: false, late: false });
      expect(await leftOf(k, reason)).toBe(AFTER_SETTLEMENT[s.unit](limit, used));
      // Settled once: a repeat changes nothing.
      expect(await settle(k, requestId, cost, used)).toMatchObject({ duplicate: true });
      expect(await leftOf(k, reason)).toBe(AFTER_SETTLEMENT[s.unit](limit, used));
      expect((await k.b.ledger.balance(k.accountId)).held).toBe(0);
    });

    it('the reaper returns an expired hold; its late settlement takes only the room left', async () => {
      const k = await keyWith(make, { [reason]: limit });
      const requestId = rid();
      expect(await reserve(k, s.unit, step, { requestId, ttl: 1_000 })).toMatchObject({ admitted: true });
      expect(await k.b.ledger.reap(T0 + 1_000)).toEqual({ count: 1, released: s.unit === 'money' ? step : 1 });
      expect(await leftOf(k, reason, T0 + 1_000)).toBe(AFTER_REAPING[s.unit](limit, step));
      expect((await k.b.ledger.balance(k.accountId)).held).toBe(0);
      // Another request takes all the room the reaped hold had; its late settlement may charge only what
      // every money limit still has: nothing, when this limit is one of money.
      const room = await leftOf(k, reason, T0 + 1_000);
      if (s.unit === 'money') expect(await reserve(k, s.unit, room, { now: T0 + 1_001 })).toMatchObject({ admitted: true });
      const cost = s.unit === 'money' ? step : 1;
      const late = await settle(k, requestId, cost, 1, T0 + 1_002);
      expect(late).toMatchObject({ late: true, duplicate: false, charged: s.unit === 'money' ? 0 : cost });
      const audit = await k.b.ledger.audit(k.accountId);
      expect(audit.difference).toBe(0);
    });

    it('a new window starts afresh as its window says', async () => {
      const next = NEXT_MONTH_LEFT[s.window];
      if (next === undefined) return;
      const k = await keyWith(make, { [reason]: limit });
      const requestId = rid();
      expect(await reserve(k, s.unit, step, { requestId })).toMatchObject({ admitted: true });
      // The whole step is used, so only a new window gives it back.
      await settle(k, requestId, s.unit === 'money' ? step : 1, step);
      expect(await leftOf(k, reason, NEXT_MONTH)).toBe(next(limit, s.unit === 'money' || s.unit === 'tokens' ? step : 1));
    });

    it("the account's default applies to a key without its own; the key's own overrides it", async () => {
      if (s.unit === 'money' || !s.accountDefault) return;
      const k = await keyWith(make, { [reason]: limit }, 'default');
      expect(await leftOf(k, reason)).toBe(limit);
      while ((await reserve(k, s.unit, step)).admitted);
      expect(await reserve(k, s.unit, step)).toMatchObject({ admitted: false, reason });
      await k.b.accounts.setKeyRateLimits(k.accountId, k.keyId, { [s.setting]: limit * 2 });
      expect(await reserve(k, s.unit, step)).toMatchObject({ admitted: true });
    });

    it('an unaffordable request is refused by money first and counts against no limit', async () => {
      const k = await keyWith(make, { [reason]: limit });
      const before = await leftOf(k, reason);
      const refused = await k.b.ledger.reserve({ requestId: rid(), accountId: k.accountId, keyId: k.keyId, teamId: k.teamId, memberId: k.memberId, amount: BIG + 1, holdTtlMs: 1_000, now: T0, rateLimitTokens: step, rateLimitWindowMs: WINDOW });
      expect(refused).toMatchObject({ admitted: false });
      if (refused.admitted) return;
      expect(isLimitReason(refused.reason) && spec(refused.reason).unit).toBe('money');
      expect(await leftOf(k, reason)).toBe(before);
    });
  });

  describe.each(SAME_UNIT_PAIRS)('%s and %s', (first, second) => {
    const unit = spec(first).unit;
    const { limit, step } = SIZES[unit];

    it('a tie names the one declared first; otherwise the one with the least left', async () => {
      const tie = await keyWith(make, { [first]: limit, [second]: limit });
      expect(await reserve(tie, unit, limit + step)).toMatchObject({ admitted: false, reason: first, available: limit });
      const firstBinds = await keyWith(make, { [first]: limit - step, [second]: limit });
      expect(await reserve(firstBinds, unit, limit + step)).toMatchObject({ admitted: false, reason: first, available: limit - step });
      const secondBinds = await keyWith(make, { [first]: limit, [second]: limit - step });
      expect(await reserve(secondBinds, unit, limit + step)).toMatchObject({ admitted: false, reason: second, available: limit - step });
      // Admitted, the request draws from both.
      expect(await reserve(secondBinds, unit, step)).toMatchObject({ admitted: true });
      expect(await reserve(secondBinds, unit, limit - 2 * step + 1)).toMatchObject({ admitted: false, reason: second, available: limit - 2 * step });
    });
  });
});

describe('holds remember their buckets (redis ledger)', () => {
  const redisBackend = (backends[1] as [string, () => HotBackend])[1];
  const spend = (k: Key) => k.b.ledger.keySpend(k.accountId, k.keyId, T0);

  it('the hold keeps the description its reservation drew from, and the reaped marker after it', async () => {
    const k = await keyWith(redisBackend, { key_monthly_cap_reached: 10_000, rate_limit_tokens: 10_000 });
    const ns = `${testRedis.namespace}-${fixtureNo}`;
    const requestId = rid();
    expect(await reserve(k, 'tokens', 3_000, { requestId, ttl: 1_000 })).toMatchObject({ admitted: true });
    const hold = `${ns}:{${k.accountId}}:hold:${requestId}`;
    const kept = (await testRedis.redis.hget(hold, 'd')) ?? '';
    const slots = kept.split(HELD_SEPARATOR);
    const width = BUCKET_SLOTS.length;
    const slot = (name: (typeof BUCKET_SLOTS)[number]) => slots.filter((_, i) => i % width === BUCKET_SLOTS.indexOf(name));
    expect(slot('reason')).toEqual(LIMIT_REASONS);
    expect(slot('at').every((at) => !at.includes('{'))).toBe(true);
    await k.b.ledger.reap(T0 + 1_000);
    expect(await testRedis.redis.hget(`${ns}:{${k.accountId}}:reaped:${requestId}`, 'd')).toBe(kept);
  });

  it('a hold kept as JSON by the scripts before is settled and reaped from the buckets it names, not those described now', async () => {
    const k = await keyWith(redisBackend, { team_monthly_budget_reached: 10_000, member_lifetime_budget_reached: 10_000, rate_limit_concurrency: 2 });
    const { ns, settled, reaped } = await twoHolds(k);
    // As the scripts before wrote a hold's buckets: JSON in `b`, its limit as [hash, field] pairs.
    const json = JSON.stringify(
      bucketsOf({ keyId: k.keyId, teamId: k.teamId, memberId: k.memberId }).map(({ limit, ...rest }) => ({ ...rest, limit: limit.map((source) => [source.at, source.field]) })),
    );
    for (const r of [settled, reaped]) {
      const hold = `${ns}:{${k.accountId}}:hold:${r}`;
      await testRedis.redis.hdel(hold, 'd');
      await testRedis.redis.hset(hold, 'b', json);
    }
    // Settled and reaped as if the key had left its team and owner since: only the holds name them.
    const moved = { ...k, teamId: undefined, memberId: undefined } as unknown as Key;
    expect(await settle(moved, settled, 1_000, 10)).toMatchObject({ charged: 1_000, released: 2_000 });
    expect(await k.b.ledger.reap(T0 + 1_000)).toEqual({ count: 1, released: 2_000 });
    for (const scope of ['team', 'member'] as const) {
      expect(await k.b.ledger.scopeSpend(k.accountId, scope, scopeIdOf(k, scope), T0)).toEqual({ lifetimeSpent: 1_000, lifetimeHeld: 0, monthSpent: 1_000, monthHeld: 0 });
    }
    expect(await settle(moved, reaped, 500, 10, T0 + 1_001)).toMatchObject({ charged: 500, late: true });
    expect(await k.b.ledger.scopeSpend(k.accountId, 'team', k.teamId, T0)).toEqual({ lifetimeSpent: 1_500, lifetimeHeld: 0, monthSpent: 1_500, monthHeld: 0 });
    expect(await k.b.ledger.balance(k.accountId)).toEqual({ balance: BIG - 1_500, held: 0 });
    expect(await leftOf(k, 'rate_limit_concurrency', T0 + 1_002)).toBe(2);
  });

  it("a hold taken before holds kept their buckets is settled and reaped from its key's buckets", async () => {
    const k = await keyWith(redisBackend, { key_lifetime_cap_reached: 10_000, key_monthly_cap_reached: 10_000, rate_limit_concurrency: 2 });
    const { ns, settled, reaped } = await twoHolds(k);
    // As the version before wrote them: amount, keyId, month, deadline, no description.
    for (const r of [settled, reaped]) await testRedis.redis.hdel(`${ns}:{${k.accountId}}:hold:${r}`, 'd');
    expect(await spend(k)).toEqual({ lifetimeSpent: 0, lifetimeHeld: 5_000, monthSpent: 0, monthHeld: 5_000 });
    expect(await settle(k, settled, 1_000, 10)).toMatchObject({ charged: 1_000, released: 2_000 });
    expect(await k.b.ledger.reap(T0 + 1_000)).toEqual({ count: 1, released: 2_000 });
    expect(await spend(k)).toEqual({ lifetimeSpent: 1_000, lifetimeHeld: 0, monthSpent: 1_000, monthHeld: 0 });
    expect(await k.b.ledger.balance(k.accountId)).toEqual({ balance: BIG - 1_000, held: 0 });
    expect(await settle(k, reaped, 500, 10, T0 + 1_001)).toMatchObject({ charged: 500, late: true });
    expect(await spend(k)).toEqual({ lifetimeSpent: 1_500, lifetimeHeld: 0, monthSpent: 1_500, monthHeld: 0 });
    // Both places in flight are free again.
    expect(await leftOf(k, 'rate_limit_concurrency', T0 + 1_002)).toBe(2);
  });
});
