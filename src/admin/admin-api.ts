// The admin interface: HTTP on its own port, guarded by a bearer admin token. It creates accounts
// and keys, credits balances (idempotently), revokes keys, sets caps, refunds a request, lists
// usage and audits an account. Amounts cross this boundary as decimal USD strings or integer micro-USD.
import { timingSafeEqual } from 'node:crypto';
import Koa, { type Next, type ParameterizedContext } from 'koa';
import Router from '@koa/router';
import getRawBody from 'raw-body';
import type { Backend } from '../billing/backends.js';
import { formatUsd } from '../billing/money.js';
import { usdPerMillionToMicros } from '../catalog/price.js';
import type { Micros } from '../catalog/snapshot.js';

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

/** "12.50" USD (or 12500000 micro-USD as an integer) -> micro-USD. */
function amount(body: Record<string, unknown>, usdField: string, microField: string, required: boolean): Micros | undefined {
  const micro = body[microField];
  if (typeof micro === 'number') {
    if (!Number.isSafeInteger(micro) || micro < 0) throw new AdminError(400, `${microField} must be a non-negative integer`);
    return micro;
  }
  const usd = body[usdField];
  if (typeof usd === 'string') {
    try {
      // USD -> micro-USD is the same decimal shift as USD per 1M tokens -> micro-USD per 1M tokens.
      return usdPerMillionToMicros(usd);
    } catch {
      throw new AdminError(400, `${usdField} must be a decimal string with at most 6 decimals, like "12.50"`);
    }
  }
  if (required) throw new AdminError(400, `give ${usdField} (decimal USD string) or ${microField} (integer micro-USD)`);
  return undefined;
}

function capsFrom(body: Record<string, unknown>): { lifetimeCap?: Micros; monthlyCap?: Micros } {
  const lifetimeCap = amount(body, 'lifetime_cap_usd', 'lifetime_cap_micro_usd', false);
  const monthlyCap = amount(body, 'monthly_cap_usd', 'monthly_cap_micro_usd', false);
  return { ...(lifetimeCap === undefined ? {} : { lifetimeCap }), ...(monthlyCap === undefined ? {} : { monthlyCap }) };
}

export interface AdminApiOptions {
  backend: Backend;
  token: string;
  /** Called after a key is revoked, so this process forgets cached lookups at once. */
  onRevoke?: () => void;
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
        const raw = await getRawBody(ctx.req, { limit: 64 * 1024 });
        if (raw.length > 0) {
          const parsed: unknown = JSON.parse(raw.toString('utf8'));
          if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new AdminError(400, 'body must be a JSON object');
          ctx.state.body = parsed as Record<string, unknown>;
        }
      }
      await next();
    } catch (err) {
      ctx.status = err instanceof AdminError ? err.status : err instanceof SyntaxError ? 400 : 500;
      ctx.body = { error: { message: err instanceof AdminError || err instanceof SyntaxError ? err.message : 'internal error' } };
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
    const name = typeof ctx.state.body.name === 'string' ? ctx.state.body.name : 'account';
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
    const name = typeof ctx.state.body.name === 'string' ? ctx.state.body.name : 'key';
    const created = await accounts.createKey(a.id, { name, ...capsFrom(ctx.state.body) });
    ctx.status = 201;
    ctx.body = { key: created.secret, record: created.record, note: 'The key is shown once; only its hash is stored.' };
  });
  r.get('/accounts/:accountId/keys', async (ctx) => {
    ctx.body = { keys: await accounts.listKeys((await account(ctx)).id) };
  });
  r.post('/accounts/:accountId/keys/:keyId/revoke', async (ctx) => {
    const ok = await accounts.revokeKey((await account(ctx)).id, ctx.params.keyId ?? '');
    if (!ok) throw new AdminError(404, 'no such key');
    opts.onRevoke?.();
    ctx.body = { revoked: true };
  });
  r.put('/accounts/:accountId/keys/:keyId/caps', async (ctx) => {
    const ok = await accounts.setKeyCaps((await account(ctx)).id, ctx.params.keyId ?? '', capsFrom(ctx.state.body));
    if (!ok) throw new AdminError(404, 'no such key');
    ctx.body = { updated: true };
  });
  r.post('/accounts/:accountId/credit', async (ctx) => {
    const a = await account(ctx);
    const micros = amount(ctx.state.body, 'amount_usd', 'amount_micro_usd', true) as Micros;
    const idem = ctx.state.body.idempotency_key;
    if (typeof idem !== 'string' || idem === '') throw new AdminError(400, 'idempotency_key is required: a top-up is applied once per key');
    const applied = await ledger.credit(a.id, micros, idem);
    ctx.body = { applied, balance_usd: formatUsd((await ledger.balance(a.id)).balance) };
  });
  r.post('/accounts/:accountId/refund', async (ctx) => {
    const a = await account(ctx);
    const requestId = ctx.state.body.request_id;
    if (typeof requestId !== 'string') throw new AdminError(400, 'request_id is required');
    const refunded = await ledger.refund(a.id, requestId);
    ctx.body = { refunded_micro_usd: refunded, refunded_usd: formatUsd(refunded) };
  });
  r.get('/accounts/:accountId/usage', async (ctx) => {
    const a = await account(ctx);
    const keyId = typeof ctx.query.key_id === 'string' ? ctx.query.key_id : undefined;
    const limit = typeof ctx.query.limit === 'string' ? Math.min(1000, Number(ctx.query.limit) || 100) : 100;
    ctx.body = { usage: await ledger.listUsage(a.id, { ...(keyId ? { keyId } : {}), limit }) };
  });
  r.get('/accounts/:accountId/audit', async (ctx) => {
    ctx.body = await ledger.audit((await account(ctx)).id);
  });
  app.use(r.routes());
  return app;
}
