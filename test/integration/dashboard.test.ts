// The dashboard over real HTTP on loopback, against a real PostgreSQL (users, sessions) and the same
// account store and ledger as a real gateway, so a key made in the dashboard is the key the gateway takes.
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { readDashboardConfig } from '../../src/dashboard/config.js';
import { runDashboard } from '../../src/dashboard/run.js';
import { totpCode } from '../../src/dashboard/totp.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { startLocalDashboard } from '../../src/dashboard/local-run.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { AttemptThrottle } from '../../src/dashboard/throttle.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { DashboardClient } from '../helpers/dashboard-client.js';

const tdb = useTestDatabase('dash');
let harness: Harness;
/** The file's one account service, as a composition root builds it once. */
let accounts: AccountService;
let dash: { url: string; close(): Promise<void> };
let secureDash: { url: string; close(): Promise<void> };
/** The issue-29 tests' dashboard: wide budgets, so the throttle tests above leave them alone. */
let trust: { url: string; close(): Promise<void> };

/** Every response body the dashboard sent in this file, and whether it was a key's one-time reveal. */
const seen: { text: string; reveal: boolean }[] = [];
const secrets: string[] = [];

class Browser extends DashboardClient {
  constructor(base: () => string, headers: Record<string, string> = {}) {
    super(base, headers, seen);
  }
}

const base = (): string => dash.url;
const tbase = (): string => trust.url;

beforeAll(async () => {
  harness = await startHarness();
  accounts = new AccountService({ accounts: harness.backend.accounts, ledger: harness.backend.ledger, onRevoke: () => harness.gateway.authenticator.forget() });
  const service = new DashboardService({
    db: tdb.db,
    accounts,
    signUp: true,
    sessionTtlMs: 3_600_000,
    // Every sign-up here comes from 127.0.0.1: a wide address budget for them (their own test is below).
    throttles: { signIn: new AttemptThrottle({ perAccount: 5, perAddress: 12, windowMs: 60_000 }), signUp: new AttemptThrottle({ perAccount: 3, perAddress: 1000, windowMs: 60_000 }) },
  });
  dash = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
  secureDash = await startDashboard({ service, secureCookie: true }, 0, '127.0.0.1');
  const wide = (): AttemptThrottle => new AttemptThrottle({ perAccount: 50, perAddress: 1000, windowMs: 60_000 });
  trust = await startDashboard(
    { service: new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000, throttles: { signIn: wide(), signUp: wide() } }), secureCookie: false },
    0,
    '127.0.0.1',
  );
});

afterAll(async () => {
  await dash?.close();
  await secureDash?.close();
  await trust?.close();
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
    await alice.signUpConfirmed(tdb.db, 'alice@example.com');
    await bob.signUpConfirmed(tdb.db, 'bob@example.com');
  });

  it('behind a trusted proxy, throttles by the forwarded address; otherwise a forwarded header changes nothing', async () => {
    const throttled = new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000, throttles: { signIn: new AttemptThrottle({ perAccount: 100, perAddress: 3, windowMs: 60_000 }) } });
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
    const ok = await alice.req('POST', '/keys', { name: 'form key', monthly_cap_usd: '2.50', csrf: alice.csrf }, { form: true, headers: { origin: base(), 'sec-fetch-site': 'same-origin' } });
    expect(ok.status).toBe(303);
    const shown = await alice.req('GET', '/keys', undefined, { reveal: true });
    const m = /<code id="new-key"[^>]*>([^<]+)<\/code>/.exec(shown.text);
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
    // Partial: the lifetime cap, not named, is kept.
    expect(edited.json()).toMatchObject({ key: { monthly_cap_micro_usd: 1_250_000, lifetime_cap_micro_usd: 20_000_001 } });
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
      accounts,
      accountId: harness.accountId,
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
      const again = await startLocalDashboard({ db: tdb.db, accounts, accountId: harness.accountId, env: { DASHBOARD_PORT: '0' } });
      await again.close();
      expect(again.password).not.toBe('demo password 1234');
      expect((await new Browser(() => local.url).req('POST', '/api/sign-in', { email: local.email, password: 'demo password 1234' })).status).toBe(401);
      expect((await new Browser(() => local.url).req('POST', '/api/sign-in', { email: local.email, password: again.password })).status).toBe(200);
    } finally {
      await local.close();
    }
  });
});

describe('accounts you can trust (issue 29, defect 1)', () => {
  it('sign-up mails a confirmation link through the outbox; keys and top-ups wait until it is followed', async () => {
    const h = new Browser(tbase);
    await h.signUp('unconfirmed@example.com');
    const refused = await h.api('POST', '/api/keys', { name: 'too soon' });
    expect(refused.status).toBe(403);
    expect((refused.json() as { error: { message: string } }).error.message).toMatch(/Confirm your e-mail address/);
    const session = (await h.api('GET', '/api/session')).json() as { user: { email_verified: boolean } };
    expect(session.user.email_verified).toBe(false);
    expect((await h.req('POST', '/keys', { name: 'too soon', csrf: h.csrf }, { form: true })).status).toBe(403);
    // Top-ups are refused before anything is quoted or started (this app has no providers: 403, not 404).
    expect((await h.api('POST', '/api/top-ups', { amount_usd: '10', provider: 'stripe' })).status).toBe(403);
    expect((await h.req('POST', '/balance/quote', { amount_usd: '10', csrf: h.csrf }, { form: true })).status).toBe(403);
    expect((await h.req('GET', '/keys')).text).toContain('Confirm your e-mail address');
    // The link is mailed under the dashboard's own address and works once.
    const path = await DashboardClient.confirmationPath(tdb.db, 'unconfirmed@example.com');
    const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = 'unconfirmed@example.com'");
    expect(mail.rows[0]?.body).toContain(`${trust.url}${path}`);
    expect((await tdb.db.query('SELECT 1 FROM email_verifications WHERE token_hash = $1', [path.split('/').pop() ?? ''])).rows).toEqual([]);
    expect((await new Browser(tbase).req('GET', path)).status).toBe(200);
    expect((await new Browser(tbase).req('GET', path)).status).toBe(400);
    expect(((await h.api('GET', '/api/session')).json() as { user: { email_verified: boolean } }).user.email_verified).toBe(true);
    const created = await h.api('POST', '/api/keys', { name: 'now' }, {});
    expect(created.status).toBe(201);
    expect((created.json() as { secret: string }).secret).toMatch(/^sk-tg-/);
  });

  it('the admin bootstrap refuses an address a holder signed up (clear log line), unless named a promotion; either way the squatter gains nothing', async () => {
    const squatter = new Browser(tbase);
    await squatter.signUp('operator@example.com', 'squatter password 1');
    const lines: string[] = [];
    const env = { DASHBOARD_PORT: '0', DASHBOARD_ADMIN_EMAIL: 'operator@example.com', DASHBOARD_ADMIN_PASSWORD: 'the operator password' };
    const first = await runDashboard({ db: tdb.db, accounts, env, log: (l) => lines.push(l) });
    await first.close();
    const still = (await squatter.req('GET', '/api/session')).json() as { user: { role: string } };
    expect(still.user.role).toBe('holder');
    const refusal = lines.map((l) => JSON.parse(l) as { event: string; message?: string }).find((l) => l.event === 'dashboard_admin_refused');
    expect(refusal?.message).toMatch(/operator@example\.com belongs to an existing holder.*DASHBOARD_ADMIN_PROMOTE=true/);
    expect((await new Browser(tbase).req('POST', '/api/sign-in', { email: 'operator@example.com', password: 'the operator password' })).status).toBe(401);
    // Named as a promotion: it becomes admin with the configured password, and the squatter's session ends.
    const second = await runDashboard({ db: tdb.db, accounts, env: { ...env, DASHBOARD_ADMIN_PROMOTE: 'true' }, log: (l) => lines.push(l) });
    await second.close();
    expect((await squatter.req('GET', '/api/session')).status).toBe(401);
    expect((await squatter.req('GET', '/admin')).status).toBe(302);
    const op = new Browser(tbase);
    const signIn = await op.req('POST', '/api/sign-in', { email: 'operator@example.com', password: 'the operator password' });
    expect(signIn.status).toBe(200);
    expect((signIn.json() as { user: { role: string; email_verified: boolean } }).user).toMatchObject({ role: 'admin', email_verified: true });
    expect((await new Browser(tbase).req('POST', '/api/sign-in', { email: 'operator@example.com', password: 'squatter password 1' })).status).toBe(401);
  });

  it('a new admin address is created confirmed; a restart with the same password keeps its sessions, a new password ends them', async () => {
    const env = { DASHBOARD_PORT: '0', DASHBOARD_ADMIN_EMAIL: 'fresh-admin@example.com', DASHBOARD_ADMIN_PASSWORD: 'fresh admin password' };
    await (await runDashboard({ db: tdb.db, accounts, env })).close();
    const a = new Browser(tbase);
    const r = await a.req('POST', '/api/sign-in', { email: 'fresh-admin@example.com', password: 'fresh admin password' });
    expect((r.json() as { user: { role: string } }).user.role).toBe('admin');
    await (await runDashboard({ db: tdb.db, accounts, env })).close();
    expect((await a.req('GET', '/api/session')).status).toBe(200);
    await (await runDashboard({ db: tdb.db, accounts, env: { ...env, DASHBOARD_ADMIN_PASSWORD: 'a changed admin password' } })).close();
    expect((await a.req('GET', '/api/session')).status).toBe(401);
    const again = await a.req('POST', '/api/sign-in', { email: 'fresh-admin@example.com', password: 'a changed admin password' });
    expect((again.json() as { user: { email_verified: boolean } }).user.email_verified).toBe(true);
  });

  it("every change of a user's password, role or account ends that user's sessions", async () => {
    const holderAccount = await harness.backend.accounts.createAccount('provisioned');
    const otherAccount = await harness.backend.accounts.createAccount('provisioned-2');
    const service = new DashboardService({ db: tdb.db, accounts, signUp: false, sessionTtlMs: 3_600_000 });
    await service.provisioning.upsertUser('provisioned@example.com', 'first password 1', holderAccount.id);
    const signedIn = async (password: string): Promise<Browser> => {
      const b = new Browser(tbase);
      expect((await b.req('POST', '/api/sign-in', { email: 'provisioned@example.com', password })).status).toBe(200);
      return b;
    };
    // The same settings again (a restart): nothing changed, the session stays.
    let b = await signedIn('first password 1');
    await service.provisioning.upsertUser('provisioned@example.com', 'first password 1', holderAccount.id);
    expect((await b.req('GET', '/api/session')).status).toBe(200);
    // Password.
    await service.provisioning.upsertUser('provisioned@example.com', 'second password 2', holderAccount.id);
    expect((await b.req('GET', '/api/session')).status).toBe(401);
    // Account.
    b = await signedIn('second password 2');
    await service.provisioning.upsertUser('provisioned@example.com', 'second password 2', otherAccount.id);
    expect((await b.req('GET', '/api/session')).status).toBe(401);
    // Role.
    b = await signedIn('second password 2');
    await service.provisioning.upsertUser('provisioned@example.com', 'second password 2', otherAccount.id, 'admin');
    expect((await b.req('GET', '/api/session')).status).toBe(401);
  });

  it('admins enrol TOTP; with DASHBOARD_ADMIN_REQUIRE_TOTP the admin pages need a session opened with a code, and a code works once', async () => {
    const operators = await harness.backend.accounts.createAccount('totp-operators');
    const service = new DashboardService({ db: tdb.db, accounts, signUp: false, sessionTtlMs: 3_600_000, adminRequiresTotp: true });
    await service.provisioning.upsertUser('totp-admin@example.com', 'totp admin password', operators.id, 'admin');
    const app = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
    const errors: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      errors.push(String(chunk));
      return true;
    });
    try {
      const url = (): string => app.url;
      const other = new Browser(url);
      expect((await other.req('POST', '/api/sign-in', { email: 'totp-admin@example.com', password: 'totp admin password' })).status).toBe(200);
      const a = new Browser(url);
      const r = await a.req('POST', '/api/sign-in', { email: 'totp-admin@example.com', password: 'totp admin password' });
      a.csrf = (r.json() as { csrf_token: string }).csrf_token;
      const refused = await a.api('GET', '/api/admin/accounts');
      expect(refused.status).toBe(403);
      expect(refused.text).toMatch(/two-factor/);
      expect((await a.req('GET', '/admin')).status).toBe(403);
      // Enrolment: the page shows a secret; a wrong code or a wrong password is refused, the right pair turns it on.
      const page = await a.req('GET', '/account/two-factor');
      const secret = /<code id="totp-secret"[^>]*>([A-Z2-7]{32})<\/code>/.exec(page.text)?.[1] ?? '';
      expect(secret).not.toBe('');
      const now = await freshStep();
      const wrong = String((Number(totpCode(secret, now)) + 1) % 1_000_000).padStart(6, '0');
      expect((await a.req('POST', '/account/two-factor', { csrf: a.csrf, secret, code: wrong, password: 'totp admin password' }, { form: true })).status).toBe(400);
      expect((await a.req('POST', '/account/two-factor', { csrf: a.csrf, secret, code: totpCode(secret, now), password: 'not the password' }, { form: true })).status).toBe(403);
      const enrolled = await a.req('POST', '/account/two-factor', { csrf: a.csrf, secret, code: totpCode(secret, now), password: 'totp admin password' }, { form: true });
      expect(enrolled.status).toBe(200);
      expect(enrolled.text).toContain('Save your recovery codes');
      expect((await tdb.db.query<{ totp_secret: string }>("SELECT totp_secret FROM dashboard_users WHERE email = 'totp-admin@example.com'")).rows[0]?.totp_secret).toBe(secret);
      // This session now counts as opened with the second factor; the other one ended.
      expect((await a.api('GET', '/api/admin/accounts')).status).toBe(200);
      expect((await other.req('GET', '/api/session')).status).toBe(401);
      // Sign-in now needs a code; the code used at enrolment does not work again; the next one does.
      const b = new Browser(url);
      expect((await b.req('POST', '/api/sign-in', { email: 'totp-admin@example.com', password: 'totp admin password' })).status).toBe(401);
      expect((await b.req('POST', '/api/sign-in', { email: 'totp-admin@example.com', password: 'totp admin password', code: totpCode(secret, now) })).status).toBe(401);
      const ok = await b.req('POST', '/api/sign-in', { email: 'totp-admin@example.com', password: 'totp admin password', code: totpCode(secret, now + 30_000) });
      expect(ok.status).toBe(200);
      expect((ok.json() as { second_factor: boolean }).second_factor).toBe(true);
      expect((await b.req('GET', '/api/admin/accounts')).status).toBe(200);
      expect(errors.join('')).not.toContain(secret);
    } finally {
      spy.mockRestore();
      await app.close();
    }
  });
});

/**
 * Now, once at least 10 s of the current 30-second TOTP step are left: the codes of the step before, this
 * one and the next (each accepted once, in that order) stay valid for the test's next 20 s.
 */
async function freshStep(): Promise<number> {
  const into = Date.now() % 30_000;
  if (into > 20_000) await new Promise((r) => setTimeout(r, 30_000 - into + 50));
  return Date.now();
}

describe('DASHBOARD_ADMIN_REQUIRE_TOTP', () => {
  it('is read from the environment (true/false, default false) and, when true, the started dashboard refuses admin calls without a code', async () => {
    expect(readDashboardConfig({}).adminRequireTotp).toBe(false);
    expect(readDashboardConfig({ DASHBOARD_ADMIN_REQUIRE_TOTP: 'true' }).adminRequireTotp).toBe(true);
    expect(() => readDashboardConfig({ DASHBOARD_ADMIN_REQUIRE_TOTP: 'maybe' })).toThrow(/DASHBOARD_ADMIN_REQUIRE_TOTP/);
    expect(() => readDashboardConfig({ DASHBOARD_ADMIN_EMAIL: 'a@example.com', DASHBOARD_ADMIN_PASSWORD: 'long enough pw', DASHBOARD_ADMIN_PROMOTE: 'sure' })).toThrow(/DASHBOARD_ADMIN_PROMOTE/);
    const env = { DASHBOARD_PORT: '0', DASHBOARD_ADMIN_EMAIL: 'env-admin@example.com', DASHBOARD_ADMIN_PASSWORD: 'env admin password' };
    for (const [required, expected] of [['true', 403], ['false', 200]] as const) {
      const running = await runDashboard({ db: tdb.db, accounts, env: { ...env, DASHBOARD_ADMIN_REQUIRE_TOTP: required } });
      try {
        const a = new Browser(() => running.url);
        expect((await a.req('POST', '/api/sign-in', { email: 'env-admin@example.com', password: 'env admin password' })).status).toBe(200);
        expect((await a.req('GET', '/api/admin/accounts')).status).toBe(expected);
      } finally {
        await running.close();
      }
    }
  });
});

describe('throttles that count before they verify (issue 29, defect 3)', () => {
  let own: { url: string; close(): Promise<void> };
  beforeAll(async () => {
    // The default budgets, on a dashboard of its own (this file's other dashboard has its own counts).
    const service = new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000 });
    own = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
    await new Browser(() => own.url).signUp('burst@example.com', 'the right password');
  });
  afterAll(async () => {
    await own?.close();
  });

  it('40 simultaneous sign-ins, 39 wrong and the right one last: no 200 past the budget, the rest 429 with Retry-After', async () => {
    // Forty connections opened first, so the forty attempts reach the server together.
    const agent = new Agent({ connections: 40 });
    try {
      await Promise.all(Array.from({ length: 40 }, () => undiciFetch(`${own.url}/sign-in`, { dispatcher: agent }).then((r) => r.text())));
      const attempt = (password: string) =>
        undiciFetch(`${own.url}/api/sign-in`, { dispatcher: agent, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'burst@example.com', password }) });
      const all = await Promise.all([...Array.from({ length: 39 }, (_, i) => attempt(`wrong guess ${i}`)), attempt('the right password')]);
      const statuses = all.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toEqual([]);
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(35);
      expect(statuses[39]).toBe(429);
      for (const r of all.filter((x) => x.status === 429)) expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      await Promise.all(all.map((r) => r.text()));
    } finally {
      await agent.close();
    }
  });

  it('sign-up, reset requests and reset submissions are throttled too, with the same 429 answer', async () => {
    const c = new Browser(() => own.url);
    const answers: { status: number; message: string; retryAfter: string | null }[] = [];
    const keep = async (r: Promise<{ status: number; json: () => unknown; res: Response }>) => {
      const x = await r;
      answers.push({ status: x.status, message: x.status === 429 ? (x.json() as { error: { message: string } }).error.message : '', retryAfter: x.res.headers.get('retry-after') });
      return x.status;
    };
    // Sign-up: three attempts for one address, then 429 (before any argon2 work).
    const signUps = [];
    for (let i = 0; i < 4; i++) signUps.push(await keep(c.req('POST', '/api/sign-up', { email: 'bomb@example.com', password: 'a long enough password' })));
    expect(signUps).toEqual([201, 409, 409, 429]);
    // Reset requests: three mails to one address, then 429; nothing more is mailed.
    const resets = [];
    for (let i = 0; i < 4; i++) resets.push(await keep(c.req('POST', '/api/password-reset', { email: 'burst@example.com' })));
    expect(resets).toEqual([202, 202, 202, 429]);
    expect((await tdb.db.query("SELECT 1 FROM email_outbox WHERE recipient = 'burst@example.com' AND subject LIKE 'Reset%'")).rows).toHaveLength(3);
    // Reset submissions: five tries of one token, then 429.
    const submits = [];
    for (let i = 0; i < 6; i++) submits.push(await keep(c.req('POST', '/api/password-reset/guessed-token-0000000000', { password: 'a long new password' })));
    expect(submits).toEqual([400, 400, 400, 400, 400, 429]);
    const throttled = answers.filter((a) => a.status === 429);
    expect(throttled).toHaveLength(3);
    for (const t of throttled) {
      expect(t.message).toMatch(/^Too many attempts; try again in \d+ seconds\.$/);
      expect(Number(t.retryAfter)).toBeGreaterThan(0);
    }
    // The form says the same, with the same header.
    const form = await c.req('POST', '/password-reset', { email: 'burst@example.com' }, { form: true });
    expect(form.status).toBe(429);
    expect(form.text).toMatch(/Too many attempts; try again in \d+ seconds\./);
    expect(Number(form.res.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('smaller holes (issue 29, defects 7 and 11)', () => {
  it('the reset link never comes from the Host header: without DASHBOARD_PUBLIC_URL it is the dashboard\'s own address', async () => {
    await new Browser(tbase).signUp('hosted@example.com');
    const status = await new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ email: 'hosted@example.com' });
      const u = new URL(`${trust.url}/api/password-reset`);
      const r = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { host: 'attacker.example', 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      r.on('error', reject);
      r.end(body);
    });
    expect(status).toBe(202);
    const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = 'hosted@example.com' AND subject LIKE 'Reset%'");
    expect(mail.rows).toHaveLength(1);
    expect(mail.rows[0]?.body).not.toContain('attacker.example');
    expect(mail.rows[0]?.body).toContain(`${trust.url}/password-reset/`);
  });

  it('the admin account page checks the role before the account: a holder gets the same 403 for every id', async () => {
    const h = new Browser(tbase);
    await h.signUp('curious@example.com');
    const mine = ((await h.api('GET', '/api/session')).json() as { user: { account_id: string } }).user.account_id;
    const existing = await h.req('GET', `/admin/accounts/${mine}`);
    const missing = await h.req('GET', '/admin/accounts/acct_does_not_exist');
    expect([existing.status, missing.status]).toEqual([403, 403]);
    expect(existing.text).toBe(missing.text);
  });

  it('an unexpected error on POST /password-reset/<token> is logged without the token', async () => {
    const token = 'secret-reset-token-abcdefghijklmnop';
    const errors: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      errors.push(String(chunk));
      return true;
    });
    // A real failure of the record: the table is away for the length of one request.
    await tdb.db.query('ALTER TABLE password_resets RENAME TO password_resets_away');
    try {
      const r = await new Browser(tbase).req('POST', `/password-reset/${token}`, { password: 'a long new password' }, { form: true });
      expect(r.status).toBe(500);
      expect(r.text).not.toContain(token);
    } finally {
      await tdb.db.query('ALTER TABLE password_resets_away RENAME TO password_resets');
      spy.mockRestore();
    }
    const logged = errors.join('');
    expect(logged).toContain('POST /password-reset/[redacted]');
    expect(logged).not.toContain(token);
  });

  it('reloading after a key is created shows the list and makes no second key (post-redirect-get); the secret is shown once', async () => {
    // A provisioned holder (confirmed by the operator's word), signed in.
    const account = await harness.backend.accounts.createAccount('reload');
    await new DashboardService({ db: tdb.db, accounts, signUp: false, sessionTtlMs: 3_600_000 }).provisioning.upsertUser('reload@example.com', 'reload password', account.id);
    const h = new Browser(tbase);
    const signedIn = await h.req('POST', '/api/sign-in', { email: 'reload@example.com', password: 'reload password' });
    h.csrf = (signedIn.json() as { csrf_token: string }).csrf_token;
    const post = await h.req('POST', '/keys', { name: 'reloaded', csrf: h.csrf }, { form: true });
    expect(post.status).toBe(303);
    expect(post.res.headers.get('location')).toBe('/keys');
    const first = await h.req('GET', '/keys');
    const secret = /<code id="new-key"[^>]*>([^<]+)<\/code>/.exec(first.text)?.[1] ?? '';
    expect(secret).toMatch(/^sk-tg-/);
    // The record never held it in the clear; the redirect and its cookie did not carry it.
    expect(post.text + JSON.stringify([...post.res.headers])).not.toContain(secret);
    const reload = await h.req('GET', '/keys');
    expect(reload.text).not.toContain(secret);
    expect(reload.text).not.toContain('id="new-key"');
    expect(((await h.api('GET', '/api/keys')).json() as { keys: unknown[] }).keys).toHaveLength(1);
    expect((await tdb.db.query('SELECT 1 FROM key_reveals')).rows).toEqual([]);
  });
});

describe('rate limits in the dashboard (issue 32, item 3)', () => {
  const carol = new Browser(base);
  const dave = new Browser(base);

  beforeAll(async () => {
    await carol.signUpConfirmed(tdb.db, 'carol@example.com');
    await dave.signUpConfirmed(tdb.db, 'dave@example.com');
  });

  it("sets a key's limits on its create and edit pages and the account's default on the Keys page; the gateway applies them", async () => {
    const made = await carol.req('POST', '/keys', { name: 'limited key', requests_per_minute: '2', concurrent_requests: '', csrf: carol.csrf }, { form: true });
    expect(made.status).toBe(303);
    const shown = await carol.req('GET', '/keys', undefined, { reveal: true });
    const secret = /<code id="new-key"[^>]*>([^<]+)<\/code>/.exec(shown.text)?.[1] ?? '';
    secrets.push(secret);
    expect(shown.text).toContain('2 requests/min');
    const keyId = ((await carol.api('GET', '/api/keys')).json() as { keys: Array<{ id: string; rate_limits: unknown }> }).keys[0]?.id ?? '';
    expect(((await carol.api('GET', `/api/keys/${keyId}`)).json() as { key: { rate_limits: unknown } }).key.rate_limits).toEqual({ requests_per_minute: 2, tokens_per_minute: null, concurrent_requests: null });

    // The edit page shows the key's limits in its own form.
    const edit = await carol.req('GET', `/keys/${keyId}/edit`);
    expect(edit.text).toContain(`action="/keys/${keyId}/rate-limits"`);
    expect(edit.text).toMatch(/name="requests_per_minute"[^>]*value="2"/);
    const set = await carol.req('POST', `/keys/${keyId}/rate-limits`, { requests_per_minute: '', tokens_per_minute: '50000', concurrent_requests: '', csrf: carol.csrf }, { form: true });
    expect(set.status).toBe(302);
    // The account's default for keys: one request a minute for every key without its own.
    const defaults = await carol.req('POST', '/keys/rate-limits', { requests_per_minute: '1', tokens_per_minute: '', concurrent_requests: '', csrf: carol.csrf }, { form: true });
    expect(defaults.status).toBe(302);
    const page = await carol.req('GET', '/keys');
    expect(page.text).toContain('1 requests/min (default) · 50000 tokens/min');
    expect(page.text).toMatch(/action="\/keys\/rate-limits"[\s\S]*name="requests_per_minute"[^>]*value="1"/);
    const invalid = await carol.req('POST', `/keys/${keyId}/rate-limits`, { requests_per_minute: 'many', csrf: carol.csrf }, { form: true });
    expect(invalid.status).toBe(400);
    expect(invalid.text).toContain('requests_per_minute must be a whole number from 1');

    const session = (await carol.api('GET', '/api/session')).json() as { user: { account_id: string } };
    await harness.backend.ledger.credit(session.user.account_id, 10_000_000, `dash-limits-${session.user.account_id}`);
    const client = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const { response } = await client.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }).withResponse();
    expect(response.headers.get('x-ratelimit-limit-requests')).toBe('1');
    expect(response.headers.get('x-ratelimit-limit-tokens')).toBe('50000');
    // The PATCH of the JSON API sets the key's own limit, overriding the default, and keeps the others.
    const patched = await carol.api('PATCH', `/api/keys/${keyId}`, { requests_per_minute: 100 });
    expect((patched.json() as { key: { rate_limits: unknown } }).key.rate_limits).toEqual({ requests_per_minute: 100, tokens_per_minute: 50000, concurrent_requests: null });
    const after = await client.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }).withResponse();
    expect(after.response.headers.get('x-ratelimit-limit-requests')).toBe('100');
    // Another holder cannot touch the key's limits.
    expect((await dave.req('POST', `/keys/${keyId}/rate-limits`, { requests_per_minute: '1', csrf: dave.csrf }, { form: true })).status).toBe(404);
  });

  it('a partial update keeps what it does not name: a rate limit alone leaves the caps, a cap alone the limits, in the JSON API and the forms; null or empty clears one', async () => {
    const made = await carol.api('POST', '/api/keys', { name: 'capped', monthly_cap_usd: '5', lifetime_cap_usd: '20', requests_per_minute: 30, concurrent_requests: 3 });
    expect(made.status).toBe(201);
    const { key, secret } = made.json() as { key: { id: string }; secret: string };
    secrets.push(secret);
    const accountId = ((await carol.api('GET', '/api/session')).json() as { user: { account_id: string } }).user.account_id;
    /** The key as the gateway's store holds it: what it enforces. */
    const enforced = async () => {
      const k = await harness.backend.accounts.getKey(accountId, key.id);
      return { lifetimeCap: k?.lifetimeCap, monthlyCap: k?.monthlyCap, rateLimits: k?.rateLimits };
    };
    // The defect: a rate limit alone used to clear both caps, leaving the key free to spend the whole balance.
    const limitOnly = await carol.api('PATCH', `/api/keys/${key.id}`, { requests_per_minute: 60 });
    expect(limitOnly.status).toBe(200);
    expect(limitOnly.json()).toMatchObject({ key: { monthly_cap_micro_usd: 5_000_000, lifetime_cap_micro_usd: 20_000_000, rate_limits: { requests_per_minute: 60, tokens_per_minute: null, concurrent_requests: 3 } } });
    expect(await enforced()).toEqual({ lifetimeCap: 20_000_000, monthlyCap: 5_000_000, rateLimits: { requestsPerMinute: 60, concurrentRequests: 3 } });
    // A cap alone keeps the other cap and the limits.
    const capOnly = await carol.api('PATCH', `/api/keys/${key.id}`, { monthly_cap_usd: '7.5' });
    expect(capOnly.json()).toMatchObject({ key: { monthly_cap_micro_usd: 7_500_000, lifetime_cap_micro_usd: 20_000_000, rate_limits: { requests_per_minute: 60, concurrent_requests: 3 } } });
    // null (JSON) or an empty string clears only the one named.
    const cleared = await carol.api('PATCH', `/api/keys/${key.id}`, { lifetime_cap_usd: null, concurrent_requests: '' });
    expect(cleared.json()).toMatchObject({ key: { monthly_cap_micro_usd: 7_500_000, lifetime_cap_micro_usd: null, rate_limits: { requests_per_minute: 60, tokens_per_minute: null, concurrent_requests: null } } });
    expect(await enforced()).toEqual({ lifetimeCap: undefined, monthlyCap: 7_500_000, rateLimits: { requestsPerMinute: 60 } });
    // An empty PATCH changes nothing; a bad value changes nothing either.
    expect((await carol.api('PATCH', `/api/keys/${key.id}`, {})).status).toBe(200);
    expect((await carol.api('PATCH', `/api/keys/${key.id}`, { requests_per_minute: 5, monthly_cap_usd: 'lots' })).status).toBe(400);
    expect(await enforced()).toEqual({ lifetimeCap: undefined, monthlyCap: 7_500_000, rateLimits: { requestsPerMinute: 60 } });
    // The edit page's two forms each change only their own fields.
    expect((await carol.req('POST', `/keys/${key.id}/rate-limits`, { requests_per_minute: '90', tokens_per_minute: '', concurrent_requests: '', csrf: carol.csrf }, { form: true })).status).toBe(302);
    expect(await enforced()).toEqual({ lifetimeCap: undefined, monthlyCap: 7_500_000, rateLimits: { requestsPerMinute: 90 } });
    expect((await carol.req('POST', `/keys/${key.id}/caps`, { monthly_cap_usd: '', lifetime_cap_usd: '3', csrf: carol.csrf }, { form: true })).status).toBe(302);
    expect(await enforced()).toEqual({ lifetimeCap: 3_000_000, monthlyCap: undefined, rateLimits: { requestsPerMinute: 90 } });
  });

  it('a partial update naming only the cost ceiling keeps the caps and rate limits, and one naming only a cap or a limit keeps the ceiling, in the JSON API and the forms', async () => {
    const made = await carol.api('POST', '/api/keys', { name: 'ceilinged', monthly_cap_usd: '5', lifetime_cap_usd: '20', max_cost_per_request_usd: '0.05', requests_per_minute: 30, concurrent_requests: 3 });
    expect(made.status).toBe(201);
    const { key, secret } = made.json() as { key: { id: string }; secret: string };
    secrets.push(secret);
    const accountId = ((await carol.api('GET', '/api/session')).json() as { user: { account_id: string } }).user.account_id;
    /** The key as the gateway's store holds it: what it enforces. */
    const enforced = async () => {
      const k = await harness.backend.accounts.getKey(accountId, key.id);
      return { lifetimeCap: k?.lifetimeCap, monthlyCap: k?.monthlyCap, maxCostPerRequest: k?.maxCostPerRequest, rateLimits: k?.rateLimits };
    };
    // The ceiling alone: the caps and the limits stay.
    const ceilingOnly = await carol.api('PATCH', `/api/keys/${key.id}`, { max_cost_per_request_usd: '0.02' });
    expect(ceilingOnly.json()).toMatchObject({ key: { monthly_cap_micro_usd: 5_000_000, lifetime_cap_micro_usd: 20_000_000, max_cost_per_request_micro_usd: 20_000, rate_limits: { requests_per_minute: 30, concurrent_requests: 3 } } });
    expect(await enforced()).toEqual({ lifetimeCap: 20_000_000, monthlyCap: 5_000_000, maxCostPerRequest: 20_000, rateLimits: { requestsPerMinute: 30, concurrentRequests: 3 } });
    // A cap alone, then a limit alone: the ceiling stays.
    expect((await carol.api('PATCH', `/api/keys/${key.id}`, { monthly_cap_usd: '6' })).json()).toMatchObject({ key: { monthly_cap_micro_usd: 6_000_000, max_cost_per_request_micro_usd: 20_000 } });
    expect((await carol.api('PATCH', `/api/keys/${key.id}`, { concurrent_requests: null })).json()).toMatchObject({ key: { max_cost_per_request_micro_usd: 20_000, rate_limits: { requests_per_minute: 30, concurrent_requests: null } } });
    expect(await enforced()).toEqual({ lifetimeCap: 20_000_000, monthlyCap: 6_000_000, maxCostPerRequest: 20_000, rateLimits: { requestsPerMinute: 30 } });
    // The edit page's forms: caps and rate limits keep the ceiling, the ceiling's form keeps both.
    expect((await carol.req('POST', `/keys/${key.id}/caps`, { monthly_cap_usd: '', lifetime_cap_usd: '4', csrf: carol.csrf }, { form: true })).status).toBe(302);
    expect((await carol.req('POST', `/keys/${key.id}/rate-limits`, { requests_per_minute: '45', tokens_per_minute: '', concurrent_requests: '', csrf: carol.csrf }, { form: true })).status).toBe(302);
    expect(await enforced()).toEqual({ lifetimeCap: 4_000_000, monthlyCap: undefined, maxCostPerRequest: 20_000, rateLimits: { requestsPerMinute: 45 } });
    expect((await carol.req('POST', `/keys/${key.id}/max-cost`, { max_cost_per_request_usd: '', csrf: carol.csrf }, { form: true })).status).toBe(302);
    expect(await enforced()).toEqual({ lifetimeCap: 4_000_000, monthlyCap: undefined, maxCostPerRequest: undefined, rateLimits: { requestsPerMinute: 45 } });
  });
});

describe('two-factor sign-in that can be turned off and recovered (issue 37, item 5)', () => {
  let own: { url: string; close(): Promise<void> };
  let service: DashboardService;
  const logged: string[] = [];
  const url = (): string => own.url;
  const PASSWORD = 'the holder password';

  beforeAll(async () => {
    const wide = (): AttemptThrottle => new AttemptThrottle({ perAccount: 50, perAddress: 1000, windowMs: 60_000 });
    service = new DashboardService({
      db: tdb.db,
      accounts,
      signUp: false,
      sessionTtlMs: 3_600_000,
      throttles: { signIn: wide(), resetSubmit: wide(), resetRequest: wide() },
      log: (line) => logged.push(line),
    });
    own = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
  });
  afterAll(async () => {
    await own?.close();
  });

  /** A holder signed in with the password only (TOTP off). */
  async function holder(email: string, role: 'holder' | 'admin' = 'holder'): Promise<Browser> {
    const account = await harness.backend.accounts.createAccount(email);
    await service.provisioning.upsertUser(email, PASSWORD, account.id, role);
    return signIn(email);
  }
  async function signIn(email: string, code?: string): Promise<Browser> {
    const b = new Browser(url);
    const r = await b.req('POST', '/api/sign-in', { email, password: PASSWORD, ...(code === undefined ? {} : { code }) });
    expect(r.status, r.text).toBe(200);
    b.csrf = (r.json() as { csrf_token: string }).csrf_token;
    return b;
  }
  /** Turns TOTP on through the Security page with a code of step `at`; the secret and the recovery codes shown. */
  async function enrol(b: Browser, at: number): Promise<{ secret: string; codes: string[] }> {
    const page = await b.req('GET', '/account/two-factor');
    const secret = /<code id="totp-secret"[^>]*>([A-Z2-7]{32})<\/code>/.exec(page.text)?.[1] ?? '';
    const r = await b.req('POST', '/account/two-factor', { csrf: b.csrf, secret, code: totpCode(secret, at), password: PASSWORD }, { form: true });
    expect(r.status).toBe(200);
    return { secret, codes: [...r.text.matchAll(/<li><code>([a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4})<\/code><\/li>/g)].map((m) => m[1] ?? '') };
  }
  const totpOf = async (email: string) => (await tdb.db.query<{ totp_secret: string | null }>('SELECT totp_secret FROM dashboard_users WHERE email = $1', [email])).rows[0]?.totp_secret ?? null;

  it('enrolling needs the password: a session alone can neither enrol a secret of its own nor end the owner\'s other sessions', async () => {
    const owner = await holder('enrol-owner@example.com');
    const stolen = await signIn('enrol-owner@example.com');
    const page = await stolen.req('GET', '/account/two-factor');
    expect(page.text).toContain('name="password"');
    const secret = /<code id="totp-secret"[^>]*>([A-Z2-7]{32})<\/code>/.exec(page.text)?.[1] ?? '';
    for (const password of [undefined, '', 'a guessed password']) {
      const r = await stolen.req('POST', '/account/two-factor', { csrf: stolen.csrf, secret, code: totpCode(secret), ...(password === undefined ? {} : { password }) }, { form: true });
      expect(r.status).toBe(403);
      expect(r.text).toContain('Wrong password');
      // The refused form keeps the secret the holder may have added to the app already.
      expect(r.text).toContain(secret);
    }
    expect(await totpOf('enrol-owner@example.com')).toBeNull();
    expect((await owner.req('GET', '/api/session')).status).toBe(200);
  });

  it('ten recovery codes are shown once at enrolment, kept as SHA-256 digests, and each signs in once in place of a code; new ones replace the old', async () => {
    const email = 'recovery@example.com';
    const b = await holder(email);
    const now = await freshStep();
    const { secret, codes } = await enrol(b, now - 30_000);
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    // At rest only digests: SHA-256 of the code without its dashes, never the code.
    const userId = (await tdb.db.query<{ id: string }>('SELECT id FROM dashboard_users WHERE email = $1', [email])).rows[0]?.id ?? '';
    const stored = (await tdb.db.query<{ code_hash: string }>('SELECT code_hash FROM totp_recovery_codes WHERE user_id = $1', [userId])).rows.map((r) => r.code_hash);
    expect(stored.sort()).toEqual(codes.map((c) => createHash('sha256').update(c.replace(/-/g, '')).digest('hex')).sort());
    expect(JSON.stringify(await tdb.db.query('SELECT * FROM totp_recovery_codes WHERE user_id = $1', [userId]))).not.toContain(codes[0]?.replace(/-/g, '') ?? 'x');
    // Not shown again.
    const security = await b.req('GET', '/account/two-factor');
    expect(security.text).toContain('10 of 10');
    for (const c of codes) expect(security.text).not.toContain(c);
    // A recovery code signs in (any case, dashes or not, spaces around), once.
    const first = codes[0] ?? '';
    const signedIn = await new Browser(url).req('POST', '/api/sign-in', { email, password: PASSWORD, code: ` ${first.toUpperCase().replace(/-/g, '')} ` });
    expect(signedIn.status).toBe(200);
    expect((signedIn.json() as { second_factor: boolean }).second_factor).toBe(true);
    const again = await new Browser(url).req('POST', '/api/sign-in', { email, password: PASSWORD, code: first });
    expect(again.status).toBe(401);
    expect(again.text).toMatch(/already used/);
    // The sign-in form takes it in the same field as a code.
    const form = await new Browser(url).req('POST', '/sign-in', { email, password: PASSWORD, code: codes[1] ?? '' }, { form: true });
    expect(form.status).toBe(302);
    expect((await b.req('GET', '/account/two-factor')).text).toContain('8 of 10');
    // New codes need the password and a current code; the old ones stop working.
    expect((await b.req('POST', '/account/two-factor/recovery-codes', { csrf: b.csrf, code: totpCode(secret, now), password: 'wrong password!' }, { form: true })).status).toBe(403);
    expect((await b.req('POST', '/account/two-factor/recovery-codes', { csrf: b.csrf, code: '000000', password: PASSWORD }, { form: true })).status).toBe(403);
    const fresh = await b.req('POST', '/account/two-factor/recovery-codes', { csrf: b.csrf, code: totpCode(secret, now), password: PASSWORD }, { form: true });
    expect(fresh.status).toBe(200);
    const newCodes = [...fresh.text.matchAll(/<li><code>([a-z2-7-]{19})<\/code><\/li>/g)].map((m) => m[1] ?? '');
    expect(newCodes).toHaveLength(10);
    expect((await new Browser(url).req('POST', '/api/sign-in', { email, password: PASSWORD, code: codes[2] ?? '' })).status).toBe(401);
    expect((await new Browser(url).req('POST', '/api/sign-in', { email, password: PASSWORD, code: newCodes[0] ?? '' })).status).toBe(200);
    // The TOTP code still works too (its step after the last one used).
    expect((await new Browser(url).req('POST', '/api/sign-in', { email, password: PASSWORD, code: totpCode(secret, now + 30_000) })).status).toBe(200);
  });

  it('turning two-factor sign-in off needs the password and a current code or a recovery code; then sign-in asks for the password only', async () => {
    const email = 'turn-off@example.com';
    const b = await holder(email);
    const now = await freshStep();
    const { codes } = await enrol(b, now);
    const off = (body: Record<string, string>) => b.req('POST', '/account/two-factor/off', { csrf: b.csrf, ...body }, { form: true });
    expect((await off({ password: PASSWORD })).status).toBe(400);
    expect((await off({ password: PASSWORD, code: '123456' })).status).toBe(403);
    expect((await off({ password: 'not my password', code: codes[0] ?? '' })).status).toBe(403);
    expect(await totpOf(email)).not.toBeNull();
    // The wrong password used nothing up: the recovery code still works.
    const done = await off({ password: PASSWORD, code: codes[0] ?? '' });
    expect(done.status).toBe(303);
    expect(done.res.headers.get('location')).toBe('/account/two-factor?done=off');
    expect((await b.req('GET', '/account/two-factor?done=off')).text).toContain('Two-factor sign-in is off');
    expect(await totpOf(email)).toBeNull();
    expect((await tdb.db.query('SELECT 1 FROM totp_recovery_codes tc JOIN dashboard_users u ON u.id = tc.user_id WHERE u.email = $1', [email])).rows).toEqual([]);
    const plain = await new Browser(url).req('POST', '/api/sign-in', { email, password: PASSWORD });
    expect(plain.status).toBe(200);
    expect((plain.json() as { second_factor: boolean }).second_factor).toBe(false);
  });

  it('a password reset of a user with two-factor sign-in needs a code or a recovery code; refused, the link still works', async () => {
    const email = 'reset-totp@example.com';
    const b = await holder(email);
    const now = await freshStep();
    const { codes } = await enrol(b, now);
    const anon = new Browser(url);
    expect((await anon.req('POST', '/api/password-reset', { email })).status).toBe(202);
    const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'Reset%' ORDER BY id DESC LIMIT 1", [email]);
    const token = /password-reset\/([A-Za-z0-9_-]{20,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? '';
    // The page asks for the second factor, and says what to do when both are lost.
    const page = await anon.req('GET', `/password-reset/${token}`);
    expect(page.text).toContain('Authenticator code or a recovery code');
    expect(page.text).toContain('Ask the operator');
    for (const code of [undefined, '999999', 'abcd-efgh-ijkl-mnop']) {
      const r = await anon.req('POST', `/password-reset/${token}`, { password: 'a brand new password', ...(code === undefined ? {} : { code }) }, { form: true });
      expect(r.status).toBe(400);
      expect(r.text).toContain(`turn two-factor sign-in off for ${email}`);
    }
    expect((await anon.req('POST', `/api/password-reset/${token}`, { password: 'a brand new password' })).status).toBe(400);
    // The old password still works: nothing changed.
    expect((await new Browser(url).req('POST', '/api/sign-in', { email, password: PASSWORD, code: codes[1] ?? '' })).status).toBe(200);
    expect((await anon.req('POST', `/api/password-reset/${token}`, { password: 'a brand new password', code: codes[0] ?? '' })).status).toBe(204);
    expect((await new Browser(url).req('POST', '/api/sign-in', { email, password: 'a brand new password', code: codes[2] ?? '' })).status).toBe(200);
    // Two-factor sign-in stays on across the reset.
    expect(await totpOf(email)).not.toBeNull();
  });

  it('the deployment admin turns a locked-out user\'s two-factor sign-in off from the account page: logged as totp_cleared with the admin id, the user mailed and signed out; a holder cannot', async () => {
    const email = 'locked-out@example.com';
    const b = await holder(email);
    await enrol(b, await freshStep());
    const accountId = ((await b.req('GET', '/api/session')).json() as { user: { account_id: string } }).user.account_id;
    const userId = (await tdb.db.query<{ id: string }>('SELECT id FROM dashboard_users WHERE email = $1', [email])).rows[0]?.id ?? '';
    // A holder (even of that account) cannot.
    expect((await b.req('POST', `/admin/accounts/${accountId}/users/${userId}/clear-two-factor`, { csrf: b.csrf }, { form: true })).status).toBe(403);
    expect((await b.api('POST', `/api/admin/accounts/${accountId}/users/${userId}/clear-two-factor`)).status).toBe(403);
    const root = await holder('clearing-admin@example.com', 'admin');
    const adminId = (await tdb.db.query<{ id: string }>("SELECT id FROM dashboard_users WHERE email = 'clearing-admin@example.com'")).rows[0]?.id ?? '';
    const page = await root.req('GET', `/admin/accounts/${accountId}`);
    expect(page.text).toContain(email);
    expect(page.text).toContain(`action="/admin/accounts/${accountId}/users/${userId}/clear-two-factor"`);
    // Only a user of the account named.
    expect((await root.req('POST', `/admin/accounts/${accountId}/users/usr_nope/clear-two-factor`, { csrf: root.csrf }, { form: true })).status).toBe(404);
    const cleared = await root.req('POST', `/admin/accounts/${accountId}/users/${userId}/clear-two-factor`, { csrf: root.csrf }, { form: true });
    expect(cleared.status).toBe(303);
    expect((await root.req('GET', cleared.res.headers.get('location') ?? '')).text).toContain('Two-factor sign-in is off for that user');
    expect(await totpOf(email)).toBeNull();
    expect(logged.map((l) => JSON.parse(l) as Record<string, unknown>)).toContainEqual({ level: 'info', event: 'totp_cleared', user_id: userId, admin_id: adminId });
    expect((await b.req('GET', '/api/session')).status).toBe(401);
    const mails = await tdb.db.query<{ subject: string }>('SELECT subject FROM email_outbox WHERE recipient = $1', [email]);
    expect(mails.rows.map((m) => m.subject)).toContain('Two-factor sign-in was turned off for your Tollgate account');
    // The password alone signs in now; clearing again changes nothing (and logs nothing more).
    await signIn(email);
    const count = logged.length;
    expect((await root.api('POST', `/api/admin/accounts/${accountId}/users/${userId}/clear-two-factor`)).json()).toEqual({ cleared: false });
    expect(logged).toHaveLength(count);
  });
});

describe('a cost ceiling per request in the dashboard (issue 39, item 4)', () => {
  const erin = new Browser(base);
  const frank = new Browser(base);
  type KeyJson = { id: string; max_cost_per_request_micro_usd: number | null; monthly_cap_micro_usd: number | null };

  beforeAll(async () => {
    await erin.signUpConfirmed(tdb.db, 'erin@example.com');
    await frank.signUpConfirmed(tdb.db, 'frank@example.com');
  });

  it("sets a key's max cost per request on its create and edit pages and the JSON API; the gateway serves within it", async () => {
    const made = await erin.req('POST', '/keys', { name: 'agent key', max_cost_per_request_usd: '0.0005', csrf: erin.csrf }, { form: true });
    expect(made.status).toBe(303);
    const shown = await erin.req('GET', '/keys', undefined, { reveal: true });
    const secret = /<code id="new-key"[^>]*>([^<]+)<\/code>/.exec(shown.text)?.[1] ?? '';
    secrets.push(secret);
    const keyId = ((await erin.api('GET', '/api/keys')).json() as { keys: KeyJson[] }).keys[0]?.id ?? '';
    const keyOf = async (): Promise<KeyJson> => ((await erin.api('GET', `/api/keys/${keyId}`)).json() as { key: KeyJson }).key;
    expect((await keyOf()).max_cost_per_request_micro_usd).toBe(500);

    // The gateway lowers the output limit to fit it.
    const session = (await erin.api('GET', '/api/session')).json() as { user: { account_id: string } };
    await harness.backend.ledger.credit(session.user.account_id, 10_000_000, `dash-ceiling-${session.user.account_id}`);
    const client = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const { response } = await client.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2_000 }).withResponse();
    expect(Number(response.headers.get('x-tollgate-max-tokens'))).toBeLessThan(2_000);

    // The edit page shows it in its own form, which sets it.
    const edit = await erin.req('GET', `/keys/${keyId}/edit`);
    expect(edit.text).toContain(`action="/keys/${keyId}/max-cost"`);
    expect(edit.text).toMatch(/name="max_cost_per_request_usd"[^>]*value="0.000500"/);
    const set = await erin.req('POST', `/keys/${keyId}/max-cost`, { max_cost_per_request_usd: '0.0003', csrf: erin.csrf }, { form: true });
    expect(set.status).toBe(302);
    expect((await keyOf()).max_cost_per_request_micro_usd).toBe(300);
    const invalid = await erin.req('POST', `/keys/${keyId}/max-cost`, { max_cost_per_request_usd: '0.1234567', csrf: erin.csrf }, { form: true });
    expect(invalid.status).toBe(400);
    expect(invalid.text).toContain('max_cost_per_request_usd must be an amount in USD like 12.50 (at most 6 decimals)');
    expect((await keyOf()).max_cost_per_request_micro_usd).toBe(300);

    // PATCH sets it when named, keeps it when not, and clears it with null.
    const patched = await erin.api('PATCH', `/api/keys/${keyId}`, { max_cost_per_request_usd: '0.002' });
    expect((patched.json() as { key: KeyJson }).key.max_cost_per_request_micro_usd).toBe(2_000);
    const capsOnly = await erin.api('PATCH', `/api/keys/${keyId}`, { monthly_cap_usd: '1' });
    expect((capsOnly.json() as { key: KeyJson }).key).toMatchObject({ monthly_cap_micro_usd: 1_000_000, max_cost_per_request_micro_usd: 2_000 });
    // A refused PATCH changes nothing, caps included.
    expect((await erin.api('PATCH', `/api/keys/${keyId}`, { monthly_cap_usd: '2', max_cost_per_request_usd: '-1' })).status).toBe(400);
    expect(await keyOf()).toMatchObject({ monthly_cap_micro_usd: 1_000_000, max_cost_per_request_micro_usd: 2_000 });
    const cleared = await erin.api('PATCH', `/api/keys/${keyId}`, { max_cost_per_request_usd: null });
    expect((cleared.json() as { key: KeyJson }).key.max_cost_per_request_micro_usd).toBeNull();

    const viaApi = await erin.api('POST', '/api/keys', { name: 'api key', max_cost_per_request_usd: '0.01' });
    expect(viaApi.status).toBe(201);
    const created = viaApi.json() as { key: KeyJson; secret: string };
    secrets.push(created.secret);
    expect(created.key.max_cost_per_request_micro_usd).toBe(10_000);

    // Another holder cannot touch it.
    expect((await frank.req('POST', `/keys/${keyId}/max-cost`, { max_cost_per_request_usd: '5', csrf: frank.csrf }, { form: true })).status).toBe(404);
    expect((await frank.api('PATCH', `/api/keys/${keyId}`, { max_cost_per_request_usd: '5' })).status).toBe(404);
    expect((await keyOf()).max_cost_per_request_micro_usd).toBeNull();
  });
});
