// Single sign-on in a real browser (Debian's chromium driven by playwright-core) against a real OpenID
// provider (the oidc-provider package, test/helpers/oidc-issuer.ts) on loopback: the dashboard's own
// "Sign in with" link, the provider's login form, the callback, the session. People of acme.test join
// the organization Acme as members, the tollgate-admins group as admins; the contractors group joins
// Contractors; passwords are refused for both domains (SSO only).
//
// The attack cases: the ID token the provider's token endpoint returns is rewritten on its way out by
// a post-middleware on that same provider (another audience, an expiry in the past, both re-signed with
// the provider's own key; or signed by a key it never published): the dashboard must refuse each. The
// state: a callback replayed, one with a state never issued, and one opened in another browser. The
// key rotation: the provider starts signing with a new key (a new kid first in its JWKS) seconds after
// the dashboard last read the JWKS.
import type { Browser, BrowserContext, Page, Response } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import type { SignInEvent } from '../../src/dashboard/sign-in-events.js';
import { readSsoConfig, type SsoConfig } from '../../src/dashboard/sso-config.js';
import { browserMissing, launchChromium } from '../helpers/browser.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { startTestIssuer, type TestIssuer } from '../helpers/oidc-issuer.js';
import { freePort } from '../helpers/redis-server.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('ssob');
const PROVIDER = 'Acme Login';
const REFUSED = `Sign-in through ${PROVIDER} did not work`;

describe.skipIf(browserMissing)('single sign-on in a browser against a real OpenID provider', () => {
  let harness: Harness;
  let issuer: TestIssuer;
  let dash: { url: string; close(): Promise<void> };
  let browser: Browser;
  let sso: SsoConfig;
  const events: SignInEvent[] = [];
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    harness = await startHarness({ record: tdb.db });
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    issuer = await startTestIssuer({ redirectUri: `${url}/sso/callback` });
    const config = readSsoConfig(
      {
        DASHBOARD_SSO_ISSUER: issuer.issuer,
        DASHBOARD_SSO_CLIENT_ID: issuer.clientId,
        DASHBOARD_SSO_CLIENT_SECRET: issuer.clientSecret,
        DASHBOARD_SSO_NAME: PROVIDER,
        DASHBOARD_SSO_DOMAINS: 'acme.test, partner.test',
        DASHBOARD_SSO_ONLY: 'true',
        DASHBOARD_SSO_SCOPES: 'openid email profile groups',
        DASHBOARD_SSO_MAPPINGS: JSON.stringify([
          { domain: 'acme.test', organization: 'Acme', role: 'member' },
          { group: 'tollgate-admins', organization: 'Acme', role: 'admin' },
          { group: 'contractors', organization: 'Contractors', role: 'member' },
        ]),
      },
      url,
    );
    if (config === undefined) throw new Error('SSO settings not read');
    sso = config;
    const accounts = new AccountService({ accounts: harness.backend.accounts, ledger: harness.backend.ledger, onRevoke: () => harness.gateway.authenticator.forget() });
    const service = new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 7 * 24 * 3_600_000, sso: { config: sso, secureCookie: false }, signInEvents: (e) => events.push(e) });
    dash = await startDashboard({ service, secureCookie: false }, port, '127.0.0.1');
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
    await dash?.close();
    await issuer?.close();
    await harness?.close();
  });

  async function freshPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    contexts.push(context);
    return context.newPage();
  }

  /**
   * From the dashboard's sign-in page through the provider's login form as `login`, back to the
   * dashboard; the callback's response (its status, its URL).
   */
  async function signInThroughProvider(page: Page, login: string): Promise<Response> {
    await page.goto(`${dash.url}/sign-in`);
    await page.getByRole('link', { name: `Sign in with ${PROVIDER}` }).click();
    await page.waitForURL((u) => u.origin === issuer.issuer);
    await page.locator('input[name=login]').fill(login);
    await page.locator('input[name=password]').fill('any password');
    const callback = page.waitForResponse((r) => r.url().startsWith(`${dash.url}/sso/callback`));
    await page.getByRole('button', { name: 'Sign-in' }).click();
    const response = await callback;
    await page.waitForLoadState('load');
    return response;
  }

  const actingAs = async (page: Page): Promise<string | null> => page.locator('#account-switch option:checked').textContent();
  const sessionCookie = async (page: Page): Promise<string | undefined> => (await page.context().cookies(dash.url)).find((c) => c.name === 'tg_session')?.value;
  const lastEvent = (): SignInEvent | undefined => events[events.length - 1];
  // The audit log's newest sign-in entry (the record, not the log line).
  interface SignInEntry { action: string; actor_kind: string; actor_id: string | null; account_id: string | null; after: Record<string, string> | null }
  const lastSignInEntry = async (): Promise<SignInEntry | undefined> =>
    (await tdb.db.query<SignInEntry>("SELECT action, actor_kind, actor_id, account_id, after FROM audit_log WHERE action LIKE 'sign_in.%' ORDER BY seq DESC LIMIT 1")).rows[0];

  it('the first sign-in makes the user and lands in the mapped organization with the mapped role, in a session of the SSO life', async () => {
    issuer.people.set('ada', { email: 'Ada@acme.test', groups: [] });
    const page = await freshPage();
    const response = await signInThroughProvider(page, 'ada');
    expect(response.status()).toBe(302);
    expect(new URL(page.url()).pathname).toBe('/keys');
    expect(await actingAs(page)).toBe('Acme · member');
    expect(await page.locator('header .who').textContent()).toBe('ada@acme.test');
    // Linked by the provider's issuer and subject; the address counts as confirmed; no usable password.
    const linked = await tdb.db.query<{ email: string; confirmed: boolean }>(
      'SELECT u.email, u.email_verified_at IS NOT NULL AS confirmed FROM sso_identities i JOIN dashboard_users u ON u.id = i.user_id WHERE i.issuer = $1 AND i.subject = $2',
      [issuer.issuer, 'ada'],
    );
    expect(linked.rows).toEqual([{ email: 'ada@acme.test', confirmed: true }]);
    // The session lives the SSO life (8 h by default), in the record and in the cookie.
    const session = await tdb.db.query<{ method: string; hours: number }>("SELECT s.method, extract(epoch FROM s.expires_at - s.created_at) / 3600 AS hours FROM dashboard_sessions s JOIN dashboard_users u ON u.id = s.user_id WHERE u.email = 'ada@acme.test'");
    expect(session.rows.map((r) => [r.method, Math.round(Number(r.hours))])).toEqual([['sso', 8]]);
    const cookie = (await page.context().cookies(dash.url)).find((c) => c.name === 'tg_session');
    expect((cookie?.expires ?? 0) - Date.now() / 1000).toBeGreaterThan(7.9 * 3600);
    expect((cookie?.expires ?? 0) - Date.now() / 1000).toBeLessThan(8.1 * 3600);
    // The dashboard can act: a key in the organization.
    await page.getByLabel('Name').fill('ada key');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    expect((await page.locator('#new-key').textContent()) ?? '').toMatch(/^sk-tg-/);
    expect(lastEvent()).toMatchObject({ outcome: 'success', method: 'sso', email: 'ada@acme.test', sso: { issuer: issuer.issuer, subject: 'ada' } });
    // On the audit log: the sign-in, in the organization, by the user; the admission by the provider's subject.
    const acme = (await tdb.db.query<{ account_id: string }>("SELECT account_id FROM sso_organizations WHERE name = 'Acme'")).rows[0]?.account_id;
    const ada = (await tdb.db.query<{ id: string }>("SELECT id FROM dashboard_users WHERE email = 'ada@acme.test'")).rows[0]?.id;
    expect(await lastSignInEntry()).toMatchObject({ action: 'sign_in.succeeded', actor_kind: 'user', actor_id: ada, account_id: acme, after: { method: 'sso' } });
    const joined = await tdb.db.query<{ actor_kind: string; actor_id: string }>(
      "SELECT actor_kind, actor_id FROM audit_log WHERE action = 'account_memberships.insert' AND account_id = $1 AND target = $2",
      [acme ?? '', ada ?? ''],
    );
    expect(joined.rows).toEqual([{ actor_kind: 'sso', actor_id: 'ada' }]);
  }, 60_000);

  it('a group mapped to admin gives admin, and a role changed at the provider applies at the next sign-in', async () => {
    issuer.people.set('grace', { email: 'grace@acme.test', groups: ['tollgate-admins'] });
    const grace = await freshPage();
    await signInThroughProvider(grace, 'grace');
    expect(await actingAs(grace)).toBe('Acme · admin');
    await grace.goto(`${dash.url}/members`);
    expect(await grace.getByRole('button', { name: 'Send invitation' }).count()).toBe(1);
    expect(await grace.getByRole('row').filter({ hasText: 'ada@acme.test' }).filter({ hasText: 'member' }).count()).toBe(1);

    // Ada joins the admins' group at the provider: admin from her next sign-in.
    issuer.people.set('ada', { email: 'ada@acme.test', groups: ['tollgate-admins'] });
    const ada = await freshPage();
    await signInThroughProvider(ada, 'ada');
    expect(await actingAs(ada)).toBe('Acme · admin');
    // And back: a member again.
    issuer.people.set('ada', { email: 'ada@acme.test', groups: [] });
    const again = await freshPage();
    await signInThroughProvider(again, 'ada');
    expect(await actingAs(again)).toBe('Acme · member');
  }, 90_000);

  it('a person the provider no longer puts in a mapped group cannot sign in: refused, out of the organization, every session ended', async () => {
    issuer.people.set('cy', { email: 'cy@partner.test', groups: ['contractors'] });
    const first = await freshPage();
    await signInThroughProvider(first, 'cy');
    expect(await actingAs(first)).toBe('Contractors · member');

    issuer.people.set('cy', { email: 'cy@partner.test', groups: [] });
    const second = await freshPage();
    const response = await signInThroughProvider(second, 'cy');
    expect(response.status()).toBe(403);
    expect(await second.getByRole('heading', { name: REFUSED }).count()).toBe(1);
    expect(await second.getByRole('alert').textContent()).toContain('is not given access to Tollgate');
    expect(await sessionCookie(second)).toBeUndefined();
    // The session opened before is over, and the membership is gone.
    await first.goto(`${dash.url}/keys`);
    expect(new URL(first.url()).pathname).toBe('/sign-in');
    const left = await tdb.db.query("SELECT 1 FROM account_memberships m JOIN dashboard_users u ON u.id = m.user_id JOIN sso_organizations s ON s.account_id = m.account_id WHERE u.email = 'cy@partner.test'");
    expect(left.rowCount).toBe(0);
    expect(lastEvent()).toMatchObject({ outcome: 'failure', method: 'sso', email: 'cy@partner.test' });
  }, 90_000);

  for (const [tamper, words] of [
    ['wrong-audience', 'wrong audience'],
    ['expired', 'it has expired'],
    ['forged-signature', 'signature does not verify'],
  ] as const) {
    it(`an ID token with ${tamper.replace('-', ' ')} is refused with a clear page, and no session`, async () => {
      issuer.people.set('ada', { email: 'ada@acme.test', groups: [] });
      issuer.tamper = tamper;
      try {
        const page = await freshPage();
        const response = await signInThroughProvider(page, 'ada');
        expect(response.status()).toBe(401);
        expect(await page.getByRole('heading', { name: REFUSED }).count()).toBe(1);
        expect(await page.getByRole('alert').textContent()).toContain(words);
        expect(await page.getByRole('link', { name: `Sign in with ${PROVIDER} again` }).count()).toBe(1);
        expect(await sessionCookie(page)).toBeUndefined();
        expect(lastEvent()).toMatchObject({ outcome: 'failure', method: 'sso' });
        expect(lastEvent()?.reason).toContain(words);
        const entry = await lastSignInEntry();
        expect(entry).toMatchObject({ action: 'sign_in.failed', after: { method: 'sso', reason: 'sso_refused' } });
        expect(entry?.after?.why).toContain(words);
      } finally {
        issuer.tamper = 'none';
      }
    }, 60_000);
  }

  it('a replayed callback, a state never issued, and a callback brought by a browser that did not start the sign-in are refused', async () => {
    issuer.people.set('ada', { email: 'ada@acme.test', groups: [] });
    const page = await freshPage();
    const done = await signInThroughProvider(page, 'ada');
    expect(done.status()).toBe(302);
    // The same callback again (its code and state), in the same browser.
    const replay = await page.goto(done.url());
    expect(replay?.status()).toBe(400);
    expect(await page.getByRole('alert').textContent()).toContain('used already');
    expect((await lastSignInEntry())?.after?.why).toContain('used already');

    const forged = await page.goto(`${dash.url}/sso/callback?code=made-up&state=${'f'.repeat(43)}`);
    expect(forged?.status()).toBe(400);
    expect(await page.getByRole('heading', { name: REFUSED }).count()).toBe(1);
    expect(await page.getByRole('alert').textContent()).toContain('not started on this Tollgate');
    expect((await lastSignInEntry())?.after?.why).toContain('not started on this Tollgate');

    // A callback brought by a browser that does not hold the binding of the sign-in it names (as when
    // one person's way back is lured into another's browser): the binding cookie is gone once the
    // sign-in has started, and the provider sends the browser back with a valid state and code.
    const lured = await freshPage();
    await lured.goto(`${dash.url}/sign-in`);
    await lured.getByRole('link', { name: `Sign in with ${PROVIDER}` }).click();
    await lured.waitForURL((u) => u.origin === issuer.issuer);
    expect((await lured.context().cookies(`${dash.url}/sso/callback`)).map((c) => c.name)).toContain('tg_sso');
    await lured.context().clearCookies({ name: 'tg_sso' });
    await lured.locator('input[name=login]').fill('ada');
    await lured.locator('input[name=password]').fill('any password');
    const back = lured.waitForResponse((r) => r.url().startsWith(`${dash.url}/sso/callback`));
    await lured.getByRole('button', { name: 'Sign-in' }).click();
    const other = await back;
    const b = lured;
    await b.waitForLoadState('load');
    expect(other?.status()).toBe(400);
    expect(await b.getByRole('alert').textContent()).toContain('started in another browser');
    expect(await lastSignInEntry()).toMatchObject({ action: 'sign_in.failed', after: { method: 'sso', reason: 'sso_refused' } });
    expect((await lastSignInEntry())?.after?.why).toContain('started in another browser');
    expect(await sessionCookie(b)).toBeUndefined();
  }, 90_000);

  it('a sign-in the audit log cannot take is not made (the session just opened is ended), and a refusal it cannot take says so in its log line', async () => {
    issuer.people.set('ada', { email: 'ada@acme.test', groups: [] });
    const entriesBefore = (await tdb.db.query("SELECT 1 FROM audit_log WHERE action LIKE 'sign_in.%'")).rowCount;
    const adaSessions = async (): Promise<number> =>
      (await tdb.db.query("SELECT 1 FROM dashboard_sessions s JOIN dashboard_users u ON u.id = s.user_id WHERE u.email = 'ada@acme.test'")).rowCount;
    const sessionsBefore = await adaSessions();
    await tdb.db.query("CREATE FUNCTION refuse_sign_in_entries() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the audit log refused this entry (test)'; END $$");
    await tdb.db.query("CREATE TRIGGER refuse_sign_in_entries BEFORE INSERT ON audit_log FOR EACH ROW WHEN (NEW.action LIKE 'sign_in.%') EXECUTE FUNCTION refuse_sign_in_entries()");
    try {
      const page = await freshPage();
      const response = await signInThroughProvider(page, 'ada');
      expect(response.status()).toBeGreaterThanOrEqual(500);
      expect(await sessionCookie(page)).toBeUndefined();
      expect(await adaSessions()).toBe(sessionsBefore);
      expect(lastEvent()).toMatchObject({ outcome: 'failure', method: 'sso', auditEntryNotWritten: expect.stringContaining('the audit log refused this entry') });

      const forged = await page.goto(`${dash.url}/sso/callback?code=made-up&state=${'f'.repeat(43)}`);
      expect(forged?.status()).toBe(400);
      expect(await page.getByRole('alert').textContent()).toContain('not started on this Tollgate');
      expect(lastEvent()?.reason).toContain('not started on this Tollgate');
      expect(lastEvent()?.auditEntryNotWritten).toContain('the audit log refused this entry');
      expect((await tdb.db.query("SELECT 1 FROM audit_log WHERE action LIKE 'sign_in.%'")).rowCount).toBe(entriesBefore);
    } finally {
      await tdb.db.query('DROP TRIGGER refuse_sign_in_entries ON audit_log');
      await tdb.db.query('DROP FUNCTION refuse_sign_in_entries()');
    }
    // With the log writable again, the same person signs in.
    const page = await freshPage();
    expect((await signInThroughProvider(page, 'ada')).status()).toBe(302);
    expect(await lastSignInEntry()).toMatchObject({ action: 'sign_in.succeeded', after: { method: 'sso' } });
  }, 90_000);

  it('the provider rotates its signing key (a new kid) seconds after the dashboard read its keys: sign-in still works', async () => {
    issuer.people.set('ada', { email: 'ada@acme.test', groups: [] });
    const before = await freshPage();
    await signInThroughProvider(before, 'ada');
    const oldKid = issuer.lastKid;
    expect(oldKid).toBeDefined();
    issuer.rotate();
    const after = await freshPage();
    const response = await signInThroughProvider(after, 'ada');
    expect(issuer.lastKid).toBe(issuer.signingKid);
    expect(issuer.lastKid).not.toBe(oldKid);
    expect(response.status()).toBe(302);
    expect(await actingAs(after)).toBe('Acme · member');
  }, 60_000);

  it('SSO only: a password sign-in, a sign-up and a password reset for the provider\'s domains are refused with where to sign in', async () => {
    const page = await freshPage();
    const where = `sign in through ${PROVIDER}`;
    await page.goto(`${dash.url}/sign-in`);
    await page.getByLabel('E-mail').fill('ada@acme.test');
    await page.getByLabel('Password').fill('a guessed password');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    expect(await page.getByRole('alert').textContent()).toContain(where);
    expect(await page.getByRole('link', { name: `Sign in with ${PROVIDER}` }).count()).toBe(1);
    expect(await lastSignInEntry()).toMatchObject({ action: 'sign_in.failed', after: { method: 'password', reason: 'sso_only' } });
    // Such attempts are throttled like any password's, before their entry is written: a flood of them
    // adds at most the throttle's five entries to the audit log, and is answered 429 beyond.
    const ssoOnlyEntries = async (): Promise<number> =>
      (await tdb.db.query("SELECT 1 FROM audit_log WHERE action = 'sign_in.failed' AND after->>'reason' = 'sso_only'")).rowCount;
    const before = await ssoOnlyEntries();
    const flood = new DashboardClient(() => dash.url);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i += 1) statuses.push((await flood.req('POST', '/sign-in', { email: 'flood@acme.test', password: 'a guess' }, { form: true })).status);
    expect(statuses).toEqual([403, 403, 403, 403, 403, 429, 429, 429]);
    expect((await ssoOnlyEntries()) - before).toBe(5);

    await page.goto(`${dash.url}/sign-up`);
    await page.getByLabel('E-mail').fill('newcomer@partner.test');
    await page.getByLabel(/Password/).fill('a long enough password');
    await page.getByRole('button', { name: 'Create account' }).click();
    expect(await page.getByRole('alert').textContent()).toContain(where);
    expect((await tdb.db.query("SELECT 1 FROM dashboard_users WHERE email = 'newcomer@partner.test'")).rowCount).toBe(0);

    await page.goto(`${dash.url}/password-reset`);
    await page.getByLabel('E-mail').fill('ada@acme.test');
    await page.getByRole('button', { name: 'Send me a link' }).click();
    expect(await page.getByRole('alert').textContent()).toContain(where);
    expect((await tdb.db.query("SELECT 1 FROM email_outbox WHERE recipient = 'ada@acme.test'")).rowCount).toBe(0);

    // Another domain still signs up with a password.
    await page.goto(`${dash.url}/sign-up`);
    await page.getByLabel('E-mail').fill('someone@example.com');
    await page.getByLabel(/Password/).fill('a long enough password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    expect(events.some((e) => e.method === 'password' && e.outcome === 'failure' && e.email === 'ada@acme.test')).toBe(true);
  }, 60_000);
});
