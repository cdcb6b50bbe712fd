// Teams and members' budgets with PostgreSQL as their record and Redis as the hot path, in the
// production composition (the record's account store and ledger under the journal): budgets commit to
// the record first and reach Redis version-checked; a request of a key in a team, owned by a member, is
// charged to its key, its team and its member once, and the record keeps the same figures (the team's
// by the usage records' team, the member's by the keys they own); a Redis that lost them gets budgets
// and spend back (a wipe with a hold in flight, a settlement committed after the reload, a copy seeded
// before teams existed); a budget Redis lost is found and pushed again by reconciliation and the sweeper.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TeamChangeRefused } from '../../src/accounts/teams.js';
import { createRedisBackend } from '../../src/billing/backends.js';
import type { ReservationRequest } from '../../src/billing/ledger.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { JournalWriter } from '../../src/record/journal-writer.js';
import { JournaledLedger } from '../../src/record/journaled-ledger.js';
import type { Database, QueryOptions, SqlValue } from '../../src/record/database.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-teams');
const testDb = useTestDatabase('teams');
let worldNo = 0;

/** A dashboard user who is a member of the account (what a team's member and a key's owner are). */
async function member(accountId: string, name: string): Promise<string> {
  const id = `user_${name}_${randomBytes(4).toString('hex')}`;
  await testDb.db.query("INSERT INTO dashboard_users (id, email, password_hash, role, account_id) VALUES ($1, $2, 'x', 'holder', $3)", [id, `${id}@example.com`, accountId]);
  await testDb.db.query("INSERT INTO account_memberships (account_id, user_id, role) VALUES ($1, $2, 'member')", [accountId, id]);
  return id;
}

async function world() {
  const namespace = `${testRedis.namespace}-${++worldNo}`;
  const hot = createRedisBackend({ redis: testRedis.redis, namespace });
  const backend = recordedBackend(hot, testDb.db, 'tg', { rebuildWindowMs: 0, keySweepMs: 0, movementSweepMs: 0 });
  const keys = redisKeys(namespace);
  const stream = new RedisJournalStream(testRedis.redis, keys);
  const writer = new JournalWriter({ db: testDb.db, stream, maxLagMs: 600_000, intervalMs: 1e9, sweepIntervalMs: 0, trimIntervalMs: 1e9, trimAfterCommit: false });
  const ledger = new JournaledLedger(backend.ledger, writer);
  const account = await backend.accounts.createAccount('Acme');
  const teams = backend.accounts.teams;
  const alice = await member(account.id, 'alice');
  const search = await teams.createTeam(account.id, 'search', { monthlyBudget: 5_000 });
  await teams.setTeamMember(account.id, search.id, alice, true);
  const key = (await backend.accounts.createKey(account.id, { name: 'k', ownerId: alice, teamId: search.id })).record;
  await backend.ledger.credit(account.id, 1_000_000, `start-${account.id}`);
  const wipe = async (): Promise<void> => {
    const found = await testRedis.redis.keys(`${namespace}:*`);
    for (let i = 0; i < found.length; i += 500) await testRedis.redis.del(...found.slice(i, i + 500));
  };
  const catchUp = async (): Promise<void> => {
    await writer.flush();
    await writer.trim();
  };
  const path = { accountId: account.id, keyId: key.id, teamId: search.id, memberId: alice };
  const reserve = (requestId: string, amount: number, extra: Partial<ReservationRequest> = {}) => ledger.reserve({ requestId, ...path, amount, holdTtlMs: 60_000, ...extra });
  const settle = (requestId: string, cost: number) =>
    ledger.settle({ requestId, ...path, model: 'm', usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost, status: 'completed', latencyMs: 1 });
  return { namespace, hot, backend, teams, writer, ledger, stream, accountId: account.id, alice, search, key, wipe, catchUp, reserve, settle };
}

type World = Awaited<ReturnType<typeof world>>;

/** Redis's team and member spend equal the record's, and reconciliation finds nothing. */
async function expectHotEqualsRecord(w: World): Promise<{ team: number; member: number }> {
  await w.backend.ledger.seed(w.accountId);
  const team = await testDb.db.query<{ lifetime_spent: number; month: number; records: number }>(
    `SELECT t.lifetime_spent, COALESCE((SELECT sum(spent) FROM team_month_spend WHERE team_id = t.id), 0)::bigint AS month,
            (SELECT COALESCE(sum(cost), 0) FROM usage_records WHERE team_id = t.id)::bigint AS records FROM teams t WHERE t.id = $1`,
    [w.search.id],
  );
  const row = team.rows[0];
  const hotTeam = await w.hot.ledger.scopeSpend(w.accountId, 'team', w.search.id);
  expect(hotTeam.lifetimeSpent, "Redis team spend = the record's").toBe(Number(row?.lifetime_spent));
  expect(Number(row?.records), "the team's row = its usage records").toBe(Number(row?.lifetime_spent));
  expect(hotTeam.monthSpent).toBe(Number(row?.month));
  const memberRecord = await testDb.db.query<{ spent: number }>('SELECT COALESCE(sum(lifetime_spent), 0)::bigint AS spent FROM api_keys WHERE owner_user_id = $1', [w.alice]);
  const hotMember = await w.hot.ledger.scopeSpend(w.accountId, 'member', w.alice);
  expect(hotMember.lifetimeSpent, "Redis member spend = the record's (their keys')").toBe(Number(memberRecord.rows[0]?.spent));
  const report = await reconcile(reconcileSources(testDb.db, w.backend, w.stream, w.writer), [w.accountId]);
  expect(report.differences).toEqual([]);
  return { team: hotTeam.lifetimeSpent, member: hotMember.lifetimeSpent };
}

describe('teams and budgets on the record', () => {
  it('budgets commit to the record and reach Redis; a request is charged to its key, team and member once, as the record keeps it', async () => {
    const w = await world();
    expect(await w.hot.accounts.getScope(w.accountId, 'team', w.search.id)).toEqual({ accountId: w.accountId, scope: 'team', id: w.search.id, name: 'search', monthlyBudget: 5_000 });
    await w.teams.setMemberBudgets(w.accountId, w.alice, { lifetimeBudget: 3_000 });
    expect(await w.hot.accounts.getScope(w.accountId, 'member', w.alice)).toMatchObject({ lifetimeBudget: 3_000 });
    expect(await w.reserve('r1', 2_000)).toMatchObject({ admitted: true });
    expect(await w.settle('r1', 1_200)).toMatchObject({ charged: 1_200, duplicate: false });
    expect(await w.settle('r1', 1_200)).toMatchObject({ duplicate: true });
    // The member's lifetime budget binds (1,800 left) before the team's monthly one (3,800 left).
    expect(await w.reserve('r2', 2_000)).toMatchObject({ admitted: false, reason: 'member_lifetime_budget_reached', available: 1_800, limit: 3_000, accountName: 'Acme' });
    await w.teams.updateTeam(w.accountId, w.search.id, { monthlyBudget: 1_500 });
    expect(await w.reserve('r3', 400)).toMatchObject({ admitted: false, reason: 'team_monthly_budget_reached', available: 300, limit: 1_500, scopeName: 'search' });
    await w.catchUp();
    expect(await expectHotEqualsRecord(w)).toEqual({ team: 1_200, member: 1_200 });
    const rec = await testDb.db.query<{ team_id: string | null }>("SELECT team_id FROM usage_records WHERE request_id = 'r1'");
    expect(rec.rows).toEqual([{ team_id: w.search.id }]);
    await w.writer.close(0);
  });

  it("a key that changes team leaves its earlier spend with the team it was charged to; a deleted team's keys leave it", async () => {
    const w = await world();
    const infra = await w.teams.createTeam(w.accountId, 'infra');
    await expect(w.teams.createTeam(w.accountId, 'Search')).rejects.toBeInstanceOf(TeamChangeRefused);
    expect(await w.reserve('a1', 500)).toMatchObject({ admitted: true });
    await w.settle('a1', 500);
    await w.teams.setKeyTeam(w.accountId, w.key.id, infra.id);
    expect((await w.backend.accounts.getKey(w.accountId, w.key.id))?.teamId).toBe(infra.id);
    expect(await w.reserve('a2', 300, { teamId: infra.id })).toMatchObject({ admitted: true });
    await w.ledger.settle({ requestId: 'a2', accountId: w.accountId, keyId: w.key.id, teamId: infra.id, memberId: w.alice, model: 'm', usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost: 300, status: 'completed', latencyMs: 1 });
    expect((await w.hot.ledger.scopeSpend(w.accountId, 'team', w.search.id)).lifetimeSpent).toBe(500);
    expect((await w.hot.ledger.scopeSpend(w.accountId, 'team', infra.id)).lifetimeSpent).toBe(300);
    expect(await w.teams.deleteTeam(w.accountId, infra.id)).toBe(true);
    expect((await w.backend.accounts.getKey(w.accountId, w.key.id))?.teamId).toBeUndefined();
    expect((await w.teams.listTeams(w.accountId)).map((t) => t.name)).toEqual(['search']);
    await expect(w.teams.setKeyTeam(w.accountId, w.key.id, infra.id)).rejects.toMatchObject({ reason: 'no_team' });
    await w.catchUp();
    await expectHotEqualsRecord(w);
    await w.writer.close(0);
  });

  it('a wipe: budgets and spend come back from the record; a hold it took is charged to its team and member when it settles; one committed after the reload is added once', async () => {
    const w = await world();
    await w.teams.setMemberBudgets(w.accountId, w.alice, { monthlyBudget: 4_000 });
    await w.reserve('committed', 1_000);
    await w.settle('committed', 1_000);
    await w.writer.flush();
    await w.reserve('uncommitted', 700);
    await w.settle('uncommitted', 700);
    expect(await w.reserve('in-flight', 900)).toMatchObject({ admitted: true });
    await w.wipe();
    // The next reservation loads the account: its budgets and the record's spend (1,000 committed).
    expect(await w.reserve('probe', 1_000_000_000)).toMatchObject({ admitted: false, reason: 'member_monthly_budget_reached', available: 4_000 - 1_000 });
    expect(await w.hot.accounts.getScope(w.accountId, 'member', w.alice)).toMatchObject({ monthlyBudget: 4_000 });
    expect(await w.hot.accounts.getScope(w.accountId, 'team', w.search.id)).toMatchObject({ monthlyBudget: 5_000, name: 'search' });
    expect((await w.hot.ledger.scopeSpend(w.accountId, 'team', w.search.id)).lifetimeSpent).toBe(1_000);
    expect(await w.settle('in-flight', 900)).toMatchObject({ charged: 900, late: true, duplicate: false });
    await w.catchUp();
    expect(await expectHotEqualsRecord(w)).toEqual({ team: 2_600, member: 2_600 });
    // 4,000 - 2,600 left of the member's monthly budget: exactly that is admitted, no more.
    expect(await w.reserve('over', 1_401)).toMatchObject({ admitted: false, reason: 'member_monthly_budget_reached', available: 1_400 });
    expect(await w.reserve('fits', 1_400)).toMatchObject({ admitted: true });
    await w.writer.close(0);
  });

  it('a Redis copy seeded before teams and members were counted is loaded again on its next reservation', async () => {
    const w = await world();
    await w.reserve('old', 800);
    await w.settle('old', 800);
    await w.catchUp();
    // As a gateway of the version before left it: spend on the key only, no `scopes` mark.
    const k = redisKeys(w.namespace);
    await testRedis.redis.hdel(k.account(w.accountId), 'scopes');
    for (const at of [k.scoped(w.accountId, `team:${w.search.id}`), k.scoped(w.accountId, `member:${w.alice}`)]) await testRedis.redis.hdel(at, 'lifetimeSpent');
    expect(await w.reserve('next', 100)).toMatchObject({ admitted: true });
    expect((await w.hot.ledger.scopeSpend(w.accountId, 'member', w.alice)).lifetimeSpent).toBe(800);
    await w.settle('next', 100);
    await w.catchUp();
    expect(await expectHotEqualsRecord(w)).toEqual({ team: 900, member: 900 });
    await w.writer.close(0);
  });

  it('a budget Redis lost is reported and pushed again by reconciliation; one whose push failed, by the sweeper', async () => {
    const w = await world();
    const at = redisKeys(w.namespace).scoped(w.accountId, `team:${w.search.id}`);
    await testRedis.redis.hdel(at, 'monthlyBudget');
    const report = await reconcile(reconcileSources(testDb.db, w.backend, w.stream, w.writer), [w.accountId]);
    expect(report.differences).toEqual([{ accountId: w.accountId, field: 'team_monthly_budget', teamId: w.search.id, expected: 5_000, actual: -1, difference: -5_001, repaired: true }]);
    expect(report.totalDifference).toBe(0);
    expect(await testRedis.redis.hget(at, 'monthlyBudget')).toBe('5000');
    // A change committed while Redis refuses the push: the record has it, the sweeper brings it.
    const restore = w.hot.accounts.restoreScope.bind(w.hot.accounts);
    w.hot.accounts.restoreScope = () => Promise.reject(new Error('Redis is down'));
    await w.teams.updateTeam(w.accountId, w.search.id, { monthlyBudget: 100 });
    expect(await testRedis.redis.hget(at, 'monthlyBudget')).toBe('5000');
    w.hot.accounts.restoreScope = restore;
    expect(await w.backend.accounts.sweepKeys()).toBeGreaterThanOrEqual(1);
    expect(await testRedis.redis.hget(at, 'monthlyBudget')).toBe('100');
    expect(await w.reserve('after', 101)).toMatchObject({ admitted: false, reason: 'team_monthly_budget_reached' });
    await w.writer.close(0);
  });

  it("a sweep with nothing behind asks the record one question (an idle gateway sweeps twice a second); a member's budget whose push failed is still swept", async () => {
    const w = await world();
    const texts: string[] = [];
    const db = testDb.db;
    const counted: Database = {
      kind: db.kind,
      query: <R>(text: string, params?: readonly SqlValue[], opts?: QueryOptions) => {
        texts.push(text);
        return db.query<R>(text, params, opts);
      },
      exec: (script) => db.exec(script),
      transaction: (fn) => db.transaction(fn),
      close: () => db.close(),
    };
    const sweeper = recordedBackend(w.hot, counted, 'tg', { rebuildWindowMs: 0, keySweepMs: 0, movementSweepMs: 0 }).accounts;
    await sweeper.sweepKeys(); // what this file's earlier tests left behind
    texts.length = 0;
    expect(await sweeper.sweepKeys()).toBe(0);
    expect(texts, 'one query when nothing is behind (it was four wide ones)').toHaveLength(1);
    const restore = w.hot.accounts.restoreScope.bind(w.hot.accounts);
    w.hot.accounts.restoreScope = () => Promise.reject(new Error('Redis is down'));
    await w.teams.setMemberBudgets(w.accountId, w.alice, { lifetimeBudget: 3_000 });
    w.hot.accounts.restoreScope = restore;
    expect((await w.hot.accounts.getScope(w.accountId, 'member', w.alice))?.lifetimeBudget).toBeUndefined();
    expect(await sweeper.sweepKeys()).toBe(1);
    expect(await w.hot.accounts.getScope(w.accountId, 'member', w.alice)).toMatchObject({ lifetimeBudget: 3_000 });
    await w.writer.close(0);
  });
});
