// Totals of usage of record over a filter, per key and team: requests, cost, refunds and tokens, and the
// spend per UTC day. The dashboard folds them into totals per member (a key's owner) or per team; they
// are read per (key, team) because a key's owner is the account store's, and the team is the record's
// (usage_records.team_id: the team the key was in when the request was reserved).
import type { Micros } from '../billing/ledger.js';
import type { Queryable } from './database.js';
import { usageWhere, type UsageFilter } from './usage-query.js';

/** What a set of requests came to. Money in micro-USD. */
export interface UsageTotals {
  requests: number;
  /** What was charged (refunded charges included: a refund is its own movement). */
  cost: Micros;
  /** The part of `cost` refunded since. */
  refunded: Micros;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  cacheWrite5mTokens: number;
  cacheWrite1hTokens: number;
  reasoningTokens: number;
}

export interface KeyTeamTotals extends UsageTotals {
  keyId: string;
  teamId: string | null;
}

export interface KeyTeamDaySpend {
  keyId: string;
  teamId: string | null;
  /** UTC calendar day, YYYY-MM-DD. */
  day: string;
  spent: Micros;
}

export const NO_USAGE: UsageTotals = Object.freeze({ requests: 0, cost: 0, refunded: 0, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheWrite5mTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0 });

/** Two totals added (exact: every figure is an integer well inside 2^53). */
export function addTotals(a: UsageTotals, b: UsageTotals): UsageTotals {
  return {
    requests: a.requests + b.requests,
    cost: a.cost + b.cost,
    refunded: a.refunded + b.refunded,
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
    cacheWrite5mTokens: a.cacheWrite5mTokens + b.cacheWrite5mTokens,
    cacheWrite1hTokens: a.cacheWrite1hTokens + b.cacheWrite1hTokens,
    reasoningTokens: a.reasoningTokens + b.reasoningTokens,
  };
}

interface TotalsRow {
  key_id: string;
  team_id: string | null;
  requests: number | string;
  cost: number | string;
  refunded: number | string;
  input_tokens: number | string;
  output_tokens: number | string;
  cached_input_tokens: number | string;
  cache_write_5m_tokens: number | string;
  cache_write_1h_tokens: number | string;
  reasoning_tokens: number | string;
}

/** The matching requests' totals per (key, team), largest cost first. */
export async function usageTotalsByKeyAndTeam(db: Queryable, filter: UsageFilter): Promise<KeyTeamTotals[]> {
  const { where, params } = usageWhere(filter);
  const r = await db.query<TotalsRow>(
    `SELECT key_id, team_id, count(*)::bigint AS requests, coalesce(sum(cost), 0)::bigint AS cost,
            coalesce(sum(cost) FILTER (WHERE refunded_at IS NOT NULL), 0)::bigint AS refunded,
            coalesce(sum(input_tokens), 0)::bigint AS input_tokens, coalesce(sum(output_tokens), 0)::bigint AS output_tokens,
            coalesce(sum(cached_input_tokens), 0)::bigint AS cached_input_tokens, coalesce(sum(cache_write_5m_tokens), 0)::bigint AS cache_write_5m_tokens,
            coalesce(sum(cache_write_1h_tokens), 0)::bigint AS cache_write_1h_tokens, coalesce(sum(reasoning_tokens), 0)::bigint AS reasoning_tokens
       FROM usage_records WHERE ${where.join(' AND ')}
      GROUP BY key_id, team_id ORDER BY 4 DESC, 1, 2`,
    params,
  );
  return r.rows.map((row) => ({
    keyId: row.key_id,
    teamId: row.team_id,
    requests: Number(row.requests),
    cost: Number(row.cost),
    refunded: Number(row.refunded),
    inputTokens: Number(row.input_tokens),
    outputTokens: Number(row.output_tokens),
    cachedInputTokens: Number(row.cached_input_tokens),
    cacheWrite5mTokens: Number(row.cache_write_5m_tokens),
    cacheWrite1hTokens: Number(row.cache_write_1h_tokens),
    reasoningTokens: Number(row.reasoning_tokens),
  }));
}

/** The matching requests' spend per (key, team, UTC day), oldest day first; days without spend are absent. */
export async function daySpendByKeyAndTeam(db: Queryable, filter: UsageFilter): Promise<KeyTeamDaySpend[]> {
  const { where, params } = usageWhere(filter);
  const r = await db.query<{ key_id: string; team_id: string | null; day: string; spent: number | string }>(
    `SELECT key_id, team_id, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, sum(cost)::bigint AS spent
       FROM usage_records WHERE ${where.join(' AND ')} AND cost > 0
      GROUP BY 1, 2, 3 ORDER BY 3, 1, 2`,
    params,
  );
  return r.rows.map((row) => ({ keyId: row.key_id, teamId: row.team_id, day: row.day, spent: Number(row.spent) }));
}
