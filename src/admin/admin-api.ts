// The admin interface: HTTP on its own port, guarded by a bearer admin token. It creates accounts
// and keys, credits balances (idempotently), revokes keys, sets caps, cost ceilings and rate limits,
// manages teams and members' budgets (with the record), refunds a request, lists usage and audits an account. Amounts cross this boundary as decimal USD strings or integer micro-USD.
// Changes come two ways: a PATCH changes only what its body names (null clears), a PUT replaces a whole
// group (a key's caps, its cost ceiling, its rate limits, an account's default limits) and clears what it
// does not give.
import { timingSafeEqual } from 'node:crypto';
import Koa, { type Next, type ParameterizedContext } from 'koa';
import Router from '@koa/router';
import type { Account, ApiKeyRecord, KeyChange, ScopeBudgets } from '../accounts/account-store.js';
import { MAX_RATE_LIMIT, type RateLimitField, type RateLimits } from '../accounts/rate-limits.js';
import { formatUsd, usdTextToMicros } from '../billing/money.js';
import { CreditRefused, type AccountService, type CreditRefusal } from '../account-service/account-service.js';
import { TeamChangeRefused, type BudgetChange, type Team, type TeamRefusal, type TeamStore } from '../accounts/teams.js';
import type { Micros } from '../catalog/snapshot.js';
import type { TopUpService } from '../top-ups/service.js';
import { ClientError } from '../http/client-error.js';
import { parseJsonObject, readBodyText, type BodyRefusals } from '../http/read-body.js';
import type { Database, Queryable } from '../record/database.js';
import type { ReconciliationReport } from '../record/reconcile.js';
import { statementPage } from '../record/statement.js';
import { dailyKeySpend, listUsagePage, MAX_PAGE_SIZE, REQUEST_STATUSES, UsageQueryError } from '../record/usage-query.js';
import type { Ledger, RequestStatus } from '../billing/ledger.js';

interface AdminState {
  body: Record<string, unknown>;
}
type AdminContext = ParameterizedContext<AdminState> & { params: Record<string, string> };

/** The admin API refuses with the apps' one client error (a top-up's refusal is one too). */
const AdminError = ClientError;

type Body = Record<string, unknown>;

/** Refuses fields a route does not know: a misspelt cap field would otherwise clear the cap. */
function onlyFields(body: Body, allowed: readonly string[]): void {
  const unknown = Object.keys(body).filter((f) => !allowed.includes(f));
  if (unknown.length > 0) throw new AdminError(400, `unknown field ${unknown.join(', ')}; this call takes ${allowed.join(', ')}`);
}

function optionalName(body: Body, fallback: string): string {
  const v = body.name;
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'string' || v.trim() === '' || v.length > 200) throw new AdminError(400, 'name must be a non-empty string of at most 200 characters');
  return v;
}

/** "12.50" -> 12500000 micro-USD, exactly. */
function usdToMicros(usd: string, field: string): Micros {
  const micros = usdTextToMicros(usd);
  if (micros === 'malformed') throw new AdminError(400, `${field} must be a decimal USD string with at most 6 decimals, like "12.50"`);
  if (micros === 'too_large') throw new AdminError(400, `${field} is too large`);
  return micros;
}

/** "12.50" USD (or 12500000 micro-USD as an integer) -> micro-USD; undefined when neither is given (or both null). */
function amount(body: Body, usdField: string, microField: string, required: boolean): Micros | undefined {
  const micro = body[microField] ?? undefined;
  const usd = body[usdField] ?? undefined;
  if (micro !== undefined && usd !== undefined) throw new AdminError(400, `give ${usdField} or ${microField}, not both`);
  if (micro !== undefined) {
    if (typeof micro !== 'number' || !Number.isSafeInteger(micro) || micro < 0) throw new AdminError(400, `${microField} must be a non-negative integer`);
    return micro;
  }
  if (usd !== undefined) {
    if (typeof usd !== 'string') throw new AdminError(400, `${usdField} must be a decimal USD string, like "12.50"`);
    return usdToMicros(usd, usdField);
  }
  if (required) throw new AdminError(400, `give ${usdField} (decimal USD string) or ${microField} (integer micro-USD)`);
  return undefined;
}

/** A refused credit in the admin API's words: status and message. */
const CREDIT_REFUSALS: Record<CreditRefusal, [number, string]> = {
  not_positive: [400, 'a credit must be more than zero'],
  no_idempotency_key: [400, 'idempotency_key is required (a string of at most 200 characters): a top-up is applied once per key'],
  too_large: [400, 'this credit would take the balance past the largest amount the ledger holds exactly'],
  key_reused: [409, 'idempotency_key was already used for a credit of a different amount; nothing was credited. Use a new key for a new top-up.'],
};

const CAP_FIELDS = ['lifetime_cap_usd', 'lifetime_cap_micro_usd', 'monthly_cap_usd', 'monthly_cap_micro_usd'] as const;
/** A key's default cost ceiling per request (the x-tollgate-max-cost-usd header can lower it, not raise it). */
const MAX_COST_FIELDS = ['max_cost_per_request_usd', 'max_cost_per_request_micro_usd'] as const;

function maxCostFrom(body: Body): Micros | undefined {
  return amount(body, 'max_cost_per_request_usd', 'max_cost_per_request_micro_usd', false);
}

/** The rate-limit fields of a body, as the admin API names them, and the limit each sets. */
const LIMIT_FIELDS = {
  requests_per_minute: 'requestsPerMinute',
  tokens_per_minute: 'tokensPerMinute',
  concurrent_requests: 'concurrentRequests',
} as const satisfies Record<string, RateLimitField>;
const LIMIT_FIELD_NAMES = Object.keys(LIMIT_FIELDS) as Array<keyof typeof LIMIT_FIELDS>;

/** Rate limits from a body: each a whole number from 1, or null / absent for none. */
function limitsFrom(body: Body): RateLimits {
  const out: RateLimits = {};
  for (const field of LIMIT_FIELD_NAMES) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > MAX_RATE_LIMIT) {
      throw new AdminError(400, `${field} must be a whole number from 1 to ${MAX_RATE_LIMIT}, or null for no limit`);
    }
    out[LIMIT_FIELDS[field]] = v;
  }
  return out;
}

/** Rate limits as the admin API answers them: every field, null where none is set. */
function limitsBody(limits: RateLimits | undefined): Record<string, number | null> {
  return Object.fromEntries(LIMIT_FIELD_NAMES.map((f) => [f, limits?.[LIMIT_FIELDS[f]] ?? null]));
}

/** The key's amounts a PATCH body may name, each in USD or micro-USD. */
const AMOUNT_FIELDS = [
  ['lifetimeCap', 'lifetime_cap_usd', 'lifetime_cap_micro_usd'],
  ['monthlyCap', 'monthly_cap_usd', 'monthly_cap_micro_usd'],
  ['maxCostPerRequest', 'max_cost_per_request_usd', 'max_cost_per_request_micro_usd'],
] as const;

/**
 * A partial change from a PATCH body: only the fields present change; null clears one. A cap or the
 * cost ceiling may come in USD or micro-USD (not both).
 */
function changeFrom(body: Body): KeyChange {
  const change: KeyChange = {};
  for (const [setting, usdField, microField] of AMOUNT_FIELDS) {
    const named = [usdField, microField].filter((f) => Object.hasOwn(body, f));
    if (named.length === 0) continue;
    if (named.length > 1) throw new AdminError(400, `give ${usdField} or ${microField}, not both`);
    change[setting] = amount(body, usdField, microField, false) ?? null;
  }
  const limits = limitsFrom(body);
  for (const field of LIMIT_FIELD_NAMES) if (Object.hasOwn(body, field)) change[LIMIT_FIELDS[field]] = limits[LIMIT_FIELDS[field]] ?? null;
  return change;
}

/** A key's caps, cost ceiling and own limits as the admin API answers a change: every field, null where none is set. */
function keySettingsBody(k: ApiKeyRecord): Record<string, unknown> {
  return {
    lifetime_cap_micro_usd: k.lifetimeCap ?? null,
    monthly_cap_micro_usd: k.monthlyCap ?? null,
    max_cost_per_request_micro_usd: k.maxCostPerRequest ?? null,
    rate_limits: limitsBody(k.rateLimits),
  };
}

function capsFrom(body: Body): { lifetimeCap?: Micros; monthlyCap?: Micros } {
  const lifetimeCap = amount(body, 'lifetime_cap_usd', 'lifetime_cap_micro_usd', false);
  const monthlyCap = amount(body, 'monthly_cap_usd', 'monthly_cap_micro_usd', false);
  return { ...(lifetimeCap === undefined ? {} : { lifetimeCap }), ...(monthlyCap === undefined ? {} : { monthlyCap }) };
}

function queryString(ctx: AdminContext, name: string): string | undefined {
  const v = ctx.query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new AdminError(400, `give ${name} once`);
  return v;
}

function queryInteger(ctx: AdminContext, name: string, fallback: number, max: number): number {
  const text = queryString(ctx, name);
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!/^\d{1,7}$/.test(text) || n < 1 || n > max) throw new AdminError(400, `${name} must be an integer from 1 to ${max}`);
  return n;
}

/** A time bound: an ISO 8601 date or date-time ("2026-11-01", "2026-11-01T12:00:00Z") or unix ms. */
function queryTime(ctx: AdminContext, name: string): Date | undefined {
  const text = queryString(ctx, name);
  if (text === undefined) return undefined;
  const ms = /^\d{1,15}$/.test(text) ? Number(text) : /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text) ? Date.parse(text) : NaN;
  if (!Number.isFinite(ms)) throw new AdminError(400, `${name} must be an ISO 8601 date or date-time (like 2026-11-01T00:00:00Z) or unix milliseconds`);
  return new Date(ms);
}

/** Filters only the record can answer: the hot path keeps recent usage by account and key alone. */
const RECORD_ONLY_USAGE_FILTERS = ['model', 'status', 'from', 'to', 'cursor'] as const;

const BODY_REFUSALS: BodyRefusals = {
  tooLarge: 'body too large (64 KiB at most)',
  unreadable: 'the request body could not be read',
  notJson: 'body is not valid JSON',
  notObject: 'body must be a JSON object',
};

/** The caller's fault, with its status and message; undefined for anything else (ours: a 500). */
function clientError(err: unknown): { status: number; message: string } | undefined {
  if (err instanceof ClientError) return err;
  if (err instanceof UsageQueryError) return { status: 400, message: err.message };
  return undefined;
}

export interface AdminApiOptions {
  /** The process's one account service (built in the composition root: a revoke there tells the key cache). */
  accounts: AccountService;
  /** Balances, recent usage and audits are read from it. */
  ledger: Ledger;
  token: string;
  /** Compares PostgreSQL, the hot path and the usage records now (GET /admin/reconciliation). */
  reconcile?: () => Promise<ReconciliationReport>;
  /**
   * The record (PostgreSQL or the local run's PGlite): usage, statements and daily spend are read from
   * it, with paging and no cap, and dashboard users' two-factor sign-in is cleared in it. Without it
   * usage is the hot path's recent records only.
   */
  record?: Database;
  /** Structured log lines of what must be on record (a user's two-factor sign-in cleared); default stderr. */
  log?: (line: string) => void;
  /** Top-ups of every account, with their timelines and the re-check action (when a provider is set up). */
  topUps?: TopUpService;
}

interface AdminDeps {
  accounts: AccountService;
  ledger: Ledger;
  opts: AdminApiOptions;
  /** The account the route names, or a 404. */
  account: (ctx: AdminContext) => Promise<Account>;
}

/** The bearer token first, then the JSON body; every refusal answered as `{ error: { message } }`. */
function adminGuard(token: string): Koa.Middleware<AdminState> {
  const expected = Buffer.from(`Bearer ${token}`);
  return async (ctx, next: Next) => {
    try {
      const given = Buffer.from(ctx.get('authorization'));
      if (token === '' || given.length !== expected.length || !timingSafeEqual(given, expected)) {
        throw new AdminError(401, 'admin token missing or wrong: send Authorization: Bearer <TOLLGATE_ADMIN_TOKEN>');
      }
      ctx.state.body = {};
      if (ctx.method === 'POST' || ctx.method === 'PUT' || ctx.method === 'PATCH') {
        const raw = await readBodyText(ctx.req, 64 * 1024, BODY_REFUSALS);
        if (raw.length > 0) ctx.state.body = parseJsonObject(raw, BODY_REFUSALS);
      }
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new AdminError(404, `no such admin call: ${ctx.method} ${ctx.path}`);
    } catch (err) {
      const known = clientError(err);
      ctx.status = known?.status ?? 500;
      ctx.body = { error: { message: known?.message ?? 'internal error' } };
    }
  };
}

/** Accounts and keys: create, read, credit, caps, revoke, refund. */
function accountRoutes(r: Router<AdminState>, { accounts, ledger, opts, account }: AdminDeps): void {
  r.get('/accounts', async (ctx) => {
    ctx.body = { accounts: await accounts.listAccounts() };
  });
  r.post('/accounts', async (ctx) => {
    onlyFields(ctx.state.body, ['name']);
    const name = optionalName(ctx.state.body, 'account');
    ctx.status = 201;
    ctx.body = await accounts.createAccount(name);
  });
  r.get('/accounts/:accountId', async (ctx) => {
    const a = await account(ctx);
    const b = await ledger.balance(a.id);
    ctx.body = { ...a, default_rate_limits: limitsBody(a.rateLimits), balance_micro_usd: b.balance, held_micro_usd: b.held, balance_usd: formatUsd(b.balance) };
  });
  r.post('/accounts/:accountId/keys', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, ['name', ...CAP_FIELDS, ...MAX_COST_FIELDS, ...LIMIT_FIELD_NAMES, 'team_id']);
    const name = optionalName(ctx.state.body, 'key');
    const maxCostPerRequest = maxCostFrom(ctx.state.body);
    const teamId = teamIdFrom(ctx.state.body) ?? undefined;
    if (teamId !== undefined && accounts.teams === undefined) throw new AdminError(404, 'teams live in the record (DATABASE_URL): this gateway runs without one');
    const created = await teamChange(() =>
      accounts.createKey(a.id, {
        name,
        ...capsFrom(ctx.state.body),
        ...(maxCostPerRequest === undefined ? {} : { maxCostPerRequest }),
        rateLimits: limitsFrom(ctx.state.body),
        ...(teamId === undefined ? {} : { teamId }),
      }),
    );
    ctx.status = 201;
    ctx.body = { key: created.secret, record: created.record, note: 'The key is shown once; only its hash is stored.' };
  });
  r.get('/accounts/:accountId/keys', async (ctx) => {
    ctx.body = { keys: await accounts.listKeys((await account(ctx)).id) };
  });
  r.post('/accounts/:accountId/keys/:keyId/revoke', async (ctx) => {
    onlyFields(ctx.state.body, []);
    const ok = await accounts.revokeKey((await account(ctx)).id, ctx.params.keyId ?? '');
    if (!ok) throw new AdminError(404, 'no such key');
    ctx.body = { revoked: true };
  });
  // Partial: only the caps, cost ceiling and limits the body names change (null clears one); the rest are kept.
  r.patch('/accounts/:accountId/keys/:keyId', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, [...CAP_FIELDS, ...MAX_COST_FIELDS, ...LIMIT_FIELD_NAMES, 'team_id']);
    const keyId = ctx.params.keyId ?? '';
    const change = changeFrom(ctx.state.body);
    const teamId = teamIdFrom(ctx.state.body);
    if (teamId !== undefined) {
      const store = accounts.teams;
      if (store === undefined) throw new AdminError(404, 'teams live in the record (DATABASE_URL): this gateway runs without one');
      await teamChange(() => store.setKeyTeam(a.id, keyId, teamId));
    }
    if (!(await accounts.updateKey(a.id, keyId, change))) throw new AdminError(404, 'no such key');
    const k = await accounts.getKey(a.id, keyId);
    if (k === undefined) throw new AdminError(404, 'no such key');
    // The key's team too when the change named it (kept apart from the caps and limits every PATCH answers with).
    ctx.body = { updated: true, ...keySettingsBody(k), ...(teamId === undefined ? {} : { team_id: k.teamId ?? null }) };
  });
  // Replace: both caps as given, a cap not given cleared (PATCH above keeps what it does not name).
  r.put('/accounts/:accountId/keys/:keyId/caps', async (ctx) => {
    const a = await account(ctx);
    // Every cap not given is cleared, so a misspelt field must not pass for "no cap".
    onlyFields(ctx.state.body, CAP_FIELDS);
    const caps = capsFrom(ctx.state.body);
    const ok = await accounts.setCaps(a.id, ctx.params.keyId ?? '', caps);
    if (!ok) throw new AdminError(404, 'no such key');
    ctx.body = { updated: true, lifetime_cap_micro_usd: caps.lifetimeCap ?? null, monthly_cap_micro_usd: caps.monthlyCap ?? null };
  });
  // Replace the key's default cost ceiling per request: none given (or null) clears it (one setting, so
  // the PATCH above with max_cost_per_request_usd does the same).
  r.put('/accounts/:accountId/keys/:keyId/max-cost-per-request', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, MAX_COST_FIELDS);
    const maxCostPerRequest = maxCostFrom(ctx.state.body);
    if (!(await accounts.updateKey(a.id, ctx.params.keyId ?? '', { maxCostPerRequest: maxCostPerRequest ?? null }))) throw new AdminError(404, 'no such key');
    ctx.body = { updated: true, max_cost_per_request_micro_usd: maxCostPerRequest ?? null };
  });
  // Replace: every limit not given is cleared, as with caps.
  r.put('/accounts/:accountId/keys/:keyId/rate-limits', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, LIMIT_FIELD_NAMES);
    const limits = limitsFrom(ctx.state.body);
    if (!(await accounts.setKeyRateLimits(a.id, ctx.params.keyId ?? '', limits))) throw new AdminError(404, 'no such key');
    ctx.body = { updated: true, rate_limits: limitsBody(limits) };
  });
  r.put('/accounts/:accountId/rate-limits', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, LIMIT_FIELD_NAMES);
    const limits = limitsFrom(ctx.state.body);
    if (!(await accounts.setAccountRateLimits(a.id, limits))) throw new AdminError(404, 'no such account');
    ctx.body = { updated: true, default_rate_limits: limitsBody(limits) };
  });
  // Partial: only the default limits the body names change (null clears one).
  r.patch('/accounts/:accountId/rate-limits', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, LIMIT_FIELD_NAMES);
    const limits = limitsFrom(ctx.state.body);
    const change = Object.fromEntries(LIMIT_FIELD_NAMES.filter((f) => Object.hasOwn(ctx.state.body, f)).map((f) => [LIMIT_FIELDS[f], limits[LIMIT_FIELDS[f]] ?? null]));
    if (!(await accounts.updateAccountRateLimits(a.id, change))) throw new AdminError(404, 'no such account');
    ctx.body = { updated: true, default_rate_limits: limitsBody((await accounts.getAccount(a.id))?.rateLimits) };
  });
  r.post('/accounts/:accountId/credit', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, ['amount_usd', 'amount_micro_usd', 'idempotency_key']);
    const micros = amount(ctx.state.body, 'amount_usd', 'amount_micro_usd', true) as Micros;
    let applied: boolean;
    try {
      applied = await accounts.credit(a.id, micros, ctx.state.body.idempotency_key);
    } catch (err) {
      if (err instanceof CreditRefused) throw new AdminError(CREDIT_REFUSALS[err.reason][0], CREDIT_REFUSALS[err.reason][1]);
      throw err;
    }
    const balance = (await ledger.balance(a.id)).balance;
    ctx.body = { applied, balance_micro_usd: balance, balance_usd: formatUsd(balance) };
  });
  r.post('/accounts/:accountId/refund', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, ['request_id']);
    const requestId = ctx.state.body.request_id;
    if (typeof requestId !== 'string' || requestId === '') throw new AdminError(400, 'request_id is required: the id of a settled request');
    const outcome = await accounts.refund(a.id, requestId);
    if (outcome.unknown) {
      throw new AdminError(404, opts.record === undefined
        ? 'no settled request with this id on this account (settlement records are kept 30 days)'
        : 'no usage record with this id on this account (a request just answered is recorded within a second)');
    }
    ctx.body = { refunded_micro_usd: outcome.refunded, refunded_usd: formatUsd(outcome.refunded), already_refunded: outcome.duplicate };
  });
}

/** What the record (or the hot path's recent records) says of an account: usage, statement, spend, audit. */
function recordRoutes(r: Router<AdminState>, { accounts, ledger, opts, account }: AdminDeps): void {
  r.get('/accounts/:accountId/usage', async (ctx) => {
    const a = await account(ctx);
    const keyId = queryString(ctx, 'key_id');
    if (keyId !== undefined && (await accounts.getKey(a.id, keyId)) === undefined) throw new AdminError(404, 'no such key');
    const limit = queryInteger(ctx, 'limit', 100, MAX_PAGE_SIZE);
    const byKey = keyId === undefined ? {} : { keyId };
    if (opts.record === undefined) {
      const given = RECORD_ONLY_USAGE_FILTERS.filter((f) => ctx.query[f] !== undefined);
      if (given.length > 0) throw new AdminError(400, `${given.join(', ')} need the record (DATABASE_URL); this gateway lists only recent usage by account and key`);
      ctx.body = { usage: await ledger.listUsage(a.id, { ...byKey, limit }) };
      return;
    }
    const model = queryString(ctx, 'model');
    const status = queryString(ctx, 'status');
    if (status !== undefined && !(REQUEST_STATUSES as readonly string[]).includes(status)) throw new AdminError(400, `status must be one of ${REQUEST_STATUSES.join(', ')}`);
    const from = queryTime(ctx, 'from');
    const to = queryTime(ctx, 'to');
    const cursor = queryString(ctx, 'cursor');
    const page = await listUsagePage(opts.record, {
      accountId: a.id,
      ...byKey,
      ...(model === undefined ? {} : { model }),
      ...(status === undefined ? {} : { status: status as RequestStatus }),
      ...(from === undefined ? {} : { from }),
      ...(to === undefined ? {} : { to }),
      ...(cursor === undefined ? {} : { cursor }),
      limit,
    });
    ctx.body = { usage: page.records, next_cursor: page.nextCursor ?? null };
  });
  const record = (): Queryable => {
    if (opts.record === undefined) throw new AdminError(404, 'statements and daily spend need the record (DATABASE_URL): this gateway runs without one');
    return opts.record;
  };
  r.get('/accounts/:accountId/statement', async (ctx) => {
    const a = await account(ctx);
    const db = record();
    const cursor = queryString(ctx, 'cursor');
    const page = await statementPage(db, { accountId: a.id, limit: queryInteger(ctx, 'limit', 100, MAX_PAGE_SIZE), ...(cursor === undefined ? {} : { cursor }) });
    ctx.body = { statement: page.lines, next_cursor: page.nextCursor ?? null };
  });
  r.get('/accounts/:accountId/spend', async (ctx) => {
    const a = await account(ctx);
    const db = record();
    const keyId = queryString(ctx, 'key_id');
    if (keyId !== undefined && (await accounts.getKey(a.id, keyId)) === undefined) throw new AdminError(404, 'no such key');
    const days = queryInteger(ctx, 'days', 30, 366);
    ctx.body = { days: await dailyKeySpend(db, { accountId: a.id, days, ...(keyId === undefined ? {} : { keyId }) }) };
  });
  r.get('/accounts/:accountId/audit', async (ctx) => {
    ctx.body = await ledger.audit((await account(ctx)).id);
  });
}

/** A refused change of teams in the admin API's words (the account service's message). */
const TEAM_REFUSAL_STATUS: Record<TeamRefusal, number> = { name_invalid: 400, budget_invalid: 400, name_taken: 409, no_team: 404, no_key: 404, not_a_member: 404 };

async function teamChange<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof TeamChangeRefused) throw new AdminError(TEAM_REFUSAL_STATUS[err.reason], err.message);
    throw err;
  }
}

/** A team's or member's budgets a body may name, each in USD or micro-USD, null to clear. */
const BUDGET_FIELDS = [
  ['lifetimeBudget', 'lifetime_budget_usd', 'lifetime_budget_micro_usd'],
  ['monthlyBudget', 'monthly_budget_usd', 'monthly_budget_micro_usd'],
] as const;
const BUDGET_FIELD_NAMES = BUDGET_FIELDS.flatMap(([, usd, micro]) => [usd, micro]);

/** Budgets named by a body: only those present change, null clears one. */
function budgetChangeFrom(body: Body): BudgetChange {
  const change: BudgetChange = {};
  for (const [budget, usdField, microField] of BUDGET_FIELDS) {
    const named = [usdField, microField].filter((f) => Object.hasOwn(body, f));
    if (named.length === 0) continue;
    if (named.length > 1) throw new AdminError(400, `give ${usdField} or ${microField}, not both`);
    change[budget] = amount(body, usdField, microField, false) ?? null;
  }
  return change;
}

/** The team the body names for a key: `team_id` (null for none), undefined when it names none. */
function teamIdFrom(body: Body): string | null | undefined {
  if (!Object.hasOwn(body, 'team_id')) return undefined;
  const v = body.team_id;
  if (v !== null && (typeof v !== 'string' || v === '')) throw new AdminError(400, "team_id must be a team's id, or null for none");
  return v;
}

/** Teams, members' budgets and keys' teams: kept in the record, so only with one. */
function teamRoutes(r: Router<AdminState>, { accounts, ledger, account }: AdminDeps): void {
  const teams = (): TeamStore => {
    if (accounts.teams === undefined) throw new AdminError(404, 'teams and budgets live in the record (DATABASE_URL): this gateway runs without one');
    return accounts.teams;
  };
  const spend = async (accountId: string, scope: 'team' | 'member', id: string): Promise<Record<string, number>> => {
    const s = await ledger.scopeSpend(accountId, scope, id);
    return { month_spent_micro_usd: s.monthSpent, lifetime_spent_micro_usd: s.lifetimeSpent, held_micro_usd: s.lifetimeHeld };
  };
  const teamBody = async (t: Team): Promise<Record<string, unknown>> => ({
    id: t.id,
    name: t.name,
    created_at: new Date(t.createdAt).toISOString(),
    monthly_budget_micro_usd: t.monthlyBudget ?? null,
    lifetime_budget_micro_usd: t.lifetimeBudget ?? null,
    member_ids: t.memberIds,
    ...(await spend(t.accountId, 'team', t.id)),
  });
  const found = (t: Team | undefined): Team => {
    if (t === undefined) throw new AdminError(404, 'no such team');
    return t;
  };
  r.get('/accounts/:accountId/teams', async (ctx) => {
    ctx.body = { teams: await Promise.all((await teams().listTeams((await account(ctx)).id)).map(teamBody)) };
  });
  r.post('/accounts/:accountId/teams', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, ['name', ...BUDGET_FIELD_NAMES]);
    const change = budgetChangeFrom(ctx.state.body);
    const name = typeof ctx.state.body.name === 'string' ? ctx.state.body.name : '';
    const budgets: ScopeBudgets = {};
    if (typeof change.lifetimeBudget === 'number') budgets.lifetimeBudget = change.lifetimeBudget;
    if (typeof change.monthlyBudget === 'number') budgets.monthlyBudget = change.monthlyBudget;
    const team = await teamChange(() => teams().createTeam(a.id, name, budgets));
    ctx.status = 201;
    ctx.body = { team: await teamBody(team) };
  });
  // Partial: the name and the budgets the body names change (null clears a budget).
  r.patch('/accounts/:accountId/teams/:teamId', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, ['name', ...BUDGET_FIELD_NAMES]);
    const name = ctx.state.body.name;
    if (name !== undefined && typeof name !== 'string') throw new AdminError(400, "name must be the team's name");
    const team = await teamChange(() => teams().updateTeam(a.id, ctx.params.teamId ?? '', { ...budgetChangeFrom(ctx.state.body), ...(name === undefined ? {} : { name }) }));
    ctx.body = { team: await teamBody(found(team)) };
  });
  r.delete('/accounts/:accountId/teams/:teamId', async (ctx) => {
    const a = await account(ctx);
    if (!(await teams().deleteTeam(a.id, ctx.params.teamId ?? ''))) throw new AdminError(404, 'no such team');
    ctx.body = { deleted: true, note: "The team's keys left it; what they spent stays charged to it." };
  });
  for (const [method, inTeam] of [['put', true], ['delete', false]] as const) {
    r[method]('/accounts/:accountId/teams/:teamId/members/:userId', async (ctx) => {
      const a = await account(ctx);
      ctx.body = { team: await teamBody(await teamChange(() => teams().setTeamMember(a.id, ctx.params.teamId ?? '', ctx.params.userId ?? '', inTeam))) };
    });
  }
  r.get('/accounts/:accountId/budgets', async (ctx) => {
    const a = await account(ctx);
    const set = await teams().listMemberBudgets(a.id);
    ctx.body = {
      members: await Promise.all(
        set.map(async (b) => ({ user_id: b.userId, monthly_budget_micro_usd: b.monthlyBudget ?? null, lifetime_budget_micro_usd: b.lifetimeBudget ?? null, ...(await spend(a.id, 'member', b.userId)) })),
      ),
    };
  });
  r.patch('/accounts/:accountId/members/:userId/budgets', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, BUDGET_FIELD_NAMES);
    const userId = ctx.params.userId ?? '';
    const b = await teamChange(() => teams().setMemberBudgets(a.id, userId, budgetChangeFrom(ctx.state.body)));
    ctx.body = { user_id: userId, monthly_budget_micro_usd: b.monthlyBudget ?? null, lifetime_budget_micro_usd: b.lifetimeBudget ?? null, ...(await spend(a.id, 'member', userId)) };
  });
}

/** Dashboard users: an account's members, and a locked-out user's two-factor sign-in turned off (lost phone and recovery codes). */
function dashboardUserRoutes(r: Router<AdminState>, { opts, account }: AdminDeps): void {
  r.get('/accounts/:accountId/members', async (ctx) => {
    const a = await account(ctx);
    if (opts.record === undefined) throw new AdminError(404, 'dashboard members live in the record (DATABASE_URL): this gateway runs without one');
    // Loaded when used, as below: the dashboard's modules are not the admin API's to carry.
    const { membersOf } = await import('../dashboard/memberships.js');
    const organization = (await opts.record.query<{ name: string }>('SELECT name FROM organizations WHERE account_id = $1 AND deleted_at IS NULL', [a.id])).rows[0]?.name ?? null;
    ctx.body = {
      account_id: a.id,
      organization,
      members: (await membersOf(opts.record, a.id)).map((m) => ({ user_id: m.userId, email: m.email, role: m.role, joined_at: m.joinedAt.toISOString(), totp_enabled: m.totpEnabled })),
    };
  });
  r.post('/dashboard-users/clear-two-factor', async (ctx) => {
    onlyFields(ctx.state.body, ['email']);
    const email = ctx.state.body.email;
    if (typeof email !== 'string' || email.trim() === '') throw new AdminError(400, 'email is required: the address the user signs in to the dashboard with');
    if (opts.record === undefined) throw new AdminError(404, 'dashboard users live in the record (DATABASE_URL): this gateway runs without one');
    // Loaded when used: the dashboard's mail and TOTP modules are not the admin API's to carry.
    const { clearSecondFactor } = await import('../dashboard/two-factor.js');
    const done = await clearSecondFactor(opts.record, { email }, { adminApi: true }, opts.log ?? ((l) => process.stderr.write(`${l}\n`)));
    if (done === undefined) throw new AdminError(404, 'no dashboard user with this e-mail');
    ctx.body = { email: done.email, cleared: done.cleared, note: done.cleared ? 'Two-factor sign-in is off; the user was mailed and every session of theirs ended.' : 'Two-factor sign-in was already off.' };
  });
}

/** Top-ups of every account, and the reconciliation of the books. */
function topUpRoutes(r: Router<AdminState>, { accounts, opts }: AdminDeps): void {
  const topUps = (): TopUpService => {
    if (opts.topUps === undefined) throw new AdminError(404, 'top-ups are not set up on this gateway (no payment provider, or no dashboard)');
    return opts.topUps;
  };
  r.get('/top-ups', async (ctx) => {
    const accountId = queryString(ctx, 'account_id');
    if (accountId !== undefined && (await accounts.getAccount(accountId)) === undefined) throw new AdminError(404, 'no such account');
    ctx.body = { top_ups: await topUps().list(accountId, queryInteger(ctx, 'limit', 50, 1000)) };
  });
  r.get('/top-ups/:topUpId', async (ctx) => {
    ctx.body = { top_up: await topUps().get(undefined, ctx.params.topUpId ?? '') };
  });
  r.post('/top-ups/:topUpId/recheck', async (ctx) => {
    ctx.body = { top_up: await topUps().recheck(undefined, ctx.params.topUpId ?? '') };
  });
  r.get('/reconciliation', async (ctx) => {
    if (opts.reconcile === undefined) throw new AdminError(404, 'reconciliation needs the record (PostgreSQL): this gateway runs without one');
    ctx.body = await opts.reconcile();
  });
}

export function createAdminApp(opts: AdminApiOptions): Koa<AdminState> {
  const { accounts, ledger } = opts;
  const app = new Koa<AdminState>();
  app.silent = true;
  app.use(adminGuard(opts.token));
  const r = new Router<AdminState>({ prefix: '/admin' });
  const account = async (ctx: AdminContext): Promise<Account> => {
    const a = await accounts.getAccount(ctx.params.accountId ?? '');
    if (a === undefined) throw new AdminError(404, 'no such account');
    return a;
  };
  const deps: AdminDeps = { accounts, ledger, opts, account };
  accountRoutes(r, deps);
  recordRoutes(r, deps);
  topUpRoutes(r, deps);
  dashboardUserRoutes(r, deps);
  teamRoutes(r, deps);
  app.use(r.routes());
  return app;
}
