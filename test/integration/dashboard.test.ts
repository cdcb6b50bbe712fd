// The dashboard over real HTTP on loopback, against a real PostgreSQL (users, sessions) and the same
// account store and ledger as a real gateway, so a key made in the dashboard is the key the gateway takes.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DashboardService } from '../../src/dashboard/service.js';
import { startLocalDashboard } from '../../src/dashboard/local-run.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { SignInThrottle } from '../../src/dashboard/throttle.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { DashboardClient } from '../helpers/dashboard-client.js';

const tdb = useTestDatabase('dash');
let harness: Harness;
let dash: { url: string; close(): Promise<void> };
let secureDash: { url: string; close(): Promise<void> };

/** Every response body the dashboard sent in this file, and whether it was a key's one-time reveal. */
const seen: { text: string; reveal: boolean }[] = [];
const secrets: string[] = [];

class Browser extends DashboardClient {
  constructor(base: () => string, headers: Record<string, string> = {}) {
    super(base, headers, seen);
  }
}

const base = (): string => dash.url;

beforeAll(async () => {
  harness = await startHarness();
  const service = new DashboardService({
    db: tdb.db,
    accounts: harness.backend.accounts,
    ledger: harness.backend.ledger,
    signUp: true,
    sessionTtlMs: 3_600_000,
    throttle: new SignInThrottle({ perAccount: 5, perAddress: 12, windowMs: 60_000 }),
    onRevoke: () => harness.gateway.authenticator.forget(),
  });
  dash = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
  secureDash = await startDashboard({ service, secureCookie: true }, 0, '127.0.0.1');
});

afterAll(async () => {
  await dash?.close();
  await secureDash?.close();
  await harness?.close();
});

describe('dashboard sign-up, sign-in and sessions', () => {
  it('signs up through the form, sets an HttpOnly SameSite=Lax cookie, and shows the keys page', async () => {
    const b = new Browser(base);
    const page = await b.req('GET', '/sign-up');
    expect(page.status).toBe(200);
    expect(page.text).toContain('name="password"');
    const r = await b.req('POST', '/sign-up', { email: 'Form@Example.com', password: 'a long enough password' }, { form: true });
    expect(r.status).toBe(302);
    expect(r.res.headers.get('location')).toBe('/keys');
    const cookie = r.res.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/httponly/i);
    expect(cookie).toMatch(/samesite=lax/i);
    expect(cookie).not.toMatch(/secure/i);
    const keys = await b.req('GET', '/keys');
    expect(keys.status).toBe(200);
    expect(keys.text).toContain('form@example.com');
    expect(keys.text).toContain('No keys yet');
    // Only a hash of the session id and an argon2id hash of the password are stored.
    const user = (await tdb.db.query<{ password_hash: string }>("SELECT password_hash FROM dashboard_users WHERE email = 'form@example.com'")).rows[0];
    expect(user?.password_hash).toMatch(/^\$argon2id\$/);
    const ids = (await tdb.db.query<{ id_hash: string }>('SELECT id_hash FROM dashboard_sessions')).rows.map((x) => x.id_hash);
    expect(ids).not.toContain(b.cookie?.slice('tg_session='.length));
    // The same e-mail again is refused, in the API's shape.
    const again = await new Browser(base).req('POST', '/api/sign-up', { email: 'form@example.com', password: 'another long password' });
    expect(again.status).toBe(409);
  });

  it('sets Secure on the cookie when configured for TLS', async () => {
    const b = new Browser(() => secureDash.url);
    const r = await b.req('POST', '/api/sign-up', { email: 'secure@example.com', password: 'a long enough password' });
    expect(r.status).toBe(201);
    expect(r.res.headers.get('set-cookie') ?? '').toMatch(/;\s*secure/i);
  });

  it('rotates the session at sign-in, signs out, and signs out everywhere', async () => {
    const a = new Browser(base);
    await a.signUp('rotate@example.com');
    const before = a.cookie;
    const signIn = await a.req('POST', '/api/sign-in', { email: 'rotate@example.com', password: 'correct horse battery' });
    expect(signIn.status).toBe(200);
    expect(a.cookie).toBeDefined();
    expect(a.cookie).not.toBe(before);
    // The session the browser brought to sign-in is gone.
    const stale = new Browser(base);
    stale.cookie = before;
    expect((await stale.req('GET', '/api/session')).status).toBe(401);
    expect((await a.req('GET', '/api/session')).status).toBe(200);
    a.csrf = (signIn.json() as { csrf_token: string }).csrf_token;

    const b = new Browser(base);
    const r = await b.req('POST', '/api/sign-in', { email: 'rotate@example.com', password: 'correct horse battery' });
    b.csrf = (r.json() as { csrf_token: string }).csrf_token;
    expect((await b.api('POST', '/api/sign-out')).status).toBe(204);
    expect((await b.req('GET', '/api/session')).status).toBe(401);
    expect((await a.req('GET', '/api/session')).status).toBe(200);

    const c = new Browser(base);
    c.csrf = ((await c.req('POST', '/api/sign-in', { email: 'rotate@example.com', password: 'correct horse battery' })).json() as { csrf_token: string }).csrf_token;
    const everywhere = await c.api('POST', '/api/sign-out-everywhere');
    expect(everywhere.status).toBe(200);
    expect((everywhere.json() as { sessions_ended: number }).sessions_ended).toBe(2);
    expect((await a.req('GET', '/api/session')).status).toBe(401);
    expect((await c.req('GET', '/api/session')).status).toBe(401);
  });

  it('ends an expired session', async () => {
    const a = new Browser(base);
    await a.signUp('expire@example.com');
    expect((await a.req('GET', '/api/session')).status).toBe(200);
    await tdb.db.query(
      "UPDATE dashboard_sessions SET expires_at = now() - interval '1 second' WHERE user_id = (SELECT id FROM dashboard_users WHERE email = 'expire@example.com')",
    );
    expect((await a.req('GET', '/api/session')).status).toBe(401);
    const page = await a.req('GET', '/keys');
    expect(page.status).toBe(302);
    expect(page.res.headers.get('location')).toBe('/sign-in');
  });

  it('throttles sign-in per account and per address (429 with Retry-After)', async () => {
    const victim = new Browser(base);
    await victim.signUp('victim@example.com');
    const attacker = new Browser(base);
    for (let i = 0; i < 5; i++) {
      expect((await attacker.req('POST', '/api/sign-in', { email: 'victim@example.com', password: `guess-number-${i}` })).status).toBe(401);
    }
    const limited = await attacker.req('POST', '/api/sign-in', { email: 'victim@example.com', password: 'correct horse battery' });
    expect(limited.status).toBe(429);
    expect(Number(limited.res.headers.get('retry-after'))).toBeGreaterThan(0);
    // The form says so too.
    expect((await attacker.req('POST', '/sign-in', { email: 'victim@example.com', password: 'x' }, { form: true })).status).toBe(429);
    // Per address: 12 failures over other e-mails from this address, then even a new e-mail is refused.
    for (let i = 0; i < 7; i++) await attacker.req('POST', '/api/sign-in', { email: `nobody${i}@example.com`, password: 'wrong password here' });
    expect((await attacker.req('POST', '/api/sign-in', { email: 'rotate@example.com', password: 'correct horse battery' })).status).toBe(429);
  });
});

describe('dashboard keys', () => {
  const alice = new Browser(base);
  const bob = new Browser(base);
  let aliceKeyId = '';

  beforeAll(async () => {
    await alice.signUp('alice@example.com');
    await bob.signUp('bob@example.com');
  });

  it('behind a trusted proxy, throttles by the forwarded address; otherwise a forwarded header changes nothing', async () => {
    const throttled = new DashboardService({ db: tdb.db, accounts: harness.backend.accounts, ledger: harness.backend.ledger, signUp: true, sessionTtlMs: 3_600_000, throttle: new SignInThrottle({ perAccount: 100, perAddress: 3, windowMs: 60_000 }) });
    const proxied = await startDashboard({ service: throttled, secureCookie: false, trustProxy: true }, 0, '127.0.0.1');
    const direct = await startDashboard({ service: throttled, secureCookie: false }, 0, '127.0.0.1');
    try {
      const attempt = (url: string, forwarded: string, i: number) =>
        fetch(`${url}/api/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': forwarded }, body: JSON.stringify({ email: `p${i}@example.com`, password: 'not the password' }) }).then((r) => r.status);
      const fromOne = [];
      for (let i = 0; i < 4; i++) fromOne.push(await attempt(proxied.url, '203.0.113.7', i));
      expect(fromOne).toEqual([401, 401, 401, 429]);
      // Another client behind the same proxy is not held back by the first one's failures.
      expect(await attempt(proxied.url, '203.0.113.8', 9)).toBe(401);
      // Without the setting, a client cannot dodge the throttle by inventing forwarded addresses.
      const spoofed = [];
      for (let i = 0; i < 4; i++) spoofed.push(await attempt(direct.url, `198.51.100.${i}`, 20 + i));
      expect(spoofed[3]).toBe(429);
    } finally {
      await proxied.close();
      await direct.close();
    }
  });

  it('refuses a state change without the CSRF token or from a foreign origin (403), changing nothing', async () => {
    const noToken = await alice.req('POST', '/api/keys', { name: 'x' });
    expect(noToken.status).toBe(403);
    expect(noToken.json()).toMatchObject({ error: { status: 403 } });
    expect((await alice.req('POST', '/api/keys', { name: 'x' }, { headers: { 'x-csrf-token': 'wrong' } })).status).toBe(403);
    expect((await alice.api('POST', '/api/keys', { name: 'x' }, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await alice.api('POST', '/api/keys', { name: 'x' }, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await alice.req('POST', '/keys', { name: 'x' }, { form: true })).status).toBe(403);
    expect((await alice.req('POST', '/keys', { name: 'x', csrf: alice.csrf }, { form: true, headers: { origin: 'https://evil.example' } })).status).toBe(403);
    // Sign-in from a foreign site is refused too (login CSRF).
    expect((await new Browser(base).req('POST', '/sign-in', { email: 'alice@example.com', password: 'correct horse battery' }, { form: true, headers: { 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
    expect(((await alice.api('GET', '/api/keys')).json() as { keys: unknown[] }).keys).toHaveLength(0);
    // A same-origin form with the token goes through.
    const ok = await alice.req('POST', '/keys', { name: 'form key', monthly_cap_usd: '2.50', csrf: alice.csrf }, { form: true, headers: { origin: base(), 'sec-fetch-site': 'same-origin' }, reveal: true });
    expect(ok.status).toBe(201);
    const m = /<code id="new-key"[^>]*>([^<]+)<\/code>/.exec(ok.text);
    expect(m?.[1]).toMatch(/^sk-tg-/);
    secrets.push(m?.[1] ?? '');
    const list = await alice.req('GET', '/keys');
    expect(list.text).toContain('form key');
    expect(list.text).toContain('$2.50');
  });

  it('creates a key the gateway accepts, edits its caps, revokes it and the gateway answers 401', async () => {
    const created = await alice.req('POST', '/api/keys', { name: 'sdk key', monthly_cap_usd: '5', lifetime_cap_usd: '20.000001' }, { headers: { 'x-csrf-token': alice.csrf }, reveal: true });
    expect(created.status).toBe(201);
    const { key, secret } = created.json() as { key: { id: string; display_hint: string; monthly_cap_micro_usd: number; lifetime_cap_micro_usd: number; state: string }; secret: string };
    secrets.push(secret);
    aliceKeyId = key.id;
    expect(key).toMatchObject({ state: 'active', monthly_cap_micro_usd: 5_000_000, lifetime_cap_micro_usd: 20_000_001 });
    expect(key.display_hint.startsWith('sk-tg-')).toBe(true);
    expect(key.display_hint.endsWith(secret.slice(-4))).toBe(true);

    const account = (await alice.api('GET', '/api/session')).json() as { user: { account_id: string } };
    await harness.backend.ledger.credit(account.user.account_id, 10_000_000, `dash-test-${account.user.account_id}`);
    const client = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const model = (await client.models.list()).data[0]?.id ?? '';
    const reply = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 });
    expect(reply.choices[0]?.message).toBeDefined();

    // The spend shows against the key.
    await harness.settled();
    const after = (await alice.api('GET', `/api/keys/${key.id}`)).json() as { key: { lifetime_spent_micro_usd: number; month_spent_micro_usd: number } };
    expect(after.key.lifetime_spent_micro_usd).toBeGreaterThan(0);
    expect(after.key.month_spent_micro_usd).toBe(after.key.lifetime_spent_micro_usd);

    const edited = await alice.api('PATCH', `/api/keys/${key.id}`, { monthly_cap_usd: '1.25' });
    expect(edited.status).toBe(200);
    expect(edited.json()).toMatchObject({ key: { monthly_cap_micro_usd: 1_250_000, lifetime_cap_micro_usd: null } });
    expect((await alice.api('PATCH', `/api/keys/${key.id}`, { monthly_cap_usd: '-1' })).status).toBe(400);
    expect((await alice.api('PATCH', `/api/keys/${key.id}`, { monthly_cap_usd: 'lots' })).status).toBe(400);

    const confirm = await alice.req('GET', `/keys/${key.id}/revoke`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('cannot be undone');
    const revoked = await alice.req('POST', `/keys/${key.id}/revoke`, { csrf: alice.csrf }, { form: true });
    expect(revoked.status).toBe(302);
    expect(((await alice.api('GET', `/api/keys/${key.id}`)).json() as { key: { state: string } }).key.state).toBe('revoked');
    const refused = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
  });

  it("a holder can neither see nor change another account's keys, on any route", async () => {
    const target = (await alice.req('POST', '/api/keys', { name: 'alice private' }, { headers: { 'x-csrf-token': alice.csrf }, reveal: true })).json() as { key: { id: string }; secret: string };
    secrets.push(target.secret);
    const id = target.key.id;
    const bobList = (await bob.api('GET', '/api/keys')).json() as { keys: { id: string }[] };
    expect(bobList.keys.map((k) => k.id)).not.toContain(id);
    expect((await bob.req('GET', '/keys')).text).not.toContain('alice private');
    const attempts: [string, number][] = [
      ['GET /api/keys/:id', (await bob.api('GET', `/api/keys/${id}`)).status],
      ['PATCH /api/keys/:id', (await bob.api('PATCH', `/api/keys/${id}`, { monthly_cap_usd: '0' })).status],
      ['POST /api/keys/:id/revoke', (await bob.api('POST', `/api/keys/${id}/revoke`)).status],
      ['GET /keys/:id/edit', (await bob.req('GET', `/keys/${id}/edit`)).status],
      ['POST /keys/:id/caps', (await bob.req('POST', `/keys/${id}/caps`, { csrf: bob.csrf, monthly_cap_usd: '0' }, { form: true })).status],
      ['GET /keys/:id/revoke', (await bob.req('GET', `/keys/${id}/revoke`)).status],
      ['POST /keys/:id/revoke', (await bob.req('POST', `/keys/${id}/revoke`, { csrf: bob.csrf }, { form: true })).status],
    ];
    expect(attempts).toEqual(attempts.map(([route]) => [route, 404]));
    const still = (await alice.api('GET', `/api/keys/${id}`)).json() as { key: { state: string; monthly_cap_micro_usd: number | null } };
    expect(still.key).toMatchObject({ state: 'active', monthly_cap_micro_usd: null });
    // Bob's CSRF token is not Alice's: a token from another session is refused.
    expect((await alice.api('POST', '/api/keys', { name: 'y' }, { 'x-csrf-token': bob.csrf })).status).toBe(403);
    expect(aliceKeyId).not.toBe('');
  });

  it('never sends a key secret except in the one-time reveal', () => {
    expect(secrets.length).toBe(3);
    for (const s of secrets) {
      const carriers = seen.filter((r) => r.text.includes(s));
      expect(carriers).toHaveLength(1);
      expect(carriers[0]?.reveal).toBe(true);
    }
  });
});

describe('the local run dashboard', () => {
  it('signs the demo user in to the demo account over plain http and shows its keys', async () => {
    const local = await startLocalDashboard({
      db: tdb.db,
      backend: harness.backend,
      accountId: harness.accountId,
      onRevoke: () => harness.gateway.authenticator.forget(),
      env: { DASHBOARD_PORT: '0', TOLLGATE_DEMO_EMAIL: 'demo@tollgate.local', TOLLGATE_DEMO_PASSWORD: 'demo password 1234' },
    });
    try {
      expect(local.password).toBe('demo password 1234');
      const b = new Browser(() => local.url);
      const r = await b.req('POST', '/api/sign-in', { email: local.email, password: local.password });
      expect(r.status).toBe(200);
      expect(r.res.headers.get('set-cookie') ?? '').not.toMatch(/secure/i);
      b.csrf = (r.json() as { csrf_token: string }).csrf_token;
      const keys = (await b.api('GET', '/api/keys')).json() as { keys: { id: string }[] };
      expect(keys.keys.map((k) => k.id)).toEqual([harness.keyId]);
      // A second start (a restart) sets the new password; the old one no longer signs in.
      const again = await startLocalDashboard({ db: tdb.db, backend: harness.backend, accountId: harness.accountId, onRevoke: () => undefined, env: { DASHBOARD_PORT: '0' } });
      await again.close();
      expect(again.password).not.toBe('demo password 1234');
      expect((await new Browser(() => local.url).req('POST', '/api/sign-in', { email: local.email, password: 'demo password 1234' })).status).toBe(401);
      expect((await new Browser(() => local.url).req('POST', '/api/sign-in', { email: local.email, password: again.password })).status).toBe(200);
    } finally {
      await local.close();
    }
  });
});
