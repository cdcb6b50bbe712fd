// The admin interface: HTTP on its own port, guarded by a bearer admin token. It creates accounts
// and keys, credits balances (idempotently), revokes keys, sets caps, refunds a request, lists
// usage and audits an account. Amounts cross this boundary as decimal USD strings or integer micro-USD.
import { timingSafeEqual } from 'node:crypto';
import Koa, { type Next, type ParameterizedContext } from 'koa';
import Router from '@koa/router';
import getRawBody from 'raw-body';
import type { Backend } from '../billing/backends.js';
import { CreditConflictError } from '../billing/ledger-common.js';
import { formatUsd } from '../billing/money.js';
import type { Micros } from '../catalog/snapshot.js';
import type { ReconciliationReport } from '../record/reconcile.js';

interface AdminState {
  body: Record<string, unknown>;
}
type AdminContext = ParameterizedContext<AdminState> & { params: Record<string, string> };

class AdminError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

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

const USD_PATTERN = /^\d{1,10}(\.\d{1,6})?$/;

/** "12.50" -> 12500000 micro-USD, exactly (integer arithmetic on the digits, no floats). */
function usdToMicros(usd: string, field: string): Micros {
  if (!USD_PATTERN.test(usd)) throw new AdminError(400, `${field} must be a decimal USD string with at most 6 decimals, like "12.50"`);
  const [whole = '0', fraction = ''] = usd.split('.');
  const micros = BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
  if (micros > BigInt(Number.MAX_SAFE_INTEGER)) throw new AdminError(400, `${field} is too large`);
  return Number(micros);
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

const CAP_FIELDS = ['lifetime_cap_usd', 'lifetime_cap_micro_usd', 'monthly_cap_usd', 'monthly_cap_micro_usd'] as const;

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

/** A failed body read (too large, aborted, bad encoding) carries its HTTP status; anything else is ours. */
function clientStatus(err: unknown): number | undefined {
  if (err instanceof AdminError) return err.status;
  if (err instanceof SyntaxError) return 400;
  const status = (err as { status?: unknown; expose?: unknown } | null)?.status;
  const expose = (err as { expose?: unknown } | null)?.expose;
  return typeof status === 'number' && status >= 400 && status < 500 && expose === true ? status : undefined;
}

function clientMessage(err: unknown, status: number): string {
  if (err instanceof AdminError) return err.message;
  // Fixed texts: the parser's own messages quote the body back.
  if (err instanceof SyntaxError) return 'body is not valid JSON';
  if (status === 413) return 'body too large (64 KiB at most)';
  return 'the request body could not be read';
}

export interface AdminApiOptions {
  backend: Backend;
  token: string;
  /** Called after a key is revoked, so this process forgets cached lookups at once. */
  onRevoke?: () => void;
  /** Compares PostgreSQL, the hot path and the usage records now (GET /admin/reconciliation). */
  reconcile?: () => Promise<ReconciliationReport>;
}

export function createAdminApp(opts: AdminApiOptions): Koa<AdminState> {
  const { accounts, ledger } = opts.backend;
  const expected = Buffer.from(`Bearer ${opts.token}`);
  const app = new Koa<AdminState>();
  app.silent = true;
  app.use(async (ctx, next: Next) => {
    try {
      const given = Buffer.from(ctx.get('authorization'));
      if (opts.token === '' || given.length !== expected.length || !timingSafeEqual(given, expected)) {
        throw new AdminError(401, 'admin token missing or wrong: send Authorization: Bearer <TOLLGATE_ADMIN_TOKEN>');
      }
      ctx.state.body = {};
      if (ctx.method === 'POST' || ctx.method === 'PUT') {
        const raw = await getRawBody(ctx.req, { limit: 64 * 1024, encoding: 'utf8' });
        if (raw.length > 0) {
          const parsed: unknown = JSON.parse(raw);
          if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new AdminError(400, 'body must be a JSON object');
          ctx.state.body = parsed as Body;
        }
      }
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new AdminError(404, `no such admin call: ${ctx.method} ${ctx.path}`);
    } catch (err) {
      const status = clientStatus(err);
      ctx.status = status ?? 500;
      ctx.body = { error: { message: status === undefined ? 'internal error' : clientMessage(err, status) } };
    }
  });
  const r = new Router<AdminState>({ prefix: '/admin' });
  const account = async (ctx: AdminContext) => {
    const a = await accounts.getAccount(ctx.params.accountId ?? '');
    if (a === undefined) throw new AdminError(404, 'no such account');
    return a;
  };
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
    ctx.body = { ...a, balance_micro_usd: b.balance, held_micro_usd: b.held, balance_usd: formatUsd(b.balance) };
  });
  r.post('/accounts/:accountId/keys', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, ['name', ...CAP_FIELDS]);
    const name = optionalName(ctx.state.body, 'key');
    const created = await accounts.createKey(a.id, { name, ...capsFrom(ctx.state.body) });
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
    opts.onRevoke?.();
    ctx.body = { revoked: true };
  });
  r.put('/accounts/:accountId/keys/:keyId/caps', async (ctx) => {
    const a = await account(ctx);
    // Every cap not given is cleared, so a misspelt field must not pass for "no cap".
    onlyFields(ctx.state.body, CAP_FIELDS);
    const caps = capsFrom(ctx.state.body);
    const ok = await accounts.setKeyCaps(a.id, ctx.params.keyId ?? '', caps);
    if (!ok) throw new AdminError(404, 'no such key');
    ctx.body = { updated: true, lifetime_cap_micro_usd: caps.lifetimeCap ?? null, monthly_cap_micro_usd: caps.monthlyCap ?? null };
  });
  r.post('/accounts/:accountId/credit', async (ctx) => {
    const a = await account(ctx);
    onlyFields(ctx.state.body, ['amount_usd', 'amount_micro_usd', 'idempotency_key']);
    const micros = amount(ctx.state.body, 'amount_usd', 'amount_micro_usd', true) as Micros;
    if (micros <= 0) throw new AdminError(400, 'a credit must be more than zero');
    const idem = ctx.state.body.idempotency_key;
    if (typeof idem !== 'string' || idem === '' || idem.length > 200) {
      throw new AdminError(400, 'idempotency_key is required (a string of at most 200 characters): a top-up is applied once per key');
    }
    let applied: boolean;
    try {
      applied = await ledger.credit(a.id, micros, idem);
    } catch (err) {
      if (err instanceof RangeError) throw new AdminError(400, 'this credit would take the balance past the largest amount the ledger holds exactly');
      if (err instanceof CreditConflictError) {
        throw new AdminError(409, 'idempotency_key was already used for a credit of a different amount; nothing was credited. Use a new key for a new top-up.');
      }
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
    const outcome = await ledger.refund(a.id, requestId);
    if (outcome.unknown) throw new AdminError(404, 'no settled request with this id on this account (settlement records are kept 30 days)');
    ctx.body = { refunded_micro_usd: outcome.refunded, refunded_usd: formatUsd(outcome.refunded), already_refunded: outcome.duplicate };
  });
  r.get('/accounts/:accountId/usage', async (ctx) => {
    const a = await account(ctx);
    const keyId = queryString(ctx, 'key_id');
    if (keyId !== undefined && (await accounts.getKey(a.id, keyId)) === undefined) throw new AdminError(404, 'no such key');
    const limitText = queryString(ctx, 'limit');
    const limit = limitText === undefined ? 100 : Number(limitText);
    if (!/^\d+$/.test(limitText ?? '100') || limit < 1 || limit > 1000) throw new AdminError(400, 'limit must be an integer from 1 to 1000');
    ctx.body = { usage: await ledger.listUsage(a.id, { ...(keyId === undefined ? {} : { keyId }), limit }) };
  });
  r.get('/accounts/:accountId/audit', async (ctx) => {
    ctx.body = await ledger.audit((await account(ctx)).id);
  });
  r.get('/reconciliation', async (ctx) => {
    if (opts.reconcile === undefined) throw new AdminError(404, 'reconciliation needs the record (PostgreSQL): this gateway runs without one');
    ctx.body = await opts.reconcile();
  });
  app.use(r.routes());
  return app;
}
