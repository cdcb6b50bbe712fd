// Property test: random sequences of reserve / settle / release / expire / credit / refund run against
// the memory ledger AND the Redis ledger side by side. Both must give identical outcomes, agree with a
// small model of each request's life, and keep the design's invariants after every single step.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KeyCaps } from '../../src/accounts/account-store.js';
import { createMemoryBackend, createRedisBackend, type Backend } from '../../src/billing/backends.js';
import { CreditConflictError } from '../../src/billing/ledger-common.js';
import { isJournalingLedger } from '../../src/billing/ledger.js';
import { utcMonth } from '../../src/billing/month.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-ledger-prop');

type Op =
  | { t: 'reserve'; key: number; amount: number; ttl: number }
  | { t: 'settle'; req: number; cost: number; open: boolean }
  | { t: 'release'; req: number }
  | { t: 'expire'; advance: number }
  | { t: 'credit'; amount: number; idem: number }
  | { t: 'refund'; req: number }
  | { t: 'nextMonth' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('reserve' as const), key: fc.nat(3), amount: fc.integer({ min: 0, max: 1500 }), ttl: fc.integer({ min: 1, max: 3000 }) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('settle' as const), req: fc.nat(), cost: fc.nat(2000), open: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('release' as const), req: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('expire' as const), advance: fc.integer({ min: 0, max: 4000 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('credit' as const), amount: fc.integer({ min: 1, max: 1500 }), idem: fc.nat(4) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('refund' as const), req: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ t: 'nextMonth' as const }) },
);

// Small limits, so that every limit refuses, and reaped holds' room is taken by others, in most runs.
const CAPS: KeyCaps[] = [{ lifetimeCap: 2500 }, { monthlyCap: 1500 }, { lifetimeCap: 2000, monthlyCap: 1200 }, {}];

interface World {
  name: string;
  backend: Backend;
  accountId: string;
  keyIds: string[];
}

interface Req {
  rid: string;
  key: number;
  state: 'held' | 'reaped' | 'settled' | 'refused';
  deadline: number;
  charged: number;
  refunded: boolean;
}

let runNo = 0;

async function makeWorld(name: string, backend: Backend): Promise<World> {
  // One name in both worlds: a refusal names the account, and the two answers are compared whole.
  const acct = await backend.accounts.createAccount('world');
  const keyIds: string[] = [];
  for (const caps of CAPS) keyIds.push((await backend.accounts.createKey(acct.id, caps)).record.id);
  await backend.ledger.credit(acct.id, 2000, 'initial');
  return { name, backend, accountId: acct.id, keyIds };
}

async function checkInvariants(w: World, reqs: Req[], months: Set<string>): Promise<void> {
  const { ledger } = w.backend;
  const bal = await ledger.balance(w.accountId);
  expect(bal.balance, `${w.name}: balance`).toBeGreaterThanOrEqual(0);
  expect(bal.held, `${w.name}: held`).toBeGreaterThanOrEqual(0);
  expect(bal.held).toBeLessThanOrEqual(bal.balance);
  const audit = await ledger.audit(w.accountId);
  expect(audit.difference, `${w.name}: usage records = balance drawn down`).toBe(0);
  expect(audit.holdsOutstanding).toBe(reqs.filter((r) => r.state === 'held').length);
  let heldSum = 0;
  for (const [i, keyId] of w.keyIds.entries()) {
    const caps = CAPS[i] ?? {};
    for (const month of months) {
      const [y, m] = month.split('-').map(Number) as [number, number];
      const spend = await ledger.keySpend(w.accountId, keyId, Date.UTC(y, m - 1, 15));
      expect(spend.lifetimeHeld).toBeGreaterThanOrEqual(0);
      expect(spend.monthHeld).toBeGreaterThanOrEqual(0);
      if (caps.lifetimeCap !== undefined) expect(spend.lifetimeSpent + spend.lifetimeHeld).toBeLessThanOrEqual(caps.lifetimeCap);
      if (caps.monthlyCap !== undefined) expect(spend.monthSpent + spend.monthHeld).toBeLessThanOrEqual(caps.monthlyCap);
    }
    heldSum += (await ledger.keySpend(w.accountId, keyId)).lifetimeHeld;
  }
  expect(heldSum, `${w.name}: key holds add up to the account's`).toBe(bal.held);
}

describe('ledger properties (memory and Redis side by side)', () => {
  it('agree with each other and the model, and keep every invariant after every step', async () => {
    await fc.assert(
      // Journaled (a record's journal writer takes the settlements: Redis keeps journal streams) or not
      // (Redis keeps the usage stream): the books and the outcomes agree either way.
      fc.asyncProperty(fc.boolean(), fc.array(opArb, { minLength: 1, maxLength: 60 }), async (journaled, ops) => {
        let now = Date.UTC(2026, 0, 31, 23, 50);
        const clock = (): number => now;
        const worlds = [
          await makeWorld('memory', createMemoryBackend({ now: clock, usageMaxRecords: 8 })),
          await makeWorld('redis', createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-${++runNo}`, now: clock, usageMaxRecords: 8 })),
        ];
        if (journaled) for (const w of worlds) if (isJournalingLedger(w.backend.ledger)) w.backend.ledger.journalSettlements();
        const reqs: Req[] = [];
        const credits = new Map<number, number>();
        const months = new Set([utcMonth(now)]);
        const pick = (i: number): Req | undefined => (reqs.length ? reqs[i % reqs.length] : undefined);

        for (const op of ops) {
          if (op.t === 'reserve') {
            const r: Req = { rid: `r${reqs.length}`, key: op.key, state: 'refused', deadline: now + op.ttl, charged: 0, refunded: false };
            const outcomes = [];
            for (const w of worlds) {
              outcomes.push(await w.backend.ledger.reserve({
                requestId: r.rid, accountId: w.accountId, keyId: w.keyIds[op.key] ?? '', amount: op.amount, holdTtlMs: op.ttl, now,
              }));
            }
            expect(outcomes[1]).toEqual(outcomes[0]);
            if (outcomes[0]?.admitted) r.state = 'held';
            reqs.push(r);
          } else if (op.t === 'settle' || op.t === 'release') {
            // Mostly settle a request still open (held or reaped: the interesting cases); sometimes any (duplicates).
            const open = reqs.filter((q) => q.state === 'held' || q.state === 'reaped');
            const r = op.t === 'settle' && op.open && open.length ? open[op.req % open.length] : pick(op.req);
            if (!r) continue;
            const cost = op.t === 'settle' ? op.cost : 0;
            const outcomes = [];
            for (const w of worlds) {
              outcomes.push(await w.backend.ledger.settle({
                requestId: r.rid, accountId: w.accountId, keyId: w.keyIds[r.key] ?? '', model: 'm',
                usage: { input: cost, output: 0, cachedInput: 0, reasoning: 0 }, cost, status: cost ? 'completed' : 'client_cancelled', latencyMs: 1, now,
              }));
            }
            // The same outcome, but for the Redis journal stream id (the memory ledger has no stream).
            expect({ ...outcomes[1], journal: outcomes[1]?.journal && { ...outcomes[1].journal, entryId: undefined } }).toEqual({ ...outcomes[0], journal: outcomes[0]?.journal && { ...outcomes[0].journal, entryId: undefined } });
            const o = outcomes[0];
            if (!o) throw new Error('no outcome');
            if (r.state === 'held' || r.state === 'reaped') {
              expect(o.duplicate).toBe(false);
              expect(o.late).toBe(r.state === 'reaped');
              expect(o.charged).toBeLessThanOrEqual(cost);
              // A journal mark (and in Redis a journal stream entry) exactly when a journal writer takes them.
              expect(o.journal !== undefined, 'journal mark').toBe(journaled);
              expect(outcomes[1]?.journal?.entryId !== undefined, 'journal stream entry').toBe(journaled);
              r.state = 'settled';
              r.charged = o.charged;
            } else {
              expect(o).toEqual({ charged: 0, released: 0, duplicate: true, late: false });
            }
          } else if (op.t === 'expire' || op.t === 'nextMonth') {
            if (op.t === 'expire') now += op.advance;
            else {
              const d = new Date(now);
              now = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1, 0, 0, 0, 1);
            }
            months.add(utcMonth(now));
            const due = reqs.filter((r) => r.state === 'held' && r.deadline <= now);
            for (const w of worlds) expect(await w.backend.ledger.reapExpired(now), `${w.name}: reaped`).toBe(due.length);
            for (const r of due) r.state = 'reaped';
          } else if (op.t === 'credit') {
            const prior = credits.get(op.idem);
            if (prior !== undefined && prior !== op.amount) {
              // A reused idempotency key with another amount is refused by both, and changes nothing.
              for (const w of worlds) await expect(w.backend.ledger.credit(w.accountId, op.amount, `pay-${op.idem}`)).rejects.toBeInstanceOf(CreditConflictError);
              continue;
            }
            credits.set(op.idem, op.amount);
            const results = [];
            for (const w of worlds) results.push(await w.backend.ledger.credit(w.accountId, op.amount, `pay-${op.idem}`));
            expect(results[1]).toBe(results[0]);
            expect(results[0]).toBe(prior === undefined);
          } else if (op.t === 'refund') {
            const r = pick(op.req);
            if (!r) continue;
            const expected = {
              refunded: r.state === 'settled' && !r.refunded ? r.charged : 0,
              unknown: r.state !== 'settled',
              duplicate: r.state === 'settled' && r.refunded,
            };
            for (const w of worlds) expect(await w.backend.ledger.refund(w.accountId, r.rid)).toEqual(expected);
            if (r.state === 'settled') r.refunded = true;
          }
          for (const w of worlds) await checkInvariants(w, reqs, months);
        }

        // Every admitted request ends settled or reaped exactly once: reap everything, then count.
        now += 10_000;
        const due = reqs.filter((r) => r.state === 'held');
        for (const w of worlds) {
          expect(await w.backend.ledger.reapExpired(now)).toBe(due.length);
          expect(await w.backend.ledger.balance(w.accountId)).toMatchObject({ held: 0 });
          const audit = await w.backend.ledger.audit(w.accountId);
          expect(audit.holdsOutstanding).toBe(0);
          expect(audit.difference).toBe(0);
        }
        const settled = reqs.filter((r) => r.state === 'settled');
        const charged = settled.reduce((s, r) => s + r.charged, 0);
        for (const w of worlds) expect((await w.backend.ledger.audit(w.accountId)).usageTotal).toBe(charged);
      }),
      {
        numRuns: 300,
        // Always also run the sequence that once exposed a late settlement taking room another hold owned.
        examples: [false, true].map((journaled): [boolean, Op[]] => [
          journaled,
          [
            { t: 'reserve', key: 0, amount: 994, ttl: 1 },
            { t: 'expire', advance: 1 },
            { t: 'reserve', key: 0, amount: 1007, ttl: 1 },
            { t: 'settle', req: 0, cost: 994, open: false },
          ],
        ]),
      },
    );
  }, 120_000);
});
