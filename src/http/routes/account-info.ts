// Balance and usage with the API key, in OpenRouter's field names where it has one (its clients and
// scripts read them) and ours beside them: GET /v1/key (the key: name, caps, its cost ceiling per
// request, spend, what is left, rate limits, its team, and every limit of money on its path with what is
// left of each), GET /v1/credits (the account's money) and GET /v1/generation?id= (one request's usage
// record). Money is integer micro-USD inside and goes out as USD numbers, as OpenRouter sends it, with
// exact `*_micros` integers beside them. Only the calling key's account is ever read.
import type { AccountStore, ApiKeyRecord } from '../../accounts/account-store.js';
import { effectiveRateLimits } from '../../accounts/rate-limits.js';
import type { Ledger, MoneyStanding, UsageRecord } from '../../billing/ledger.js';
import { pathOfKey } from '../../billing/buckets.js';
import { hasTeams, type Team } from '../../accounts/teams.js';
import { LIMITS } from '../../limits/limits.js';
import { formatUsd } from '../../billing/money.js';
import type { Micros } from '../../catalog/snapshot.js';
import type { Queryable } from '../../record/database.js';
import { findUsage, keySpendSince, type RecordedUsage } from '../../record/usage-query.js';
import { GatewayError } from '../../request/gateway-error.js';
import type { LedgerHealth } from '../../billing/ledger-health.js';
import type { GatewayContext } from '../../request/state.js';

export interface AccountInfoDeps {
  ledger: Ledger;
  /** The ledger's health: a ledger that is down is a retryable 503, as for completions, never a 500. */
  health?: LedgerHealth;
  accounts: AccountStore;
  /** The record (PostgreSQL): usage records of the day and week, and one request's record. Without it, the hot path's recent records. */
  record?: Queryable;
  rateLimitWindowMs: number;
}

/** USD as a JSON number, from exact micro-USD (the edge is the only place money becomes a float). */
const usd = (micros: Micros): number => Number(formatUsd(micros));
const DAY_MS = 86_400_000;
/** Usage records the hot path is searched through when there is no record. */
const HOT_USAGE_SCAN = 10_000;

/** A ledger read, through the ledger's health (a 503 ledger_unavailable when it is down). */
function fromLedger<T>(deps: AccountInfoDeps, read: () => Promise<T>): Promise<T> {
  return deps.health === undefined ? read() : deps.health.run(read);
}

/** A record read; the record not answering is a retryable 503, never a 500. */
async function fromRecord<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    throw new GatewayError(503, 'The usage records could not be read just now; retry shortly.', { code: 'usage_records_unavailable', retryAfterSeconds: 1 });
  }
}

function keyOf(ctx: GatewayContext): ApiKeyRecord {
  const key = ctx.state.key;
  if (key === undefined) throw new Error('account routes need an authenticated key');
  return key;
}

/** The start of the UTC day and of the UTC week (Monday) of `now`. */
function periodStarts(now: number): { day: Date; week: Date } {
  const day = Math.floor(now / DAY_MS) * DAY_MS;
  // 1970-01-01 was a Thursday: days since a Monday are (days + 3) mod 7.
  const week = day - ((Math.floor(now / DAY_MS) + 3) % 7) * DAY_MS;
  return { day: new Date(day), week: new Date(week) };
}

async function daySpend(deps: AccountInfoDeps, key: ApiKeyRecord, now: number): Promise<{ day: Micros; week: Micros }> {
  const starts = periodStarts(now);
  const record = deps.record;
  if (record !== undefined) return fromRecord(() => keySpendSince(record, { accountId: key.accountId, keyId: key.id, ...starts }));
  const recent = await fromLedger(deps, () => deps.ledger.listUsage(key.accountId, { keyId: key.id, limit: HOT_USAGE_SCAN }));
  const sum = (since: Date): Micros => recent.filter((u) => u.time >= since.getTime()).reduce((s, u) => s + u.cost, 0);
  return { day: sum(starts.day), week: sum(starts.week) };
}

/** A limit of money on the key's path, as /v1/key lists it: whose it is, its value, what is used and left. */
function limitBody(s: MoneyStanding, key: ApiKeyRecord, teamName: string | undefined): Record<string, unknown> {
  const spec = LIMITS[s.reason];
  const remaining = s.limit === undefined ? undefined : Math.max(0, s.limit - s.used);
  const scopeId = spec.scope === 'team' ? key.teamId : spec.scope === 'member' ? key.ownerId : spec.scope === 'key' ? key.id : key.accountId;
  return {
    id: s.reason,
    scope: spec.scope,
    scope_id: scopeId ?? null,
    ...(spec.scope === 'team' ? { scope_name: teamName ?? null } : {}),
    window: spec.window,
    limit: s.limit === undefined ? null : usd(s.limit),
    used: usd(s.used),
    remaining: remaining === undefined ? null : usd(remaining),
    micros: { limit: s.limit ?? null, used: s.used, remaining: remaining ?? null },
  };
}

/** The key's team as the record has it (its name), when the key is in one and accounts have a record. */
function teamOf(accounts: AccountStore, key: ApiKeyRecord): Promise<Team | undefined> {
  const teamId = key.teamId;
  if (teamId === undefined || !hasTeams(accounts)) return Promise.resolve(undefined);
  return fromRecord(() => accounts.teams.getTeam(key.accountId, teamId));
}

export function currentKey(deps: AccountInfoDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    const key = keyOf(ctx);
    const now = Date.now();
    const [spend, periods, balance, account, standing, team] = await Promise.all([
      fromLedger(deps, () => deps.ledger.keySpend(key.accountId, key.id, now)),
      daySpend(deps, key, now),
      fromLedger(deps, () => deps.ledger.balance(key.accountId)),
      fromLedger(deps, () => deps.accounts.getAccount(key.accountId)),
      fromLedger(deps, () => deps.ledger.moneyStanding(key.accountId, pathOfKey(key), now)),
      teamOf(deps.accounts, key),
    ]);
    const available = Math.max(0, balance.balance - balance.held);
    const lifetimeLeft = key.lifetimeCap === undefined ? undefined : Math.max(0, key.lifetimeCap - spend.lifetimeSpent - spend.lifetimeHeld);
    const monthLeft = key.monthlyCap === undefined ? undefined : Math.max(0, key.monthlyCap - spend.monthSpent - spend.monthHeld);
    // OpenRouter has one limit per key; ours is the cap with the least left (the one that binds first).
    const binding =
      monthLeft !== undefined && (lifetimeLeft === undefined || monthLeft <= lifetimeLeft)
        ? { limit: key.monthlyCap as Micros, left: monthLeft, reset: 'monthly' as const }
        : lifetimeLeft !== undefined
          ? { limit: key.lifetimeCap as Micros, left: lifetimeLeft, reset: null }
          : undefined;
    // What any request of this key can still spend: the least left of every limit of money on its path
    // (the balance, its team's and its member's budgets, its own caps).
    const remaining = standing.reduce((least, st) => (st.limit === undefined ? least : Math.min(least, Math.max(0, st.limit - st.used))), Math.min(available, binding?.left ?? available));
    const limits = effectiveRateLimits(key.rateLimits, account?.rateLimits);
    const perWindow = deps.rateLimitWindowMs === 60_000 ? '1m' : `${deps.rateLimitWindowMs / 1000}s`;
    ctx.body = {
      data: {
        label: key.name,
        name: key.name,
        id: key.id,
        display_hint: key.displayHint,
        created_at: new Date(key.createdAt).toISOString(),
        limit: binding === undefined ? null : usd(binding.limit),
        limit_remaining: binding === undefined ? null : usd(binding.left),
        limit_reset: binding?.reset ?? null,
        usage: usd(spend.lifetimeSpent),
        usage_daily: usd(periods.day),
        usage_weekly: usd(periods.week),
        usage_monthly: usd(spend.monthSpent),
        is_free_tier: false,
        // OpenRouter's shape of a request limit; ours are all in rate_limits.
        rate_limit: limits.requestsPerMinute === undefined ? null : { requests: limits.requestsPerMinute, interval: perWindow },
        rate_limits: {
          requests_per_minute: limits.requestsPerMinute ?? null,
          tokens_per_minute: limits.tokensPerMinute ?? null,
          concurrent_requests: limits.concurrentRequests ?? null,
          interval: perWindow,
        },
        monthly_cap: key.monthlyCap === undefined ? null : usd(key.monthlyCap),
        lifetime_cap: key.lifetimeCap === undefined ? null : usd(key.lifetimeCap),
        // The most one request may cost when its x-tollgate-max-cost-usd header sets less (or none).
        max_cost_per_request: key.maxCostPerRequest === undefined ? null : usd(key.maxCostPerRequest),
        // What this key can spend now: the account's balance not held by requests in flight, within its
        // caps and the budgets of its team and its member.
        remaining: usd(remaining),
        team: key.teamId === undefined ? null : { id: key.teamId, name: team?.name ?? null },
        // Every limit of money on the key's path, in the order they bind on a tie, with what is left of each.
        limits: standing.map((st) => limitBody(st, key, team?.name)),
        held: usd(spend.lifetimeHeld),
        micros: {
          usage: spend.lifetimeSpent,
          usage_daily: periods.day,
          usage_weekly: periods.week,
          usage_monthly: spend.monthSpent,
          held: spend.lifetimeHeld,
          limit: binding?.limit ?? null,
          limit_remaining: binding?.left ?? null,
          monthly_cap: key.monthlyCap ?? null,
          lifetime_cap: key.lifetimeCap ?? null,
          max_cost_per_request: key.maxCostPerRequest ?? null,
          remaining,
        },
      },
    };
  };
}

export function credits(deps: AccountInfoDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    const { accountId } = keyOf(ctx);
    // The hot path's books, current to the last settlement: credited (less reversals) and refunded in,
    // drawn down by usage; credited + refunded - drawn = balance, as OpenRouter's total_credits - total_usage.
    const [books, balance] = await Promise.all([fromLedger(deps, () => deps.ledger.audit(accountId)), fromLedger(deps, () => deps.ledger.balance(accountId))]);
    const totalCredits = books.credited + books.refunded;
    const available = Math.max(0, balance.balance - balance.held);
    ctx.body = {
      data: {
        total_credits: usd(totalCredits),
        total_usage: usd(books.drawnDown),
        balance: usd(books.balance),
        held: usd(balance.held),
        available: usd(available),
        refunded: usd(books.refunded),
        micros: { total_credits: totalCredits, total_usage: books.drawnDown, balance: books.balance, held: balance.held, available, refunded: books.refunded },
      },
    };
  };
}

/**
 * The request id behind an id the client was given: the request id itself (x-request-id, or Anthropic's
 * request-id header), or a chat completion's or a response's id, which are built from it. A message's
 * id is its upstream's, so Messages clients give the request-id header's value.
 */
export function requestIdOf(id: string): string {
  if (id.startsWith('chatcmpl-req_')) return id.slice('chatcmpl-'.length);
  if (id.startsWith('resp_')) return `req_${id.slice('resp_'.length)}`;
  return id;
}

type Generation = Pick<RecordedUsage, 'requestId' | 'keyId' | 'model' | 'usage' | 'cost' | 'status' | 'latencyMs' | 'time' | 'refunded'> & Partial<RecordedUsage>;

async function findGeneration(deps: AccountInfoDeps, accountId: string, requestId: string): Promise<Generation | undefined> {
  const record = deps.record;
  if (record !== undefined) return fromRecord(() => findUsage(record, accountId, requestId));
  const recent: UsageRecord[] = await fromLedger(deps, () => deps.ledger.listUsage(accountId, { limit: HOT_USAGE_SCAN }));
  const found = recent.find((u) => u.requestId === requestId);
  return found === undefined ? undefined : { ...found, refunded: found.refunded === true };
}

export function generation(deps: AccountInfoDeps) {
  return async (ctx: GatewayContext): Promise<void> => {
    const { accountId } = keyOf(ctx);
    const id = ctx.query.id;
    if (typeof id !== 'string' || id === '' || id.length > 200) {
      throw new GatewayError(400, 'Give the id of one request as ?id=: the x-request-id (or request-id) header of its answer, or the id of its chat completion (chatcmpl-…) or response (resp_…).', { code: 'invalid_request', param: 'id' });
    }
    const g = await findGeneration(deps, accountId, requestIdOf(id));
    if (g === undefined) {
      // Another account's request is not found either: nothing tells the two apart.
      throw new GatewayError(404, `No request with id ${id.slice(0, 200)} on this key's account. A request just answered is recorded within a second or two; try again shortly.`, { code: 'generation_not_found', param: 'id' });
    }
    const ttft = g.ttftMs ?? null;
    const startedAt = g.startedAt ?? g.time - g.latencyMs;
    ctx.body = {
      data: {
        id: g.requestId,
        model: g.model,
        provider_name: g.upstream ?? null,
        upstream: g.upstream ?? null,
        key_id: g.keyId,
        created_at: new Date(startedAt).toISOString(),
        total_cost: usd(g.cost),
        usage: usd(g.cost),
        total_cost_micros: g.cost,
        reserved_micros: g.reserved ?? null,
        tokens_prompt: g.usage.input,
        tokens_completion: g.usage.output,
        native_tokens_prompt: g.usage.input,
        native_tokens_completion: g.usage.output,
        native_tokens_cached: g.usage.cachedInput,
        native_tokens_reasoning: g.usage.reasoning,
        finish_reason: g.finishReason ?? null,
        native_finish_reason: g.finishReason ?? null,
        latency: g.latencyMs,
        // From the first token to the end (streams); the whole latency when no first token was timed.
        generation_time: ttft === null ? g.latencyMs : Math.max(0, g.latencyMs - ttft),
        time_to_first_token: ttft,
        status: g.status,
        http_status: g.httpStatus ?? null,
        cancelled: g.status === 'client_cancelled',
        refusal_reason: g.refusalReason ?? null,
        refunded: g.refunded,
      },
    };
  };
}
