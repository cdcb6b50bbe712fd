// Reconciliation: PostgreSQL (the record), the hot path (Redis or memory) and the per-request usage
// records must tell the same story to the micro-dollar. For each account it compares
//   - the record with itself: the balance kept by the trigger against the sum of its ledger entries,
//     and the usage records' total against the 'usage' ledger entries and the totals row's `charged`;
//   - the hot path with the record: the hot balance against the record's balance less the charges still
//     in the journal (applied in Redis, not yet committed), each key's lifetime and this month's spend
//     against its usage records plus its uncommitted ones, and the held total against its keys' holds.
//   - each team's and member's lifetime and this month's spend against the usage records charged to it
//     (a member's: of the keys they own) plus its uncommitted ones;
//   - each key's state (present, revoked, caps) in the hot path against the record; a key that differs is
//     pushed from the record again on the spot (key state is not money: nothing in flight explains it);
//     the same for each team's and member's budgets.
// A difference seen once may be a settlement in flight; the periodic job looks again before it reports.
import type { AccountStore } from '../accounts/account-store.js';
import type { Ledger, Micros } from '../billing/ledger.js';
import { utcMonth } from '../billing/month.js';
import type { Database } from './database.js';
import type { JournalEntry } from './journal.js';
import type { KeyStateDifference, RateLimitDifference } from './recorded-account-store.js';
import type { ScopeStateDifference } from './recorded-teams.js';

export type ReconciledField =
  | 'record_balance'
  | 'record_charged'
  | 'usage_ledger'
  | 'balance'
  | 'held'
  | 'key_lifetime'
  | 'key_lifetime_record'
  | 'key_month'
  | 'team_lifetime'
  | 'team_lifetime_record'
  | 'team_month'
  | 'member_lifetime'
  | 'member_month'
  // Budgets, not money (see ScopeStateDifference): left out of totalDifference.
  | ScopeStateDifference['field']
  // Key state, not money (see KeyStateDifference): left out of totalDifference.
  | 'key_missing'
  | 'key_revoked'
  | 'key_lifetime_cap'
  | 'key_monthly_cap'
  | 'key_max_cost_per_request'
  | RateLimitDifference
  // The hot path's seq below the record's: it lost writes the record has (not money; repaired by a reload).
  | 'hot_behind';

/** Fields that are not micro-USD: reported, repaired, and left out of totalDifference. */
const NOT_MONEY_FIELDS: ReadonlySet<ReconciledField> = new Set<ReconciledField>([
  'key_missing',
  'key_revoked',
  'key_lifetime_cap',
  'key_monthly_cap',
  'key_max_cost_per_request',
  'key_rpm_limit',
  'key_tpm_limit',
  'key_concurrency_limit',
  'account_rpm_limit',
  'account_tpm_limit',
  'account_concurrency_limit',
  'team_lifetime_budget',
  'team_monthly_budget',
  'member_lifetime_budget',
  'member_monthly_budget',
  'hot_behind',
]);

/** A ledger that loads an account again when its hot copy is behind the record (RecordedLedger). */
interface BehindRepairer {
  repairIfBehind(accountId: string): Promise<{ hot: number; record: number } | undefined>;
}

function canRepairBehind(ledger: object): ledger is BehindRepairer {
  return typeof (ledger as Partial<BehindRepairer>).repairIfBehind === 'function';
}

/** An account store that can compare its keys with the hot path's and repair them (RecordedAccountStore). */
interface KeyReconciler {
  reconcileKeys(accountId: string): Promise<KeyStateDifference[]>;
}

function canReconcileKeys(store: object): store is KeyReconciler {
  return typeof (store as Partial<KeyReconciler>).reconcileKeys === 'function';
}

/** An account store that can compare teams' and members' budgets with the hot path's and repair them. */
interface ScopeReconciler {
  reconcileScopes(accountId: string): Promise<ScopeStateDifference[]>;
}

function canReconcileScopes(store: object): store is ScopeReconciler {
  return typeof (store as Partial<ScopeReconciler>).reconcileScopes === 'function';
}

export interface Difference {
  accountId: string;
  field: ReconciledField;
  keyId?: string;
  /** The team, for a team's figures. */
  teamId?: string;
  /** The member (user id), for a member's figures. */
  userId?: string;
  month?: string;
  /** What PostgreSQL (or for `held`, the keys' holds) says. */
  expected: Micros;
  /** What the hot path (or the compared record figure) says. */
  actual: Micros;
  /** actual - expected. */
  difference: Micros;
  /** Set when reconciliation put the hot path right from the record on finding it (key state, a copy behind). */
  repaired?: boolean;
}

export interface ReconciliationReport {
  /** Unix ms the comparison ran. */
  at: number;
  accounts: number;
  accountsDiffering: number;
  /** Sum of |difference| over every money difference, micro-USD (key state is not counted). */
  totalDifference: Micros;
  differences: Difference[];
}

export interface ReconcileSources {
  db: Database;
  accounts: AccountStore;
  ledger: Ledger;
  /** Settlements the hot path applied that may not be committed yet (journal streams, writer memory). */
  uncommitted(accountId: string): Promise<JournalEntry[]>;
  now?: () => number;
}

interface RecordFigures {
  balance: number;
  charged: number;
  entriesSum: number;
  usageEntries: number;
  usageRecords: number;
  keyLifetime: Map<string, number>;
  keyLifetimeRow: Map<string, number>;
  keyMonth: Map<string, number>;
  /** Per team and member: what its usage records charged it over its life and this month, and (teams) its row's total. */
  teamLifetime: Map<string, number>;
  teamMonth: Map<string, number>;
  teamLifetimeRow: Map<string, number>;
  memberLifetime: Map<string, number>;
  memberMonth: Map<string, number>;
  /** Key id -> its owner: a pending settlement's member. */
  owners: Map<string, string>;
  committed: Set<string>;
}

async function recordFigures(db: Database, accountId: string, month: string, pendingIds: readonly string[]): Promise<RecordFigures> {
  const [totals, entries, usage, keys, months, committed, teams, members] = await Promise.all([
    db.query<{ balance: number; charged: number }>('SELECT balance, charged FROM account_totals WHERE account_id = $1', [accountId]),
    db.query<{ total: number; usage: number }>(
      `SELECT COALESCE(sum(amount), 0)::bigint AS total, COALESCE(-sum(amount) FILTER (WHERE kind = 'usage'), 0)::bigint AS usage
         FROM ledger_entries WHERE account_id = $1`,
      [accountId],
    ),
    db.query<{ key_id: string; total: number }>('SELECT key_id, sum(cost)::bigint AS total FROM usage_records WHERE account_id = $1 GROUP BY key_id', [accountId]),
    db.query<{ id: string; lifetime_spent: number; owner_user_id: string | null }>('SELECT id, lifetime_spent, owner_user_id FROM api_keys WHERE account_id = $1', [accountId]),
    db.query<{ key_id: string; spent: number }>(
      'SELECT m.key_id, m.spent FROM key_month_spend m WHERE m.month = $2 AND m.key_id IN (SELECT DISTINCT key_id FROM usage_records WHERE account_id = $1)',
      [accountId, month],
    ),
    pendingIds.length === 0
      ? Promise.resolve({ rows: [] as { request_id: string }[] })
      : db.query<{ request_id: string }>('SELECT request_id FROM usage_records WHERE request_id = ANY($1::text[])', [pendingIds]),
    // Every team of the account with what its usage records charged it; the row's own total beside.
    db.query<{ id: string; lifetime_spent: number; total: number; month: number }>(
      `SELECT t.id, t.lifetime_spent, COALESCE(sum(u.cost), 0)::bigint AS total, COALESCE(sum(u.cost) FILTER (WHERE u.billing_month = $2), 0)::bigint AS month
         FROM teams t LEFT JOIN usage_records u ON u.team_id = t.id AND u.account_id = $1 WHERE t.account_id = $1 GROUP BY t.id, t.lifetime_spent`,
      [accountId, month],
    ),
    // Every member's usage: of the keys they own.
    db.query<{ owner: string; total: number; month: number }>(
      `SELECT k.owner_user_id AS owner, sum(u.cost)::bigint AS total, COALESCE(sum(u.cost) FILTER (WHERE u.billing_month = $2), 0)::bigint AS month
         FROM usage_records u JOIN api_keys k ON k.id = u.key_id WHERE u.account_id = $1 AND k.owner_user_id IS NOT NULL GROUP BY k.owner_user_id`,
      [accountId, month],
    ),
  ]);
  const keyLifetime = new Map(usage.rows.map((r) => [r.key_id, r.total]));
  return {
    balance: totals.rows[0]?.balance ?? 0,
    charged: totals.rows[0]?.charged ?? 0,
    entriesSum: entries.rows[0]?.total ?? 0,
    usageEntries: entries.rows[0]?.usage ?? 0,
    usageRecords: [...keyLifetime.values()].reduce((a, b) => a + b, 0),
    keyLifetime,
    keyLifetimeRow: new Map(keys.rows.map((r) => [r.id, r.lifetime_spent])),
    keyMonth: new Map(months.rows.map((r) => [r.key_id, r.spent])),
    teamLifetime: new Map(teams.rows.map((r) => [r.id, Number(r.total)])),
    teamMonth: new Map(teams.rows.map((r) => [r.id, Number(r.month)])),
    teamLifetimeRow: new Map(teams.rows.map((r) => [r.id, Number(r.lifetime_spent)])),
    memberLifetime: new Map(members.rows.map((r) => [r.owner, Number(r.total)])),
    memberMonth: new Map(members.rows.map((r) => [r.owner, Number(r.month)])),
    owners: new Map(keys.rows.filter((r) => r.owner_user_id !== null).map((r) => [r.id, r.owner_user_id as string])),
    committed: new Set(committed.rows.map((r) => r.request_id)),
  };
}

/** Every difference in one account's books (empty when they agree). */
export async function reconcileAccount(src: ReconcileSources, accountId: string): Promise<Difference[]> {
  const now = (src.now ?? Date.now)();
  const month = utcMonth(now);
  const out: Difference[] = [];
  // First: a hot copy that lost writes the record has is loaded again, so the figures below compare the
  // repaired copy (settlements it applied before the loss arrive through the journal's catch-up).
  if (canRepairBehind(src.ledger)) {
    const behind = await src.ledger.repairIfBehind(accountId);
    if (behind !== undefined) out.push({ accountId, field: 'hot_behind', expected: behind.record, actual: behind.hot, difference: behind.hot - behind.record, repaired: true });
  }
  const pendingAll = await src.uncommitted(accountId);
  const rec = await recordFigures(src.db, accountId, month, pendingAll.map((e) => e.requestId));
  // An entry both in the stream and in PostgreSQL was committed and not yet deleted: counted once.
  const pending = pendingAll.filter((e) => !rec.committed.has(e.requestId));
  const check = (field: ReconciledField, expected: number, actual: number, extra: { keyId?: string; teamId?: string; userId?: string; month?: string } = {}): void => {
    if (expected !== actual) out.push({ accountId, field, ...extra, expected, actual, difference: actual - expected });
  };
  check('record_balance', rec.entriesSum, rec.balance);
  check('record_charged', rec.usageEntries, rec.charged);
  check('usage_ledger', rec.usageRecords, rec.usageEntries);

  const pendingCost = pending.reduce((s, e) => s + e.cost, 0);
  const hot = await src.ledger.balance(accountId);
  check('balance', rec.balance - pendingCost, hot.balance);

  const keyIds = new Set<string>([...rec.keyLifetime.keys(), ...rec.keyLifetimeRow.keys(), ...pending.map((e) => e.keyId)]);
  for (const k of await src.accounts.listKeys(accountId)) keyIds.add(k.id);
  let keysHeld = 0;
  for (const keyId of [...keyIds].sort()) {
    const spend = await src.ledger.keySpend(accountId, keyId, now);
    keysHeld += spend.lifetimeHeld;
    const mine = pending.filter((e) => e.keyId === keyId);
    const lifetime = rec.keyLifetime.get(keyId) ?? 0;
    check('key_lifetime', lifetime + mine.reduce((s, e) => s + e.cost, 0), spend.lifetimeSpent, { keyId });
    const row = rec.keyLifetimeRow.get(keyId);
    if (row !== undefined) check('key_lifetime_record', lifetime, row, { keyId });
    const monthPending = mine.filter((e) => e.month === month).reduce((s, e) => s + e.cost, 0);
    check('key_month', (rec.keyMonth.get(keyId) ?? 0) + monthPending, spend.monthSpent, { keyId, month });
  }
  check('held', keysHeld, hot.held);

  // Teams and members: their spend is their requests' charges, kept beside the keys' in the same scripts.
  const pendingOf = (scope: 'team' | 'member', id: string): JournalEntry[] =>
    pending.filter((e) => (scope === 'team' ? e.teamId === id : (e.memberId ?? rec.owners.get(e.keyId)) === id));
  const teamIds = new Set<string>([...rec.teamLifetime.keys(), ...pending.flatMap((e) => (e.teamId ? [e.teamId] : []))]);
  for (const teamId of [...teamIds].sort()) {
    const spend = await src.ledger.scopeSpend(accountId, 'team', teamId, now);
    const mine = pendingOf('team', teamId);
    const lifetime = rec.teamLifetime.get(teamId) ?? 0;
    check('team_lifetime', lifetime + mine.reduce((s, e) => s + e.cost, 0), spend.lifetimeSpent, { teamId });
    const row = rec.teamLifetimeRow.get(teamId);
    if (row !== undefined) check('team_lifetime_record', lifetime, row, { teamId });
    check('team_month', (rec.teamMonth.get(teamId) ?? 0) + mine.filter((e) => e.month === month).reduce((s, e) => s + e.cost, 0), spend.monthSpent, { teamId, month });
  }
  const userIds = new Set<string>([...rec.owners.values(), ...pending.flatMap((e) => (e.memberId ? [e.memberId] : []))]);
  for (const userId of [...userIds].sort()) {
    const spend = await src.ledger.scopeSpend(accountId, 'member', userId, now);
    const mine = pendingOf('member', userId);
    check('member_lifetime', (rec.memberLifetime.get(userId) ?? 0) + mine.reduce((s, e) => s + e.cost, 0), spend.lifetimeSpent, { userId });
    check('member_month', (rec.memberMonth.get(userId) ?? 0) + mine.filter((e) => e.month === month).reduce((s, e) => s + e.cost, 0), spend.monthSpent, { userId, month });
  }

  if (canReconcileKeys(src.accounts)) {
    for (const d of await src.accounts.reconcileKeys(accountId)) out.push({ ...d, difference: d.actual - d.expected, repaired: true });
  }
  if (canReconcileScopes(src.accounts)) {
    for (const d of await src.accounts.reconcileScopes(accountId)) {
      out.push({ accountId, field: d.field, ...(d.scope === 'team' ? { teamId: d.id } : { userId: d.id }), expected: d.expected, actual: d.actual, difference: d.actual - d.expected, repaired: true });
    }
  }
  return out;
}

/** Every account of the record and of the hot path. */
export async function reconcile(src: ReconcileSources, accountIds?: readonly string[]): Promise<ReconciliationReport> {
  const at = (src.now ?? Date.now)();
  let ids = accountIds;
  if (ids === undefined) {
    const fromRecord = (await src.db.query<{ id: string }>('SELECT id FROM accounts ORDER BY id')).rows.map((r) => r.id);
    const fromHot = (await src.accounts.listAccounts()).map((a) => a.id);
    ids = [...new Set([...fromRecord, ...fromHot])].sort();
  }
  const differences: Difference[] = [];
  for (const id of ids) differences.push(...(await reconcileAccount(src, id)));
  return {
    at,
    accounts: ids.length,
    accountsDiffering: new Set(differences.map((d) => d.accountId)).size,
    totalDifference: differences.reduce((s, d) => s + (NOT_MONEY_FIELDS.has(d.field) ? 0 : Math.abs(d.difference)), 0),
    differences,
  };
}

/**
 * The periodic job's pass: a full comparison, then the accounts that differed compared again after
 * `settleMs` (a settlement in flight between the two reads looks like a difference once, not twice).
 */
export async function reconcileSettled(src: ReconcileSources, settleMs = 2_000): Promise<ReconciliationReport> {
  const first = await reconcile(src);
  if (first.differences.length === 0) return first;
  await new Promise((r) => setTimeout(r, settleMs));
  const again = await reconcile(src, [...new Set(first.differences.map((d) => d.accountId))]);
  return { ...again, accounts: first.accounts };
}
