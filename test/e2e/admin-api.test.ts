// The admin API against the real admin server over loopback, on the Redis backend the gateway uses:
// the bearer token, accounts, keys (shown once, stored as a hash), idempotent credits, caps, revocation
// as the gateway sees it, refunds, usage and audit; bad input is a 400 with a JSON error, unknown ids
// a 404, never a 500. Also the CLI over the same server. With the record (PostgreSQL), usage,
// statements and daily spend come from it: more than 10,000 records paged through completely.
import { AccountService } from '../../src/account-service/account-service.js';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { hashApiKey } from '../../src/accounts/api-key.js';
import { startAdminServer } from '../../src/admin/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { until } from './e2e-support.js';

const TOKEN = `adm-${randomBytes(18).toString('base64url')}`;
const MODEL = 'outlaw-1-xploded';

type Json = Record<string, unknown>;
interface Reply {
  status: number;
  body: Json;
  text: string;
}

let h: Harness;
let admin: { url: string; close(): Promise<void> };
/** A second admin server with no hook into the gateway's key cache, as on another replica. */
let remoteAdmin: { url: string; close(): Promise<void> };
let redis: Redis;
const recordDb = useTestDatabase('admin_usage');

beforeAll(async () => {
  h = await startHarness({ ledger: 'redis' });
  // This process's one account service (its revokes reach the gateway's key cache); another replica has its own.
  admin = await startAdminServer({ accounts: new AccountService({ accounts: h.backend.accounts, ledger: h.backend.ledger, onRevoke: () => h.gateway.authenticator.forget() }), ledger: h.backend.ledger, token: TOKEN }, 0, '127.0.0.1');
  remoteAdmin = await startAdminServer({ accounts: new AccountService({ accounts: h.backend.accounts, ledger: h.backend.ledger }), ledger: h.backend.ledger, token: TOKEN }, 0, '127.0.0.1');
  redis = new Redis(inject('redisUrl'));
});

afterAll(async () => {
  await admin?.close();
  await remoteAdmin?.close();
  await h?.close();
  await redis?.quit();
});

interface CallOptions {
  token?: string | null;
  raw?: string;
  base?: string;
  authorization?: string;
}

/** One admin call. Every reply is JSON, below 500, and never carries the admin token. */
async function call(method: string, path: string, body?: unknown, o: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const token = o.token === undefined ? TOKEN : o.token;
  if (o.authorization !== undefined) headers.authorization = o.authorization;
  else if (token !== null) headers.authorization = `Bearer ${token}`;
  const payload = o.raw ?? (body === undefined ? undefined : JSON.stringify(body));
  const res = await fetch(`${o.base ?? admin.url}/admin${path}`, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
  const text = await res.text();
  expect(res.status, `${method} ${path}: ${text}`).toBeLessThan(500);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(text).not.toContain(TOKEN);
  return { status: res.status, body: JSON.parse(text) as Json, text };
}

function errorOf(r: Reply): string {
  const e = r.body.error as { message?: unknown } | undefined;
  expect(typeof e?.message).toBe('string');
  return e?.message as string;
}

async function newAccount(name = 'acme'): Promise<string> {
  const r = await call('POST', '/accounts', { name });
  expect(r.status).toBe(201);
  return r.body.id as string;
}

async function newKey(accountId: string, body: Json = {}): Promise<{ key: string; keyId: string }> {
  const r = await call('POST', `/accounts/${accountId}/keys`, body);
  expect(r.status).toBe(201);
  return { key: r.body.key as string, keyId: (r.body.record as Json).id as string };
}

async function fund(accountId: string, usd = '5.00'): Promise<void> {
  const r = await call('POST', `/accounts/${accountId}/credit`, { amount_usd: usd, idempotency_key: `fund-${randomBytes(6).toString('hex')}` });
  expect(r.body.applied).toBe(true);
}

function complete(key: string, gatewayUrl = h.baseUrl): Promise<Response> {
  return fetch(`${gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'Say something short.' }] }),
  });
}

/** Every key and value in one Redis namespace, as text. */
async function dumpNamespace(ns: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${ns}:*`, 'COUNT', 1000);
    cursor = next;
    for (const k of keys) {
      out.push(k);
      const type = await redis.type(k);
      if (type === 'string') out.push((await redis.get(k)) ?? '');
      else if (type === 'hash') out.push(JSON.stringify(await redis.hgetall(k)));
      else if (type === 'zset') out.push(JSON.stringify(await redis.zrange(k, 0, -1, 'WITHSCORES')));
      else if (type === 'stream') out.push(JSON.stringify(await redis.xrange(k, '-', '+')));
      else if (type === 'set') out.push(JSON.stringify(await redis.smembers(k)));
      else if (type === 'list') out.push(JSON.stringify(await redis.lrange(k, 0, -1)));
      else throw new Error(`unexpected key type ${type} of ${k}`);
    }
  } while (cursor !== '0');
  return out;
}

describe('the admin token', () => {
  it('is required: none, a wrong one, another scheme or a prefix of it are 401, and the reply never echoes it', async () => {
    const wrong = `adm-${randomBytes(18).toString('base64url')}`;
    for (const o of [
      { token: null },
      { token: wrong },
      { token: '' },
      { token: TOKEN.slice(0, -1) },
      { token: `${TOKEN}x` },
      { authorization: `Basic ${TOKEN}` },
      { authorization: TOKEN },
      { authorization: `bearer ${TOKEN}` },
    ] satisfies CallOptions[]) {
      for (const [method, path] of [['GET', '/accounts'], ['POST', '/accounts'], ['GET', '/no-such-route']] as const) {
        const r = await call(method, path, method === 'POST' ? { name: 'x' } : undefined, o);
        expect(r.status, JSON.stringify(o)).toBe(401);
        expect(errorOf(r)).toMatch(/admin token missing or wrong/);
        expect(r.text).not.toContain(wrong);
      }
    }
    // No account was created by the refused POSTs.
    const list = await call('GET', '/accounts');
    expect((list.body.accounts as Json[]).filter((a) => a.name === 'x')).toEqual([]);
  });

  it('an admin server with an empty token refuses everything', async () => {
    const closed = await startAdminServer({ accounts: new AccountService({ accounts: h.backend.accounts, ledger: h.backend.ledger }), ledger: h.backend.ledger, token: '' }, 0, '127.0.0.1');
    try {
      for (const o of [{ token: '' }, { token: null }, { authorization: 'Bearer ' }] satisfies CallOptions[]) {
        expect((await call('GET', '/accounts', undefined, { ...o, base: closed.url })).status).toBe(401);
      }
    } finally {
      await closed.close();
    }
  });
});

describe('accounts and keys', () => {
  it('creates an account, lists it and shows its balance', async () => {
    const created = await call('POST', '/accounts', { name: 'acme corp' });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: expect.stringMatching(/^acct_[A-Za-z0-9]{16}$/), name: 'acme corp', createdAt: expect.any(Number) });
    const id = created.body.id as string;
    const list = await call('GET', '/accounts');
    expect(list.status).toBe(200);
    expect(list.body.accounts).toContainEqual(created.body);
    const one = await call('GET', `/accounts/${id}`);
    expect(one.body).toEqual({
      ...created.body,
      default_rate_limits: { requests_per_minute: null, tokens_per_minute: null, concurrent_requests: null },
      balance_micro_usd: 0,
      held_micro_usd: 0,
      balance_usd: '0.000000',
    });
    // A body-less create gets the default name.
    const unnamed = await call('POST', '/accounts');
    expect(unnamed.status).toBe(201);
    expect(unnamed.body.name).toBe('account');
  });

  it('shows a new key once; Redis holds only its hash, and the gateway accepts it', async () => {
    const accountId = await newAccount();
    await fund(accountId);
    const r = await call('POST', `/accounts/${accountId}/keys`, { name: 'ci', lifetime_cap_usd: '20', monthly_cap_micro_usd: 5_000_000 });
    expect(r.status).toBe(201);
    const key = r.body.key as string;
    expect(key).toMatch(/^sk-tg-[A-Za-z0-9]{43}$/);
    const record = r.body.record as Json;
    expect(record).toEqual({
      id: expect.stringMatching(/^key_/), accountId, name: 'ci', displayHint: `sk-tg-${key.slice(6, 10)}…${key.slice(-4)}`,
      createdAt: expect.any(Number), lifetimeCap: 20_000_000, monthlyCap: 5_000_000,
    });
    // Listed without the secret.
    const keys = await call('GET', `/accounts/${accountId}/keys`);
    expect(keys.body.keys).toEqual([record]);
    expect(keys.text).not.toContain(key.slice(6));

    // In Redis: the SHA-256 of the key points at the record; the plaintext is nowhere in the namespace.
    const hash = hashApiKey(key);
    const [, found] = await redis.scan('0', 'MATCH', `*:keyhash:${hash}`, 'COUNT', 1_000_000);
    expect(found).toHaveLength(1);
    const hashKey = found[0] as string;
    expect(await redis.get(hashKey)).toBe(`${accountId} ${record.id as string}`);
    const ns = hashKey.slice(0, hashKey.indexOf(':keyhash:'));
    const dump = await dumpNamespace(ns);
    expect(dump.join('\n')).toContain(accountId);
    for (const entry of dump) expect(entry).not.toContain(key.slice(6));

    const res = await complete(key);
    expect(res.status).toBe(200);
    await res.json();
  });

  it('credits once per idempotency key, in USD or micro-USD, beyond 9,999 USD too', async () => {
    const accountId = await newAccount();
    const first = await call('POST', `/accounts/${accountId}/credit`, { amount_usd: '12.50', idempotency_key: 'pay-1' });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ applied: true, balance_micro_usd: 12_500_000, balance_usd: '12.500000' });
    const again = await call('POST', `/accounts/${accountId}/credit`, { amount_usd: '12.50', idempotency_key: 'pay-1' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ applied: false, balance_micro_usd: 12_500_000, balance_usd: '12.500000' });
    // A retry must repeat the amount: the same key with another amount is a conflict, and nothing is credited.
    const conflict = await call('POST', `/accounts/${accountId}/credit`, { amount_micro_usd: 1, idempotency_key: 'pay-1' });
    expect(conflict.status).toBe(409);
    expect(JSON.stringify(conflict.body)).toMatch(/different amount/);
    expect((await call('POST', `/accounts/${accountId}/credit`, { amount_usd: '12.500000', idempotency_key: 'pay-1' })).body.applied).toBe(false);
    expect((await call('POST', `/accounts/${accountId}/credit`, { amount_micro_usd: 7, idempotency_key: 'pay-2' })).body).toEqual({
      applied: true, balance_micro_usd: 12_500_007, balance_usd: '12.500007',
    });
    expect((await call('POST', `/accounts/${accountId}/credit`, { amount_usd: '25000', idempotency_key: 'pay-3' })).body).toMatchObject({
      applied: true, balance_micro_usd: 25_012_500_007,
    });
    const audit = await call('GET', `/accounts/${accountId}/audit`);
    expect(audit.body).toEqual({
      accountId, credited: 25_012_500_007, refunded: 0, balance: 25_012_500_007, drawnDown: 0, usageTotal: 0, difference: 0, holdsOutstanding: 0,
    });
  });

  it('sets and clears caps; the gateway applies them at once', async () => {
    const accountId = await newAccount();
    await fund(accountId);
    const { key, keyId } = await newKey(accountId);
    const set = await call('PUT', `/accounts/${accountId}/keys/${keyId}/caps`, { lifetime_cap_usd: '0.000003', monthly_cap_micro_usd: 1 });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ updated: true, lifetime_cap_micro_usd: 3, monthly_cap_micro_usd: 1 });
    expect((await call('GET', `/accounts/${accountId}/keys`)).body.keys).toEqual([expect.objectContaining({ id: keyId, lifetimeCap: 3, monthlyCap: 1 })]);
    const refused = await complete(key);
    expect(refused.status).toBe(402);
    // The monthly cap has the least left, so it is the one named.
    expect(((await refused.json()) as { error: Json }).error).toMatchObject({ code: 'key_monthly_cap_reached', available_micro_usd: 1 });

    const cleared = await call('PUT', `/accounts/${accountId}/keys/${keyId}/caps`, {});
    expect(cleared.body).toEqual({ updated: true, lifetime_cap_micro_usd: null, monthly_cap_micro_usd: null });
    const keys = (await call('GET', `/accounts/${accountId}/keys`)).body.keys as Json[];
    expect(keys[0]).not.toHaveProperty('lifetimeCap');
    expect(keys[0]).not.toHaveProperty('monthlyCap');
    const ok = await complete(key);
    expect(ok.status).toBe(200);
    await ok.json();
  });

  it("sets and clears a key's max cost per request; the gateway serves within it; bad values are 400s and change nothing", async () => {
    const accountId = await newAccount();
    await fund(accountId);
    const created = await call('POST', `/accounts/${accountId}/keys`, { name: 'agent', max_cost_per_request_usd: '0.0005' });
    expect(created.status).toBe(201);
    expect(created.body.record).toMatchObject({ name: 'agent', maxCostPerRequest: 500 });
    const key = created.body.key as string;
    const keyId = (created.body.record as Json).id as string;
    const sentLimit = async (): Promise<number | null> => {
      const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, max_tokens: 2_000, messages: [{ role: 'user', content: 'Say something short.' }] }),
      });
      expect(res.status).toBe(200);
      await res.json();
      const named = res.headers.get('x-tollgate-max-tokens');
      return named === null ? null : Number(named);
    };
    const underDefault = await sentLimit();
    expect(underDefault).toBeGreaterThan(0);
    expect(underDefault).toBeLessThan(2_000);

    const set = await call('PUT', `/accounts/${accountId}/keys/${keyId}/max-cost-per-request`, { max_cost_per_request_micro_usd: 300 });
    expect(set.body).toEqual({ updated: true, max_cost_per_request_micro_usd: 300 });
    expect((await call('GET', `/accounts/${accountId}/keys`)).body.keys).toEqual([expect.objectContaining({ id: keyId, maxCostPerRequest: 300 })]);
    // The gateway's key cache holds a lookup for TOLLGATE_KEY_CACHE_TTL_MS (1 s).
    await until('the lower default to reach the gateway', async () => ((await sentLimit()) ?? 2_000) < (underDefault ?? 0) || undefined);

    for (const [body, message] of [
      [{ max_cost_per_request_usd: '-1' }, /max_cost_per_request_usd must be a decimal USD string/],
      [{ max_cost_per_request_usd: '0.0000001' }, /max_cost_per_request_usd must be a decimal USD string with at most 6 decimals/],
      [{ max_cost_per_request_micro_usd: -3 }, /max_cost_per_request_micro_usd must be a non-negative integer/],
      [{ max_cost_per_request_usd: '1', max_cost_per_request_micro_usd: 1 }, /not both/],
      [{ max_cost_usd: '1' }, /unknown field max_cost_usd/],
    ] as const) {
      const bad = await call('PUT', `/accounts/${accountId}/keys/${keyId}/max-cost-per-request`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(errorOf(bad)).toMatch(message);
    }
    expect((await call('GET', `/accounts/${accountId}/keys`)).body.keys).toEqual([expect.objectContaining({ maxCostPerRequest: 300 })]);
    expect((await call('PUT', `/accounts/${accountId}/keys/key_nope/max-cost-per-request`, {})).status).toBe(404);

    const cleared = await call('PUT', `/accounts/${accountId}/keys/${keyId}/max-cost-per-request`, {});
    expect(cleared.body).toEqual({ updated: true, max_cost_per_request_micro_usd: null });
    expect(((await call('GET', `/accounts/${accountId}/keys`)).body.keys as Json[])[0]).not.toHaveProperty('maxCostPerRequest');
    await until('the cleared default to reach the gateway', async () => ((await sentLimit()) === null ? true : undefined));
  });

  it("sets a key's rate limits and the account's default; the gateway applies them at once; bad values are 400s", async () => {
    const accountId = await newAccount();
    await fund(accountId);
    const created = await call('POST', `/accounts/${accountId}/keys`, { name: 'limited', requests_per_minute: 5, concurrent_requests: 2 });
    expect(created.status).toBe(201);
    expect((created.body.record as Json).rateLimits).toEqual({ requestsPerMinute: 5, concurrentRequests: 2 });
    const { key, keyId } = await newKey(accountId);
    // Two requests in one minute of Redis's clock: not within 5 s of its end.
    const [sec] = await redis.time();
    if (Number(sec) % 60 > 55) await new Promise((r) => setTimeout(r, (61 - (Number(sec) % 60)) * 1000));
    // The account's default: one request per minute for keys without their own.
    const defaults = await call('PUT', `/accounts/${accountId}/rate-limits`, { requests_per_minute: 1 });
    expect(defaults.body).toEqual({ updated: true, default_rate_limits: { requests_per_minute: 1, tokens_per_minute: null, concurrent_requests: null } });
    expect((await call('GET', `/accounts/${accountId}`)).body.default_rate_limits).toEqual({ requests_per_minute: 1, tokens_per_minute: null, concurrent_requests: null });
    const first = await complete(key);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit-requests')).toBe('1');
    await first.json();
    const second = await complete(key);
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).not.toBeNull();
    expect(((await second.json()) as { error: Json }).error).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit_error', limit_type: 'requests', limit: 1 });
    // The key's own value overrides the default.
    const own = await call('PUT', `/accounts/${accountId}/keys/${keyId}/rate-limits`, { requests_per_minute: 1000, tokens_per_minute: null });
    expect(own.body).toEqual({ updated: true, rate_limits: { requests_per_minute: 1000, tokens_per_minute: null, concurrent_requests: null } });
    const third = await complete(key);
    expect(third.status).toBe(200);
    expect(third.headers.get('x-ratelimit-limit-requests')).toBe('1000');
    await third.json();
    for (const [body, message] of [
      [{ requests_per_minute: 0 }, 'requests_per_minute must be a whole number from 1'],
      [{ tokens_per_minute: '100' }, 'tokens_per_minute must be a whole number from 1'],
      [{ concurrent_requests: 1.5 }, 'concurrent_requests must be a whole number from 1'],
      [{ request_per_minute: 5 }, 'unknown field request_per_minute'],
    ] as const) {
      const bad = await call('PUT', `/accounts/${accountId}/keys/${keyId}/rate-limits`, body);
      expect(bad.status).toBe(400);
      expect((bad.body.error as Json).message).toContain(message);
    }
    expect((await call('PUT', `/accounts/${accountId}/keys/key_nope/rate-limits`, {})).status).toBe(404);
    expect((await call('PUT', '/accounts/acct_nope/rate-limits', {})).status).toBe(404);
  });

  it('a PATCH changes only what it names (null clears one), caps and rate limits alike, and the gateway enforces the rest; a PUT replaces its group', async () => {
    const accountId = await newAccount();
    await fund(accountId);
    const created = await call('POST', `/accounts/${accountId}/keys`, { name: 'capped', monthly_cap_usd: '0.000002', lifetime_cap_usd: '20', requests_per_minute: 1000 });
    const keyId = (created.body.record as { id: string }).id;
    const key = created.body.key as string;
    const patch = (body: Json) => call('PATCH', `/accounts/${accountId}/keys/${keyId}`, body);
    // A rate limit alone: the caps stay, and the gateway still refuses past the monthly cap.
    expect((await patch({ tokens_per_minute: 500_000 })).body).toEqual({
      updated: true, lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: 2, max_cost_per_request_micro_usd: null, rate_limits: { requests_per_minute: 1000, tokens_per_minute: 500_000, concurrent_requests: null },
    });
    const refused = await complete(key);
    expect(refused.status).toBe(402);
    expect(((await refused.json()) as { error: Json }).error).toMatchObject({ code: 'key_monthly_cap_reached' });
    // A cap alone (in micro-USD): the other cap and the limits stay.
    expect((await patch({ monthly_cap_micro_usd: 3 })).body).toMatchObject({ lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: 3, rate_limits: { requests_per_minute: 1000, tokens_per_minute: 500_000 } });
    // null clears only what it names.
    expect((await patch({ monthly_cap_usd: null, requests_per_minute: null })).body).toEqual({
      updated: true, lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: null, max_cost_per_request_micro_usd: null, rate_limits: { requests_per_minute: null, tokens_per_minute: 500_000, concurrent_requests: null },
    });
    const ok = await complete(key);
    expect(ok.status).toBe(200);
    await ok.json();
    expect((await call('GET', `/accounts/${accountId}/keys`)).body.keys).toEqual([expect.objectContaining({ id: keyId, lifetimeCap: 20_000_000, rateLimits: { tokensPerMinute: 500_000 } })]);
    // Bad input changes nothing.
    for (const [body, message] of [
      [{ monthly_cap_usd: '1', monthly_cap_micro_usd: 1 }, 'not both'],
      [{ monthly_cap: '1' }, 'unknown field monthly_cap'],
      [{ requests_per_minute: 0 }, 'requests_per_minute must be a whole number from 1'],
      [{ lifetime_cap_usd: 5 }, 'lifetime_cap_usd must be a decimal USD string'],
    ] as const) {
      const bad = await patch(body);
      expect(bad.status).toBe(400);
      expect(errorOf(bad)).toContain(message);
    }
    expect((await call('PATCH', `/accounts/${accountId}/keys/key_nope`, { requests_per_minute: 5 })).status).toBe(404);
    expect((await call('PATCH', `/accounts/acct_nope/keys/${keyId}`, {})).status).toBe(404);
    // The account's default limits: PATCH keeps what it does not name, PUT replaces them all.
    expect((await call('PATCH', `/accounts/${accountId}/rate-limits`, { requests_per_minute: 50 })).body).toEqual({ updated: true, default_rate_limits: { requests_per_minute: 50, tokens_per_minute: null, concurrent_requests: null } });
    expect((await call('PATCH', `/accounts/${accountId}/rate-limits`, { concurrent_requests: 4 })).body).toEqual({ updated: true, default_rate_limits: { requests_per_minute: 50, tokens_per_minute: null, concurrent_requests: 4 } });
    expect((await call('PATCH', `/accounts/${accountId}/rate-limits`, { requests_per_minute: null })).body).toEqual({ updated: true, default_rate_limits: { requests_per_minute: null, tokens_per_minute: null, concurrent_requests: 4 } });
    expect((await call('PATCH', '/accounts/acct_nope/rate-limits', { requests_per_minute: 1 })).status).toBe(404);
    expect((await call('PUT', `/accounts/${accountId}/rate-limits`, { tokens_per_minute: 10 })).body).toEqual({ updated: true, default_rate_limits: { requests_per_minute: null, tokens_per_minute: 10, concurrent_requests: null } });
    // PUT of a key's caps replaces both (documented): a cap not given is cleared; its limits stay.
    expect((await call('PUT', `/accounts/${accountId}/keys/${keyId}/caps`, { monthly_cap_usd: '1' })).body).toEqual({ updated: true, lifetime_cap_micro_usd: null, monthly_cap_micro_usd: 1_000_000 });
    expect((await call('GET', `/accounts/${accountId}/keys`)).body.keys).toEqual([expect.objectContaining({ monthlyCap: 1_000_000, rateLimits: { tokensPerMinute: 500_000 } })]);
  });

  it("a PATCH naming only the key's max cost per request keeps its caps and rate limits, one naming only a cap keeps the ceiling; the ceiling's PUT leaves the rest", async () => {
    const accountId = await newAccount();
    await fund(accountId);
    const created = await call('POST', `/accounts/${accountId}/keys`, { name: 'ceilinged', monthly_cap_usd: '5', lifetime_cap_usd: '20', max_cost_per_request_usd: '0.05', requests_per_minute: 100, concurrent_requests: 4 });
    const keyId = (created.body.record as { id: string }).id;
    const patch = (body: Json) => call('PATCH', `/accounts/${accountId}/keys/${keyId}`, body);
    const limits = { requests_per_minute: 100, tokens_per_minute: null, concurrent_requests: 4 };
    expect((await patch({ max_cost_per_request_usd: '0.02' })).body).toEqual({ updated: true, lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: 5_000_000, max_cost_per_request_micro_usd: 20_000, rate_limits: limits });
    expect((await patch({ monthly_cap_micro_usd: 6_000_000 })).body).toEqual({ updated: true, lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: 6_000_000, max_cost_per_request_micro_usd: 20_000, rate_limits: limits });
    expect((await patch({ lifetime_cap_usd: null, tokens_per_minute: 9_000 })).body).toEqual({ updated: true, lifetime_cap_micro_usd: null, monthly_cap_micro_usd: 6_000_000, max_cost_per_request_micro_usd: 20_000, rate_limits: { ...limits, tokens_per_minute: 9_000 } });
    // The ceiling in micro-USD with a cap, in one change; then cleared alone.
    expect((await patch({ max_cost_per_request_micro_usd: 700, monthly_cap_usd: '7' })).body).toMatchObject({ monthly_cap_micro_usd: 7_000_000, max_cost_per_request_micro_usd: 700 });
    expect((await patch({ max_cost_per_request_usd: null })).body).toEqual({ updated: true, lifetime_cap_micro_usd: null, monthly_cap_micro_usd: 7_000_000, max_cost_per_request_micro_usd: null, rate_limits: { ...limits, tokens_per_minute: 9_000 } });
    // Bad ceilings change nothing.
    for (const [body, message] of [
      [{ max_cost_per_request_usd: '1', max_cost_per_request_micro_usd: 1 }, 'not both'],
      [{ max_cost_per_request_usd: '-1', monthly_cap_usd: '1' }, 'max_cost_per_request_usd must be a decimal USD string'],
    ] as const) {
      const bad = await patch(body);
      expect(bad.status).toBe(400);
      expect(errorOf(bad)).toContain(message);
    }
    // The ceiling's PUT is routed through the same partial change: caps and limits stay.
    expect((await call('PUT', `/accounts/${accountId}/keys/${keyId}/max-cost-per-request`, { max_cost_per_request_usd: '0.01' })).body).toEqual({ updated: true, max_cost_per_request_micro_usd: 10_000 });
    expect((await call('GET', `/accounts/${accountId}/keys`)).body.keys).toEqual([
      expect.objectContaining({ id: keyId, monthlyCap: 7_000_000, maxCostPerRequest: 10_000, rateLimits: { requestsPerMinute: 100, tokensPerMinute: 9_000, concurrentRequests: 4 } }),
    ]);
  });
});

describe('revocation', () => {
  async function refusedWithin(key: string, ms: number): Promise<number> {
    const start = Date.now();
    for (;;) {
      const res = await complete(key);
      const body = (await res.json()) as { error?: Json };
      if (res.status === 401) {
        expect(body.error).toMatchObject({ code: 'revoked_api_key' });
        return Date.now() - start;
      }
      expect(res.status).toBe(200);
      if (Date.now() - start > ms) throw new Error(`key still accepted ${ms} ms after revocation`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  for (const [name, server] of [
    ['through the admin server of this gateway', () => admin.url],
    ['through another replica\'s admin server (no cache hook)', () => remoteAdmin.url],
  ] as const) {
    it(`${name}: the gateway refuses the key with 401 within 2 s`, async () => {
      const accountId = await newAccount();
      await fund(accountId);
      const { key, keyId } = await newKey(accountId);
      const other = await newKey(accountId);
      // Warm the gateway's key cache first, so the revocation has to get past it.
      const warm = await complete(key);
      expect(warm.status).toBe(200);
      await warm.json();
      const r = await call('POST', `/accounts/${accountId}/keys/${keyId}/revoke`, undefined, { base: server() });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ revoked: true });
      expect(await refusedWithin(key, 2000)).toBeLessThan(2000);
      const keys = (await call('GET', `/accounts/${accountId}/keys`)).body.keys as Json[];
      expect(keys.find((k) => k.id === keyId)).toMatchObject({ revokedAt: expect.any(Number) });
      expect(keys.find((k) => k.id === other.keyId)).not.toHaveProperty('revokedAt');
      // The account's other key still works.
      const still = await complete(other.key);
      expect(still.status).toBe(200);
      await still.json();
    });
  }

  it('revoking twice keeps the first revocation time; unknown keys and other accounts\' keys are 404', async () => {
    const accountId = await newAccount();
    const otherAccount = await newAccount();
    const { keyId } = await newKey(accountId);
    expect((await call('POST', `/accounts/${accountId}/keys/${keyId}/revoke`)).status).toBe(200);
    const at = ((await call('GET', `/accounts/${accountId}/keys`)).body.keys as Json[])[0]?.revokedAt;
    await new Promise((r) => setTimeout(r, 5));
    expect((await call('POST', `/accounts/${accountId}/keys/${keyId}/revoke`)).status).toBe(200);
    expect(((await call('GET', `/accounts/${accountId}/keys`)).body.keys as Json[])[0]?.revokedAt).toBe(at);
    for (const path of [`/accounts/${accountId}/keys/key_nope/revoke`, `/accounts/${otherAccount}/keys/${keyId}/revoke`]) {
      const r = await call('POST', path);
      expect(r.status).toBe(404);
      expect(errorOf(r)).toBe('no such key');
    }
  });
});

describe('refunds, usage and audit', () => {
  it('refunds a settled request once; usage and audit show it; unknown requests are 404', async () => {
    const accountId = await newAccount();
    await fund(accountId, '1.00');
    const { key, keyId } = await newKey(accountId);
    const second = await newKey(accountId);
    const requestIds: string[] = [];
    for (const k of [key, second.key, key]) {
      const res = await complete(k);
      expect(res.status).toBe(200);
      await res.json();
      requestIds.push(res.headers.get('x-request-id') as string);
    }
    // Settlement follows the response: wait for all three records.
    let usage: Json[] = [];
    for (let i = 0; i < 100 && usage.length < 3; i++) {
      usage = (await call('GET', `/accounts/${accountId}/usage`)).body.usage as Json[];
      if (usage.length < 3) await new Promise((r) => setTimeout(r, 20));
    }
    expect(usage.map((u) => u.requestId)).toEqual([...requestIds].reverse());
    for (const u of usage) expect(u).toMatchObject({ accountId, model: MODEL, status: 'completed', cost: expect.any(Number) });
    const byKey = (await call('GET', `/accounts/${accountId}/usage?key_id=${keyId}`)).body.usage as Json[];
    expect(byKey.map((u) => u.requestId)).toEqual([requestIds[2], requestIds[0]]);
    expect(((await call('GET', `/accounts/${accountId}/usage?limit=1`)).body.usage as Json[]).map((u) => u.requestId)).toEqual([requestIds[2]]);

    const target = usage.find((u) => u.requestId === requestIds[0]) as Json;
    const cost = target.cost as number;
    expect(cost).toBeGreaterThan(0);
    const total = usage.reduce((n, u) => n + (u.cost as number), 0);
    const before = (await call('GET', `/accounts/${accountId}`)).body.balance_micro_usd as number;
    expect(before).toBe(1_000_000 - total);

    const refund = await call('POST', `/accounts/${accountId}/refund`, { request_id: requestIds[0] });
    expect(refund.status).toBe(200);
    expect(refund.body).toEqual({ refunded_micro_usd: cost, refunded_usd: `0.${String(cost).padStart(6, '0')}`, already_refunded: false });
    const repeat = await call('POST', `/accounts/${accountId}/refund`, { request_id: requestIds[0] });
    expect(repeat.status).toBe(200);
    expect(repeat.body).toEqual({ refunded_micro_usd: 0, refunded_usd: '0.000000', already_refunded: true });
    expect((await call('GET', `/accounts/${accountId}`)).body.balance_micro_usd).toBe(before + cost);

    const refunded = (await call('GET', `/accounts/${accountId}/usage`)).body.usage as Json[];
    expect(refunded.find((u) => u.requestId === requestIds[0])).toMatchObject({ refunded: true });
    expect(refunded.find((u) => u.requestId === requestIds[1])).not.toHaveProperty('refunded');
    expect((await call('GET', `/accounts/${accountId}/audit`)).body).toEqual({
      accountId, credited: 1_000_000, refunded: cost, balance: before + cost, drawnDown: total - cost + cost, usageTotal: total, difference: 0, holdsOutstanding: 0,
    });

    // Unknown request ids, and another account's request, are 404 and change nothing.
    const otherAccount = await newAccount();
    for (const [acct, rid] of [[accountId, 'req_nope'], [otherAccount, requestIds[1] as string]]) {
      const r = await call('POST', `/accounts/${acct}/refund`, { request_id: rid });
      expect(r.status).toBe(404);
      expect(errorOf(r)).toMatch(/no settled request/);
    }
    expect((await call('GET', `/accounts/${accountId}`)).body.balance_micro_usd).toBe(before + cost);
  });
});

describe('bad input is a 400 with a clear JSON error; unknown ids are 404', () => {
  let accountId: string;
  let keyId: string;
  beforeAll(async () => {
    accountId = await newAccount();
    keyId = (await newKey(accountId, { lifetime_cap_usd: '1.00' })).keyId;
  });

  it('bodies that are not a JSON object', async () => {
    const secretish = `sk-tg-${randomBytes(20).toString('hex')}`;
    for (const raw of [`{"name": "${secretish}"`, 'not json', '[1,2]', '"text"', 'null', '42']) {
      const r = await call('POST', '/accounts', undefined, { raw });
      expect(r.status, raw).toBe(400);
      expect(errorOf(r)).toMatch(/^(body is not valid JSON|body must be a JSON object)$/);
      expect(r.text).not.toContain(secretish);
    }
    const big = await call('POST', '/accounts', undefined, { raw: JSON.stringify({ name: 'x'.repeat(70 * 1024) }) });
    expect(big.status).toBe(413);
    expect(errorOf(big)).toMatch(/too large/);
  });

  it.each([
    ['account name not a string', 'POST', '/accounts', { name: 42 }, /name must be a non-empty string/],
    ['account name blank', 'POST', '/accounts', { name: '  ' }, /name must be a non-empty string/],
    ['unknown account field', 'POST', '/accounts', { nmae: 'x' }, /unknown field nmae/],
    ['key name not a string', 'POST', 'KEYS', { name: ['a'] }, /name must be/],
    ['cap not a decimal string', 'POST', 'KEYS', { lifetime_cap_usd: '12.5.0' }, /lifetime_cap_usd must be a decimal USD string/],
    ['cap as a number of USD', 'POST', 'KEYS', { lifetime_cap_usd: 12.5 }, /lifetime_cap_usd must be a decimal USD string/],
    ['cap with seven decimals', 'POST', 'KEYS', { monthly_cap_usd: '0.0000001' }, /at most 6 decimals/],
    ['negative micro cap', 'POST', 'KEYS', { monthly_cap_micro_usd: -1 }, /monthly_cap_micro_usd must be a non-negative integer/],
    ['fractional micro cap', 'POST', 'KEYS', { monthly_cap_micro_usd: 1.5 }, /non-negative integer/],
    ['micro cap as a string', 'POST', 'KEYS', { monthly_cap_micro_usd: '5' }, /non-negative integer/],
    ['both forms of one cap', 'PUT', 'CAPS', { lifetime_cap_usd: '1', lifetime_cap_micro_usd: 1 }, /not both/],
    ['misspelt cap field', 'PUT', 'CAPS', { lifetime_cap: '5' }, /unknown field lifetime_cap/],
    ['credit without amount', 'POST', 'CREDIT', { idempotency_key: 'k' }, /give amount_usd/],
    ['credit of zero', 'POST', 'CREDIT', { amount_usd: '0', idempotency_key: 'k' }, /more than zero/],
    ['credit negative', 'POST', 'CREDIT', { amount_usd: '-5', idempotency_key: 'k' }, /decimal USD string/],
    ['credit too large', 'POST', 'CREDIT', { amount_usd: '99999999999', idempotency_key: 'k' }, /decimal USD string/],
    ['credit without idempotency key', 'POST', 'CREDIT', { amount_usd: '1' }, /idempotency_key is required/],
    ['credit with empty idempotency key', 'POST', 'CREDIT', { amount_usd: '1', idempotency_key: '' }, /idempotency_key is required/],
    ['credit with numeric idempotency key', 'POST', 'CREDIT', { amount_usd: '1', idempotency_key: 7 }, /idempotency_key is required/],
    ['refund without request id', 'POST', 'REFUND', {}, /request_id is required/],
    ['refund with numeric request id', 'POST', 'REFUND', { request_id: 5 }, /request_id is required/],
    ['usage limit not a number', 'GET', 'USAGE?limit=abc', undefined, /limit must be an integer from 1 to 1000/],
    ['usage limit zero', 'GET', 'USAGE?limit=0', undefined, /limit must be/],
    ['usage limit negative', 'GET', 'USAGE?limit=-3', undefined, /limit must be/],
    ['usage limit too large', 'GET', 'USAGE?limit=1001', undefined, /limit must be/],
    ['usage limit given twice', 'GET', 'USAGE?limit=1&limit=2', undefined, /give limit once/],
    ['usage by model without the record', 'GET', 'USAGE?model=m&cursor=c', undefined, /model, cursor need the record/],
  ] as const)('%s', async (_name, method, where, body, message) => {
    const paths: Record<string, string> = {
      KEYS: `/accounts/${accountId}/keys`,
      CAPS: `/accounts/${accountId}/keys/${keyId}/caps`,
      CREDIT: `/accounts/${accountId}/credit`,
      REFUND: `/accounts/${accountId}/refund`,
    };
    const [base = '', query] = where.split('?');
    let path = paths[base] ?? (base === 'USAGE' ? `/accounts/${accountId}/usage` : base);
    if (query !== undefined) path += `?${query}`;
    const r = await call(method, path, body);
    expect(r.status).toBe(400);
    expect(errorOf(r)).toMatch(message);
  });

  it('a credit that would take the balance past 2^53 - 1 µUSD', async () => {
    const full = await newAccount();
    const top = await call('POST', `/accounts/${full}/credit`, { amount_micro_usd: Number.MAX_SAFE_INTEGER, idempotency_key: 'max' });
    expect(top.body).toMatchObject({ applied: true, balance_micro_usd: Number.MAX_SAFE_INTEGER });
    const over = await call('POST', `/accounts/${full}/credit`, { amount_micro_usd: 1, idempotency_key: 'one-more' });
    expect(over.status).toBe(400);
    expect(errorOf(over)).toMatch(/largest amount the ledger holds exactly/);
    expect((await call('GET', `/accounts/${full}`)).body.balance_micro_usd).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('a refused call changes nothing: the cap stays, no key or credit is added', async () => {
    const keys = (await call('GET', `/accounts/${accountId}/keys`)).body.keys as Json[];
    expect(keys).toEqual([expect.objectContaining({ id: keyId, lifetimeCap: 1_000_000 })]);
    expect((await call('GET', `/accounts/${accountId}`)).body).toMatchObject({ balance_micro_usd: 0 });
    expect((await call('GET', `/accounts/${accountId}/audit`)).body).toMatchObject({ credited: 0 });
  });

  it.each([
    ['GET', '/accounts/acct_nope', undefined, 'no such account'],
    ['GET', '/accounts/acct_nope/keys', undefined, 'no such account'],
    ['POST', '/accounts/acct_nope/keys', { name: 'k' }, 'no such account'],
    ['POST', '/accounts/acct_nope/credit', { amount_usd: '1', idempotency_key: 'k' }, 'no such account'],
    ['POST', '/accounts/acct_nope/refund', { request_id: 'r' }, 'no such account'],
    ['POST', '/accounts/acct_nope/keys/key_nope/revoke', undefined, 'no such account'],
    ['PUT', '/accounts/acct_nope/keys/key_nope/caps', {}, 'no such account'],
    ['GET', '/accounts/acct_nope/usage', undefined, 'no such account'],
    ['GET', '/accounts/acct_nope/audit', undefined, 'no such account'],
    ['GET', '/accounts/%7Bacct%7D%3Aaccount', undefined, 'no such account'],
    ['PUT', 'ACCOUNT/keys/key_nope/caps', {}, 'no such key'],
    ['GET', 'ACCOUNT/usage?key_id=key_nope', undefined, 'no such key'],
    ['GET', '/nothing-here', undefined, /no such admin call: GET \/admin\/nothing-here/],
    ['DELETE', '/accounts', undefined, /no such admin call: DELETE/],
    ['GET', '', undefined, /no such admin call/],
  ] as const)('%s %s is 404', async (method, where, body, message) => {
    const r = await call(method, where.replace('ACCOUNT', `/accounts/${accountId}`), body);
    expect(r.status).toBe(404);
    expect(errorOf(r)).toMatch(message);
  });
});

/** The admin CLI as a user runs it, against an admin server. */
function cli(args: string[], token = TOKEN, adminUrl = admin.url): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', new URL('../../src/admin/cli.ts', import.meta.url).pathname, ...args], {
      env: { ...process.env, TOLLGATE_ADMIN_URL: adminUrl, TOLLGATE_ADMIN_TOKEN: token },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the CLI', () => {
  it('creates an account, credits it once, sets caps, and fails cleanly', async () => {
    const created = await cli(['create-account', 'cli-co']);
    expect(created.code).toBe(0);
    const account = JSON.parse(created.stdout) as Json;
    expect(account).toMatchObject({ name: 'cli-co', id: expect.stringMatching(/^acct_/) });
    const id = account.id as string;
    const first = await cli(['credit', id, '3.25', 'cli-pay']);
    expect([first.code, JSON.parse(first.stdout)]).toEqual([0, { applied: true, balance_micro_usd: 3_250_000, balance_usd: '3.250000' }]);
    const second = await cli(['credit', id, '3.25', 'cli-pay']);
    expect(JSON.parse(second.stdout)).toMatchObject({ applied: false, balance_micro_usd: 3_250_000 });
    const key = await cli(['create-key', id, 'ci', '--lifetime-cap', '20', '--monthly-cap', '5']);
    expect(key.code).toBe(0);
    expect((JSON.parse(key.stdout) as { record: Json }).record).toMatchObject({ name: 'ci', lifetimeCap: 20_000_000, monthlyCap: 5_000_000 });
    const keyId = ((JSON.parse(key.stdout) as { record: Json }).record as { id: string }).id;
    // Options not given are kept (the caps stay when limits are set, and the other way round); none clears one.
    const limited = await cli(['rate-limits', id, keyId, '--rpm', '30', '--concurrency', '2']);
    expect([limited.code, JSON.parse(limited.stdout)]).toEqual([0, { updated: true, lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: 5_000_000, max_cost_per_request_micro_usd: null, rate_limits: { requests_per_minute: 30, tokens_per_minute: null, concurrent_requests: 2 } }]);
    const moreLimits = await cli(['rate-limits', id, keyId, '--tpm', '1000', '--concurrency', 'none']);
    expect(JSON.parse(moreLimits.stdout)).toEqual({ updated: true, lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: 5_000_000, max_cost_per_request_micro_usd: null, rate_limits: { requests_per_minute: 30, tokens_per_minute: 1000, concurrent_requests: null } });
    const uncapped = await cli(['caps', id, keyId, '--monthly-cap', 'none']);
    expect([uncapped.code, JSON.parse(uncapped.stdout)]).toEqual([0, { updated: true, lifetime_cap_micro_usd: 20_000_000, monthly_cap_micro_usd: null, max_cost_per_request_micro_usd: null, rate_limits: { requests_per_minute: 30, tokens_per_minute: 1000, concurrent_requests: null } }]);
    const nothing = await cli(['caps', id, keyId]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('none clears one');
    const defaults = await cli(['default-rate-limits', id, '--tpm', '100000']);
    expect([defaults.code, JSON.parse(defaults.stdout)]).toEqual([0, { updated: true, default_rate_limits: { requests_per_minute: null, tokens_per_minute: 100000, concurrent_requests: null } }]);
    const moreDefaults = await cli(['default-rate-limits', id, '--rpm', '10']);
    expect(JSON.parse(moreDefaults.stdout)).toEqual({ updated: true, default_rate_limits: { requests_per_minute: 10, tokens_per_minute: 100000, concurrent_requests: null } });
    const badLimit = await cli(['rate-limits', id, keyId, '--rpm', 'lots']);
    expect(badLimit.code).toBe(1);
    expect(JSON.parse(badLimit.stdout)).toMatchObject({ error: { message: expect.stringMatching(/requests_per_minute/) } });

    const missing = await cli(['revoke', id]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('usage:');
    const unknown = await cli(['audit', 'acct_nope']);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stdout)).toEqual({ error: { message: 'no such account' } });
    const wrong = `adm-${randomBytes(18).toString('base64url')}`;
    const refused = await cli(['accounts'], wrong);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/admin token missing or wrong/);
    expect(refused.stdout + refused.stderr).not.toContain(wrong);
  });
});

describe('the CLI: a key\'s max cost per request', () => {
  it('sets it at creation and after, keeps it when caps or limits change and keeps them when it changes, clears it with none, and refuses a bad amount', async () => {
    const id = JSON.parse((await cli(['create-account', 'cli-ceiling'])).stdout).id as string;
    const key = await cli(['create-key', id, 'agent', '--max-cost-per-request', '0.05', '--monthly-cap', '5', '--rpm', '30']);
    expect(key.code).toBe(0);
    const record = (JSON.parse(key.stdout) as { record: Json }).record;
    expect(record).toMatchObject({ name: 'agent', maxCostPerRequest: 50_000, monthlyCap: 5_000_000, rateLimits: { requestsPerMinute: 30 } });
    const keyId = record.id as string;
    const limits = { requests_per_minute: 30, tokens_per_minute: null, concurrent_requests: null };
    const set = await cli(['max-cost', id, keyId, '0.25']);
    expect([set.code, JSON.parse(set.stdout)]).toEqual([0, { updated: true, lifetime_cap_micro_usd: null, monthly_cap_micro_usd: 5_000_000, max_cost_per_request_micro_usd: 250_000, rate_limits: limits }]);
    const capped = await cli(['caps', id, keyId, '--monthly-cap', '6']);
    expect(JSON.parse(capped.stdout)).toMatchObject({ monthly_cap_micro_usd: 6_000_000, max_cost_per_request_micro_usd: 250_000 });
    const asOption = await cli(['caps', id, keyId, '--max-cost-per-request', '0.1']);
    expect(JSON.parse(asOption.stdout)).toMatchObject({ monthly_cap_micro_usd: 6_000_000, max_cost_per_request_micro_usd: 100_000, rate_limits: limits });
    const cleared = await cli(['max-cost', id, keyId, 'none']);
    expect([cleared.code, JSON.parse(cleared.stdout)]).toEqual([0, { updated: true, lifetime_cap_micro_usd: null, monthly_cap_micro_usd: 6_000_000, max_cost_per_request_micro_usd: null, rate_limits: limits }]);
    const bad = await cli(['max-cost', id, keyId, 'lots']);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout)).toMatchObject({ error: { message: expect.stringMatching(/max_cost_per_request_usd/) } });
    // Without an amount (or none) nothing is sent: a forgotten amount must not clear it.
    const noAmount = await cli(['max-cost', id, keyId]);
    expect(noAmount.code).toBe(2);
    expect(noAmount.stderr).toContain('max-cost <accountId> <keyId> <USD|none>');
  });
});

describe('usage of record (PostgreSQL)', () => {
  let rh: Harness;
  let recordAdmin: { url: string; close(): Promise<void> };
  /** The one account service of this admin server and the dashboard beside it. */
  let recordAccounts: AccountService;
  const base = (): CallOptions => ({ base: recordAdmin.url });
  const logged: string[] = [];

  beforeAll(async () => {
    rh = await startHarness({ ledger: 'redis', record: recordDb.db });
    recordAccounts = new AccountService({ accounts: rh.backend.accounts, ledger: rh.backend.ledger });
    recordAdmin = await startAdminServer({ accounts: recordAccounts, ledger: rh.backend.ledger, token: TOKEN, record: recordDb.db, log: (l) => logged.push(l) }, 0, '127.0.0.1');
  });

  it("turns a locked-out dashboard user's two-factor sign-in off (issue 37, item 5): logged as totp_cleared, the user mailed and signed out", async () => {
    const account = await rh.backend.accounts.createAccount('locked-out');
    const dashboard = new DashboardService({ db: recordDb.db, accounts: recordAccounts, signUp: false, sessionTtlMs: 60_000 });
    const user = await dashboard.provisioning.upsertUser('Locked.Out@example.com', 'a long password', account.id);
    // Enrolled as the Security page does it (the phone and the recovery codes are then lost).
    await recordDb.db.query("UPDATE dashboard_users SET totp_secret = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', totp_enabled_at = now() WHERE id = $1", [user.id]);
    await recordDb.db.query("INSERT INTO dashboard_sessions (id_hash, user_id, csrf_token, expires_at) VALUES ('h-locked-out', $1, 'c', now() + interval '1 hour')", [user.id]);
    const done = await call('POST', '/dashboard-users/clear-two-factor', { email: 'locked.out@example.com' }, base());
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ email: 'locked.out@example.com', cleared: true });
    const row = (await recordDb.db.query<{ totp_secret: string | null; totp_enabled_at: Date | null }>('SELECT totp_secret, totp_enabled_at FROM dashboard_users WHERE id = $1', [user.id])).rows[0];
    expect(row).toEqual({ totp_secret: null, totp_enabled_at: null });
    expect((await recordDb.db.query('SELECT 1 FROM dashboard_sessions WHERE user_id = $1', [user.id])).rows).toEqual([]);
    expect((await recordDb.db.query<{ subject: string }>('SELECT subject FROM email_outbox WHERE recipient = $1', ['locked.out@example.com'])).rows.map((m) => m.subject)).toEqual(['Two-factor sign-in was turned off for your Tollgate account']);
    expect(logged.map((l) => JSON.parse(l) as Json)).toEqual([{ level: 'info', event: 'totp_cleared', user_id: user.id, admin_id: 'admin-api' }]);
    // Again: nothing to clear, nothing logged. Unknown users, bad bodies and a gateway without the record say so.
    expect((await call('POST', '/dashboard-users/clear-two-factor', { email: 'locked.out@example.com' }, base())).body).toMatchObject({ cleared: false });
    expect(logged).toHaveLength(1);
    expect((await call('POST', '/dashboard-users/clear-two-factor', { email: 'nobody@example.com' }, base())).status).toBe(404);
    expect(errorOf(await call('POST', '/dashboard-users/clear-two-factor', {}, base()))).toMatch(/email is required/);
    expect(errorOf(await call('POST', '/dashboard-users/clear-two-factor', { email: 'a@example.com', user: 'x' }, base()))).toMatch(/unknown field user/);
    expect(errorOf(await call('POST', '/dashboard-users/clear-two-factor', { email: 'a@example.com' }))).toMatch(/the record/);
  });

  it("lists an organization's members with their roles (issue 39); an account without members lists none, without the record it says why", async () => {
    const dashboard = new DashboardService({ db: recordDb.db, accounts: recordAccounts, signUp: false, sessionTtlMs: 60_000 });
    const personal = await rh.backend.accounts.createAccount('org-owner@example.com');
    const owner = await dashboard.provisioning.upsertUser('org-owner@example.com', 'a long password', personal.id);
    const org = await dashboard.organizations.create(owner, 'Admin API Org');
    const other = await rh.backend.accounts.createAccount('org-billing@example.com');
    const billing = await dashboard.provisioning.upsertUser('org-billing@example.com', 'a long password', other.id);
    await recordDb.db.query("INSERT INTO account_memberships (account_id, user_id, role) VALUES ($1, $2, 'billing')", [org.accountId, billing.id]);
    const listed = await call('GET', `/accounts/${org.accountId}/members`, undefined, base());
    expect(listed.status).toBe(200);
    expect(listed.body).toMatchObject({ account_id: org.accountId, organization: 'Admin API Org' });
    expect((listed.body.members as Json[]).map((m) => [m.email, m.role, m.user_id, m.totp_enabled])).toEqual([
      ['org-owner@example.com', 'owner', owner.id, false],
      ['org-billing@example.com', 'billing', billing.id, false],
    ]);
    expect((await call('GET', `/accounts/${personal.id}/members`, undefined, base())).body).toMatchObject({ organization: null, members: [{ email: 'org-owner@example.com', role: 'owner' }] });
    expect((await call('GET', '/accounts/acct_nope/members', undefined, base())).status).toBe(404);
    // The CLI's `members` prints the same.
    const printed = await cli(['members', org.accountId], TOKEN, recordAdmin.url);
    expect(printed.code).toBe(0);
    expect((JSON.parse(printed.stdout) as { members: Json[] }).members.map((m) => m.role)).toEqual(['owner', 'billing']);
    expect(errorOf(await call('GET', `/accounts/${h.accountId}/members`))).toMatch(/the record/);
  });

  it("manages teams, members' budgets and keys' teams (issue 39, item 3), over the API and the CLI; the gateway applies them at once", async () => {
    const dashboard = new DashboardService({ db: recordDb.db, accounts: recordAccounts, signUp: false, sessionTtlMs: 60_000 });
    const personal = await rh.backend.accounts.createAccount('teams-owner@example.com');
    const owner = await dashboard.provisioning.upsertUser('teams-owner@example.com', 'a long password', personal.id);
    const org = await dashboard.organizations.create(owner, 'Admin Teams Org');
    const a = org.accountId;
    await recordAccounts.credit(a, 5_000_000, `teams-${a}`);
    const created = await call('POST', `/accounts/${a}/teams`, { name: 'search', monthly_budget_usd: '0' }, base());
    expect(created.status).toBe(201);
    const team = created.body.team as Json;
    expect(team).toMatchObject({ name: 'search', monthly_budget_micro_usd: 0, lifetime_budget_micro_usd: null, member_ids: [], month_spent_micro_usd: 0 });
    expect((await call('POST', `/accounts/${a}/teams`, { name: 'SEARCH' }, base())).status).toBe(409);
    expect(errorOf(await call('POST', `/accounts/${a}/teams`, { name: 'x', monthly_budget_usd: 'lots' }, base()))).toMatch(/monthly_budget_usd must be a decimal USD string/);
    expect(errorOf(await call('POST', `/accounts/${a}/teams`, { name: 'x', budget: '1' }, base()))).toMatch(/unknown field budget/);
    expect((await call('PUT', `/accounts/${a}/teams/${String(team.id)}/members/${owner.id}`, undefined, base())).body.team).toMatchObject({ member_ids: [owner.id] });
    // A key in the team: refused at the team's budget of 0, named; served once the budget is cleared.
    const key = await call('POST', `/accounts/${a}/keys`, { name: 'in search', team_id: team.id }, base());
    expect(key.status).toBe(201);
    expect((key.body.record as Json).teamId).toBe(team.id);
    const chat = (): Promise<Response> =>
      fetch(`${rh.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${String(key.body.key)}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }) });
    const refused = await chat();
    expect(refused.status).toBe(402);
    expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'team_monthly_budget_reached', message: expect.stringContaining("The search team's monthly budget of 0.00 USD is used up") });
    expect((await call('PATCH', `/accounts/${a}/teams/${String(team.id)}`, { monthly_budget_usd: null, lifetime_budget_micro_usd: 3_000_000 }, base())).body.team).toMatchObject({ monthly_budget_micro_usd: null, lifetime_budget_micro_usd: 3_000_000 });
    const served = await chat();
    expect(served.status).toBe(200);
    await served.text();
    // The team's spend is the record's: the answer goes out before its settlement, which the journal
    // then commits, so the listing shows it once both have happened.
    await rh.settled();
    await rh.journal?.flush();
    await until('the team spend in the record', async () => {
      const listed = await call('GET', `/accounts/${a}/teams`, undefined, base());
      return ((listed.body.teams as Json[])[0]?.lifetime_spent_micro_usd as number) > 0 || undefined;
    });
    // A member's budget; a key's team moved and cleared; unknown ids are 404s.
    expect((await call('PATCH', `/accounts/${a}/members/${owner.id}/budgets`, { monthly_budget_usd: '20.00' }, base())).body).toMatchObject({ user_id: owner.id, monthly_budget_micro_usd: 20_000_000 });
    expect((await call('PATCH', `/accounts/${a}/members/usr_nope/budgets`, { monthly_budget_usd: '1' }, base())).status).toBe(404);
    expect((await call('GET', `/accounts/${a}/budgets`, undefined, base())).body.members).toMatchObject([{ user_id: owner.id, monthly_budget_micro_usd: 20_000_000 }]);
    const keyId = String((key.body.record as Json).id);
    expect((await call('PATCH', `/accounts/${a}/keys/${keyId}`, { team_id: 'team_nope' }, base())).status).toBe(404);
    expect((await call('PATCH', `/accounts/${a}/keys/${keyId}`, { team_id: null }, base())).body).toMatchObject({ team_id: null });
    expect((await call('DELETE', `/accounts/${a}/teams/team_nope`, undefined, base())).status).toBe(404);

    // The CLI says the same.
    const run = async (...args: string[]): Promise<Json> => {
      const r = await cli(args, TOKEN, recordAdmin.url);
      expect(r.code, `${args.join(' ')}: ${r.stdout}${r.stderr}`).toBe(0);
      return JSON.parse(r.stdout) as Json;
    };
    const infra = (await run('create-team', a, 'infra', '--monthly-budget', '50.00')).team as Json;
    expect(infra).toMatchObject({ name: 'infra', monthly_budget_micro_usd: 50_000_000 });
    expect((await run('team', a, String(infra.id), '--monthly-budget', 'none', '--name', 'platform')).team).toMatchObject({ name: 'platform', monthly_budget_micro_usd: null });
    expect((await run('team-member', a, String(infra.id), owner.id, 'add')).team).toMatchObject({ member_ids: [owner.id] });
    expect((await run('key-team', a, keyId, String(infra.id))).team_id).toBe(infra.id);
    expect((await run('member-budget', a, owner.id, '--lifetime-budget', '9.5')).lifetime_budget_micro_usd).toBe(9_500_000);
    expect(((await run('teams', a)).teams as Json[]).map((t) => t.name)).toEqual(['platform', 'search']);
    expect(((await run('budgets', a)).members as Json[])[0]).toMatchObject({ monthly_budget_micro_usd: 20_000_000, lifetime_budget_micro_usd: 9_500_000 });
    expect((await run('delete-team', a, String(infra.id))).deleted).toBe(true);
    expect((await cli(['team', a, String(infra.id)], TOKEN, recordAdmin.url)).code).toBe(2);
    // Without the record there are no teams, and it says why.
    expect(errorOf(await call('GET', `/accounts/${h.accountId}/teams`))).toMatch(/the record/);
  });

  afterAll(async () => {
    await recordAdmin?.close();
    await rh?.close();
  });

  /** Every page of a usage query over HTTP, following next_cursor. */
  async function allUsage(path: string, limit: number): Promise<Json[]> {
    const out: Json[] = [];
    let cursor: string | null = null;
    do {
      const sep = path.includes('?') ? '&' : '?';
      const r = await call('GET', `${path}${sep}limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`, undefined, base());
      expect(r.status).toBe(200);
      const page = r.body.usage as Json[];
      cursor = r.body.next_cursor as string | null;
      if (cursor !== null) expect(page).toHaveLength(limit);
      out.push(...page);
    } while (cursor !== null);
    return out;
  }

  it('lists usage from the record: more than 10,000 records paged through completely, filters, statement, daily spend', async () => {
    const accountId = (await call('POST', '/accounts', { name: 'recorded' }, base())).body.id as string;
    const credit = await call('POST', `/accounts/${accountId}/credit`, { amount_usd: '2.00', idempotency_key: 'rec-fund' }, base());
    expect(credit.body.applied).toBe(true);
    const key = (await call('POST', `/accounts/${accountId}/keys`, { name: 'live' }, base())).body;
    const bulkKeyId = ((await call('POST', `/accounts/${accountId}/keys`, { name: 'bulk' }, base())).body.record as Json).id as string;
    const requestIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await complete(key.key as string, rh.baseUrl);
      expect(res.status).toBe(200);
      await res.json();
      requestIds.push(res.headers.get('x-request-id') as string);
    }
    // Settlement follows the response, and the journal commits in batches: flush until all three are in.
    let live: Json[] = [];
    for (let i = 0; i < 100 && live.length < 3; i++) {
      await rh.journal?.flush();
      live = (await call('GET', `/accounts/${accountId}/usage`, undefined, base())).body.usage as Json[];
      if (live.length < 3) await new Promise((r) => setTimeout(r, 20));
    }
    expect(live.map((u) => u.requestId)).toEqual([...requestIds].reverse());
    for (const u of live) {
      expect(u).toMatchObject({ accountId, keyId: (key.record as Json).id, model: MODEL, status: 'completed', refunded: false, refundedAt: null, billingMonth: expect.stringMatching(/^\d{4}-\d{2}$/) });
      expect(u.cost as number).toBeGreaterThan(0);
      expect(u.reserved as number).toBeGreaterThanOrEqual(u.cost as number);
    }

    // 10,050 older records in one statement (October 2026, a few per second), half refused on model m-b.
    const BULK = 10_050;
    await recordDb.db.query(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, cost, reserved, status, billing_month, started_at, finished_at)
       SELECT 'bulk_' || lpad(g::text, 6, '0'), $1, $2, CASE WHEN g % 2 = 0 THEN 'm-a' ELSE 'm-b' END, g, g,
              CASE WHEN g % 4 = 1 THEN 'refused' ELSE 'completed' END, '2026-10',
              timestamptz '2026-10-01T00:00:00Z' + (g / 3) * interval '1 second', timestamptz '2026-10-01T00:00:00Z' + (g / 3) * interval '1 second'
         FROM generate_series(1, $3) AS g`,
      [accountId, bulkKeyId, BULK],
    );
    const all = await allUsage(`/accounts/${accountId}/usage`, 1000);
    expect(all).toHaveLength(BULK + 3);
    expect(new Set(all.map((u) => u.requestId)).size).toBe(BULK + 3);
    expect(all.slice(0, 3).map((u) => u.requestId)).toEqual([...requestIds].reverse());
    for (let i = 1; i < all.length; i++) {
      const [a, b] = [all[i - 1] as Json, all[i] as Json];
      expect((a.time as number) > (b.time as number) || (a.time === b.time && (a.requestId as string) > (b.requestId as string))).toBe(true);
    }
    expect(all[all.length - 1]).toMatchObject({ requestId: 'bulk_000001', cost: 1, model: 'm-b', status: 'refused', time: Date.UTC(2026, 9, 1) });

    const byKey = await allUsage(`/accounts/${accountId}/usage?key_id=${bulkKeyId}`, 1000);
    expect(byKey).toHaveLength(BULK);
    const refusedB = await allUsage(`/accounts/${accountId}/usage?model=m-b&status=refused`, 500);
    expect(refusedB.map((u) => u.requestId)).toEqual(all.filter((u) => u.model === 'm-b' && u.status === 'refused').map((u) => u.requestId));
    expect(refusedB.length).toBe(Math.ceil(BULK / 4));
    // 2026-10-01T00:10:00Z (inclusive) to 00:20:00Z (exclusive): 600 seconds of three records each.
    const window = await allUsage(`/accounts/${accountId}/usage?from=2026-10-01T00:10:00Z&to=${Date.UTC(2026, 9, 1, 0, 20)}`, 1000);
    expect(window).toHaveLength(1800);

    // The CLI follows every page itself.
    const listed = await cli(['usage', accountId, '--key', bulkKeyId, '--model', 'm-a', '--all'], TOKEN, recordAdmin.url);
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { usage: Json[] }).usage.map((u) => u.requestId)).toEqual(byKey.filter((u) => u.model === 'm-a').map((u) => u.requestId));

    // The statement: the credit, then the three charges as the journal committed them (one usage line
    // per account per commit, "N requests", the request id when it carried one); its newest balance is
    // the account's, in PostgreSQL's totals and on the hot path (Redis) alike.
    const statement = await call('GET', `/accounts/${accountId}/statement?limit=2`, undefined, base());
    const lines = [...(statement.body.statement as Json[])];
    for (let cursor = statement.body.next_cursor; cursor !== null; ) {
      const page = await call('GET', `/accounts/${accountId}/statement?limit=2&cursor=${String(cursor)}`, undefined, base());
      lines.push(...(page.body.statement as Json[]));
      cursor = page.body.next_cursor;
    }
    const charged = live.reduce((n, u) => n + (u.cost as number), 0);
    expect(lines.at(-1)).toMatchObject({ kind: 'admin_credit', amount: 2_000_000, requestId: null });
    const usageLines = lines.slice(0, -1);
    expect(usageLines.length).toBeGreaterThanOrEqual(1);
    expect(usageLines.length).toBeLessThanOrEqual(3);
    expect(usageLines.every((l) => l.kind === 'usage')).toBe(true);
    expect(usageLines.reduce((n, l) => n + (l.amount as number), 0)).toBe(-charged);
    expect(usageLines.reduce((n, l) => n + Number(/^(\d+) requests?$/.exec(l.memo as string)?.[1]), 0)).toBe(3);
    for (const l of usageLines) {
      if (l.memo === '1 request') expect(requestIds).toContain(l.requestId);
      else expect(l.requestId).toBeNull();
    }
    expect(lines[0]?.balanceAfter).toBe(2_000_000 - charged);
    const totals = await recordDb.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [accountId]);
    expect(totals.rows[0]?.balance).toBe(2_000_000 - charged);
    expect((await call('GET', `/accounts/${accountId}`, undefined, base())).body.balance_micro_usd).toBe(2_000_000 - charged);

    const today = new Date().toISOString().slice(0, 10);
    const spend = await call('GET', `/accounts/${accountId}/spend?days=7`, undefined, base());
    expect(spend.body.days).toEqual([{ keyId: (key.record as Json).id, day: today, spent: charged, requests: 3 }]);

    // A refund is the charge of record, written there first: listed as refunded, on the statement, once.
    const refundOf = requestIds[1] as string;
    const refundCost = (live.find((u) => u.requestId === refundOf) as Json).cost as number;
    const refund = await call('POST', `/accounts/${accountId}/refund`, { request_id: refundOf }, base());
    expect(refund.body).toMatchObject({ refunded_micro_usd: refundCost, already_refunded: false });
    expect((await call('POST', `/accounts/${accountId}/refund`, { request_id: refundOf }, base())).body).toMatchObject({ refunded_micro_usd: 0, already_refunded: true });
    const otherAccount = (await call('POST', '/accounts', { name: 'other' }, base())).body.id as string;
    const foreign = await call('POST', `/accounts/${otherAccount}/refund`, { request_id: requestIds[0] }, base());
    expect([foreign.status, errorOf(foreign)]).toEqual([404, expect.stringMatching(/no usage record with this id on this account/)]);
    const refundedRow = (await call('GET', `/accounts/${accountId}/usage?limit=3`, undefined, base())).body.usage as Json[];
    expect(refundedRow.find((u) => u.requestId === refundOf)).toMatchObject({ refunded: true, refundedAt: expect.any(Number) });
    expect(((await call('GET', `/accounts/${accountId}/statement?limit=1`, undefined, base())).body.statement as Json[])[0]).toMatchObject({
      kind: 'refund', amount: refundCost, requestId: refundOf, balanceAfter: 2_000_000 - charged + refundCost,
    });
    expect((await call('GET', `/accounts/${accountId}`, undefined, base())).body.balance_micro_usd).toBe(2_000_000 - charged + refundCost);

    for (const [path, message] of [
      [`/accounts/${accountId}/usage?cursor=garbage`, /cursor is not one this API gave out/],
      [`/accounts/${accountId}/usage?from=yesterday`, /from must be an ISO 8601 date/],
      [`/accounts/${accountId}/usage?to=2026-13-45T99:99:99Z`, /to must be an ISO 8601 date/],
      [`/accounts/${accountId}/usage?status=lost`, /status must be one of completed, client_cancelled, upstream_failed, refused/],
      [`/accounts/${accountId}/statement?cursor=1;2`, /cursor is not one/],
      [`/accounts/${accountId}/spend?days=0`, /days must be an integer from 1 to 366/],
    ] as const) {
      const r = await call('GET', path, undefined, base());
      expect(r.status, path).toBe(400);
      expect(errorOf(r)).toMatch(message);
    }
    expect((await call('GET', `/accounts/acct_nope/statement`, undefined, base())).status).toBe(404);
    expect((await call('GET', `/accounts/${accountId}/spend?key_id=key_nope`, undefined, base())).status).toBe(404);
    // Without the record, statements are not served (the first admin server has none).
    const none = await call('GET', `/accounts/${h.accountId}/statement`);
    expect([none.status, errorOf(none)]).toEqual([404, expect.stringMatching(/need the record/)]);
  });
});
