// Loading an account's money from the record into a hot path that lost it (a wiped, failed-over or new
// Redis). One statement reads the totals, every key's lifetime spend and this month's spend, every
// team's and member's (a member's is the spend of the keys they own), and the snapshot they were read
// at; the hot path keeps the snapshot, so a settlement or credit committed after the read is still
// applied to it, and one committed before is not applied twice. What commits while the read is on its
// way to the hot path meets an account not loaded yet; the read is taken under a reload mark the hot
// path keeps, which such a commit is told to, and a read that missed one is loaded never: the caller
// reads again (RecordedLedger.seed).
import { randomBytes } from 'node:crypto';
import type { AccountSeed } from '../billing/ledger.js';
import { utcMonth } from '../billing/month.js';
import type { Queryable } from './database.js';

interface SeedRow {
  snapshot: string;
  balance: number;
  credited: number;
  refunded: number;
  charged: number;
  keys: Array<{ k: string; l: number; m: number }>;
  teams: Array<{ k: string; l: number; m: number }>;
  members: Array<{ k: string; l: number; m: number }>;
  record_seq: number;
}

const SEED_SQL = `
SELECT pg_current_snapshot()::text AS snapshot,
       COALESCE(t.balance, 0) AS balance,
       COALESCE(t.credited, 0) - COALESCE(t.reversed, 0) AS credited,
       COALESCE(t.refunded, 0) AS refunded,
       COALESCE(t.charged, 0) AS charged,
       COALESCE((SELECT json_agg(json_build_object('k', k.id, 'l', k.lifetime_spent, 'm', COALESCE(s.spent, 0)))
                   FROM api_keys k LEFT JOIN key_month_spend s ON s.key_id = k.id AND s.month = $2
                  WHERE k.account_id = $1 AND (k.lifetime_spent > 0 OR s.spent > 0)), '[]'::json) AS keys,
       COALESCE((SELECT json_agg(json_build_object('k', t.id, 'l', t.lifetime_spent, 'm', COALESCE(s.spent, 0)))
                   FROM teams t LEFT JOIN team_month_spend s ON s.team_id = t.id AND s.month = $2
                  WHERE t.account_id = $1), '[]'::json) AS teams,
       COALESCE((SELECT json_agg(json_build_object('k', o.owner, 'l', o.l, 'm', o.m))
                   FROM (SELECT k.owner_user_id AS owner, sum(k.lifetime_spent) AS l, sum(COALESCE(s.spent, 0)) AS m
                           FROM api_keys k LEFT JOIN key_month_spend s ON s.key_id = k.id AND s.month = $2
                          WHERE k.account_id = $1 AND k.owner_user_id IS NOT NULL GROUP BY k.owner_user_id) o), '[]'::json) AS members,
       COALESCE((SELECT seq FROM account_hot_seq WHERE account_id = $1), 0) AS record_seq
  FROM (SELECT 1) AS one LEFT JOIN account_totals t ON t.account_id = $1`;

/** A new generation's name: unique per seed, so a settlement can tell which copy took its hold. */
export function newGeneration(now: number): string {
  return `${now.toString(36)}.${randomBytes(4).toString('hex')}`;
}

export async function loadAccountSeed(db: Queryable, accountId: string, opts: { windowMs: number; now: number; reload: string }): Promise<AccountSeed> {
  const month = utcMonth(opts.now);
  const r = await db.query<SeedRow>(SEED_SQL, [accountId, month]);
  const row = r.rows[0];
  if (row === undefined) throw new Error('the seed query returned no row');
  return {
    accountId,
    generation: newGeneration(opts.now),
    snapshot: row.snapshot,
    windowMs: opts.windowMs,
    balance: Number(row.balance),
    credited: Number(row.credited),
    refunded: Number(row.refunded),
    charged: Number(row.charged),
    month,
    keys: row.keys.map((k) => ({ keyId: k.k, lifetimeSpent: Number(k.l), monthSpent: Number(k.m) })),
    teams: row.teams.map((t) => ({ id: t.k, lifetimeSpent: Number(t.l), monthSpent: Number(t.m) })),
    members: row.members.map((m) => ({ id: m.k, lifetimeSpent: Number(m.l), monthSpent: Number(m.m) })),
    recordSeq: Number(row.record_seq),
    reload: opts.reload,
  };
}
