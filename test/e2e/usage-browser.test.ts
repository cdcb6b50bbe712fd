// Who spent what, in a real browser (Debian's chromium driven by playwright-core): an organization with
// two members in two teams, whose keys are used through the gateway with the openai SDK. The owner
// signs in, switches to the organization and, on the Usage page, asks for the spend per member: a
// stacked chart of each day's spend (a coloured segment per member) and a table of each member's
// requests, tokens and cost; then per team, and from a team's row to its requests. A member sees only
// their own usage: no member filter, and another member's usage asked for by address bar is refused on
// the page. The page fits a 390 px phone. Photographs the Usage page grouped per member and per team
// (files rewritten only with TOLLGATE_SCREENSHOTS=1).
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccountService } from '../../src/account-service/account-service.js';
import { formatUsd } from '../../src/billing/money.js';
import { browserMissing, launchChromium } from '../helpers/browser.js';
import { Screenshots } from '../helpers/screenshots.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import type { Harness } from '../helpers/gateway-harness.js';
import { startGatewayDashboard, type GatewayDashboard } from '../helpers/gateway-dashboard.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { until } from './e2e-support.js';

const tdb = useTestDatabase('usageb');
const PASSWORD = 'correct horse battery';
const MODEL = 'outlaw-1-xploded';

describe.skipIf(browserMissing)('usage per member and per team in a browser', () => {
  let harness: Harness;
  let accounts: AccountService;
  let dash: { url: string; close(): Promise<void> };
  let world: GatewayDashboard | undefined;
  let browser: Browser;
  const shots = new Screenshots();

  beforeAll(async () => {
    world = await startGatewayDashboard(tdb.db, { wideThrottles: true });
    ({ harness, accounts, dash } = world);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    shots.save();
    await browser?.close();
    await world?.close();
  });

  /** Acme: an owner, alice (team search) and bob (team ads), each member with a key in their team, and money. */
  async function acme() {
    const owner = new DashboardClient(() => dash.url);
    await owner.signUpConfirmed(tdb.db, 'acme-owner@example.com', PASSWORD);
    const accountId = ((await owner.api('POST', '/api/organizations', { name: 'Acme' })).json() as { account: { id: string } }).account.id;
    await accounts.credit(accountId, 5_000_000, `seed-${accountId}`);
    const join = async (who: string): Promise<{ c: DashboardClient; id: string; email: string }> => {
      const email = `acme-${who}@example.com`;
      expect((await owner.api('POST', '/api/invitations', { email, role: 'member' })).status).toBe(201);
      const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", [email]);
      const c = new DashboardClient(() => dash.url);
      const r = await c.req('POST', '/api/sign-up', { email, password: PASSWORD, invitation: /\/invitations\/([A-Za-z0-9_-]{40,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? '' });
      expect(r.status).toBe(201);
      c.csrf = (r.json() as { csrf_token: string }).csrf_token;
      return { c, id: ((await c.api('GET', '/api/session')).json() as { user: { id: string } }).user.id, email };
    };
    const alice = await join('alice');
    const bob = await join('bob');
    const team = async (name: string, memberId: string): Promise<string> => {
      const id = ((await owner.api('POST', '/api/teams', { name })).json() as { team: { id: string } }).team.id;
      expect((await owner.api('PUT', `/api/teams/${id}/members/${memberId}`)).status).toBe(200);
      return id;
    };
    return { owner, alice, bob, search: await team('search', alice.id), ads: await team('ads', bob.id) };
  }

  /** `n` requests with a new key of the member's in the team, through the openai SDK; what they cost, once recorded. */
  async function spend(member: DashboardClient, teamId: string, n: number, reader: DashboardClient): Promise<{ cost: number; ids: string[] }> {
    const secret = ((await member.api('POST', '/api/keys', { name: 'work', team_id: teamId })).json() as { secret: string }).secret;
    const openai = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    let cost = 0;
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `Hello number ${i}` }], max_tokens: 10 }).withResponse();
      const id = res.response.headers.get('x-request-id') ?? '';
      ids.push(id);
      cost += await until('the request in the record', async () => ((await reader.api('GET', `/api/usage?request_id=${id}`)).json() as { usage: Array<{ cost_micro_usd: number }> }).usage[0]?.cost_micro_usd);
    }
    return { cost, ids };
  }

  async function signInTo(page: Page, email: string, organization: string): Promise<void> {
    await page.goto(`${dash.url}/sign-in`);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForLoadState();
    const current = await page.locator('#account-switch option[selected]').textContent();
    if (!(current ?? '').startsWith(organization)) {
      // The switcher submits itself when an account is chosen.
      await page.locator('#account-switch').selectOption({ label: (await page.locator('#account-switch option', { hasText: organization }).textContent()) ?? '' });
      await expect.poll(async () => page.locator('#account-switch option[selected]').textContent(), { timeout: 10_000 }).toMatch(new RegExp(`^${organization}`));
    }
  }

  const usd = (micros: number): string => `$${formatUsd(micros)}`;

  it('the owner sees the spend per member and per team (the chart and the table); a member sees only their own and cannot ask for another\'s', async () => {
    const { owner, alice, bob, search, ads } = await acme();
    const aliceSpent = await spend(alice.c, search, 3, owner);
    const bobSpent = await spend(bob.c, ads, 1, owner);
    expect(aliceSpent.cost).toBeGreaterThan(0);
    expect(bobSpent.cost).toBeGreaterThan(0);

    const ownerContext = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const page = await ownerContext.newPage();
    await signInTo(page, 'acme-owner@example.com', 'Acme');
    await page.getByRole('link', { name: 'Usage' }).click();
    // The owner may narrow to any member.
    expect(await page.locator('select[name=member] option').allTextContents()).toEqual(['All members', 'acme-alice@example.com', 'acme-bob@example.com', 'acme-owner@example.com']);
    await page.getByLabel('Spend per').selectOption('member');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL(/group=member/);

    // The chart: a segment per member on today's bar, titled with who and how much; the legend names both.
    const chart = page.locator('#spend-by-member');
    await chart.waitFor();
    const today = new Date().toISOString().slice(0, 10);
    const titles = await chart.locator('svg rect title').allTextContents();
    expect(titles.filter((t) => t.startsWith(today)).sort()).toEqual([`${today} · ${alice.email}: $`, `${today} · ${bob.email}: $`].map((t) => expect.stringContaining(t)));
    const [aliceBar, bobBar] = await Promise.all([alice.id, bob.id].map(async (id) => Number(await chart.locator(`rect[data-group="${id}"]`).getAttribute('height'))));
    // Heights follow the spend: alice's three requests stand taller than bob's one.
    expect(aliceBar).toBeGreaterThan(bobBar ?? 0);
    expect(await chart.locator('.legend').textContent()).toMatch(new RegExp(`${alice.email}.*${bob.email}`));
    // The table: each member's requests and cost, largest first, and the total.
    const rows = page.locator('#usage-groups tbody tr');
    expect(await rows.count()).toBe(3);
    expect(await rows.nth(0).textContent()).toContain(alice.email);
    expect(await rows.nth(0).locator('td[data-label="Requests"]').textContent()).toBe('3');
    expect(await rows.nth(0).locator('td[data-label="Cost"]').textContent()).toBe(usd(aliceSpent.cost));
    expect(await rows.nth(1).textContent()).toContain(bob.email);
    expect(await rows.nth(1).locator('td[data-label="Cost"]').textContent()).toBe(usd(bobSpent.cost));
    expect(await rows.nth(2).locator('td[data-label="Cost"]').textContent()).toBe(usd(aliceSpent.cost + bobSpent.cost));
    await shots.narrow(page, 'usage-by-member');

    // Per team, then one team's requests from its row.
    await page.getByRole('link', { name: 'team', exact: true }).click();
    await page.locator('#spend-by-team').waitFor();
    const teamRows = page.locator('#usage-groups tbody tr');
    expect((await teamRows.locator('td:first-child').allTextContents()).map((t) => t.trim())).toEqual(['search', 'ads', 'Total']);
    expect(await teamRows.nth(1).locator('td[data-label="Cost"]').textContent()).toBe(usd(bobSpent.cost));
    expect(await page.locator('#spend-by-team rect[data-group="' + ads + '"]').count()).toBe(1);
    await shots.narrow(page, 'usage-by-team');
    await teamRows.nth(1).getByRole('link', { name: 'ads' }).click();
    await page.waitForURL(new RegExp(`team=${ads}`));
    const listed = await page.locator('code.rid').allTextContents();
    expect(listed).toEqual(bobSpent.ids);
    await ownerContext.close();

    // Bob: his own usage only, no member filter; alice's asked for by the address bar is refused on the page.
    const bobContext = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const bobPage = await bobContext.newPage();
    await signInTo(bobPage, bob.email, 'Acme');
    await bobPage.goto(`${dash.url}/usage?group=member`);
    expect(await bobPage.locator('select[name=member]').count()).toBe(0);
    expect((await bobPage.locator('code.rid').allTextContents()).sort()).toEqual([...bobSpent.ids].sort());
    expect((await bobPage.locator('#usage-groups tbody tr td:first-child').allTextContents()).map((t) => t.trim())).toEqual([bob.email, 'Total']);
    expect(await bobPage.locator('#spend-by-member').textContent()).not.toContain(alice.email);
    const refused = await bobPage.goto(`${dash.url}/usage?member=${alice.id}&group=member`);
    expect(refused?.status()).toBe(403);
    expect(await bobPage.getByRole('alert').textContent()).toContain('You can see only the usage of your own keys');
    const body = (await bobPage.locator('main').textContent()) ?? '';
    expect(body).not.toContain(alice.email);
    for (const id of aliceSpent.ids) expect(body).not.toContain(id);
    await bobContext.close();
  }, 120_000);
});
