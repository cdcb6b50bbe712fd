// Teams and budgets in a real browser (Debian's chromium driven by playwright-core): an owner creates an
// organization, invites a member (who joins through the mailed link), creates a team with a monthly
// budget on the Teams page, puts the member in it, and sets the member's monthly budget on the Members
// page; the member creates a key in the team on the Keys page and calls the gateway with the openai SDK:
// refused at their own budget, then (raised) served, then refused at the team's budget, each 402 naming
// the budget in words; the owner sees the spend per member and per team. The pages fit a 390 px phone.
// Photographs the Teams and Members pages (files rewritten only with TOLLGATE_SCREENSHOTS=1).
import OpenAI from 'openai';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccountService } from '../../src/account-service/account-service.js';
import { browserMissing, launchChromium } from '../helpers/browser.js';
import { Screenshots } from '../helpers/screenshots.js';
import { signUpAndConfirm, createOrganization, inviteMember } from '../helpers/dashboard-pages.js';
import type { Harness } from '../helpers/gateway-harness.js';
import { startGatewayDashboard, type GatewayDashboard } from '../helpers/gateway-dashboard.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('teamsb');
const MODEL = 'outlaw-1-xploded';

describe.skipIf(browserMissing)('teams and budgets in a browser', () => {
  let harness: Harness;
  let accounts: AccountService;
  let dash: { url: string; close(): Promise<void> };
  let world: GatewayDashboard | undefined;
  let browser: Browser;
  const shots = new Screenshots();

  beforeAll(async () => {
    world = await startGatewayDashboard(tdb.db, {});
    ({ harness, accounts, dash } = world);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    shots.save();
    await browser?.close();
    await world?.close();
  });

  /** A call through the openai SDK: its answer, or the error it raised. */
  async function ask(openai: OpenAI): Promise<{ served: true } | { served: false; status: number | undefined; message: string }> {
    try {
      await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 10 });
      return { served: true };
    } catch (err) {
      if (!(err instanceof OpenAI.APIError)) throw err;
      return { served: false, status: err.status, message: err.message };
    }
  }

  it('an owner sets a team budget and a member budget; the member, with a key in the team, is refused at each with its words through the openai SDK; the owner sees the spend per member and per team', async () => {
    const ownerContext = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const owner = await ownerContext.newPage();
    await signUpAndConfirm(owner, dash.url, tdb.db, 'acme-owner@example.com', 'an owner password');
    await createOrganization(owner, dash.url, 'Acme');
    const acme = (await tdb.db.query<{ account_id: string }>("SELECT account_id FROM organizations WHERE name = 'Acme'")).rows[0]?.account_id ?? '';
    await accounts.credit(acme, 5_000_000, `seed-${acme}`);
    await inviteMember(owner, dash.url, 'acme-dev@example.com', 'member');

    const memberContext = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const member = await memberContext.newPage();
    const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = 'acme-dev@example.com' AND subject LIKE 'You are invited%'");
    await member.goto(`${dash.url}${/https?:\/\/[^/\s]+(\/invitations\/[A-Za-z0-9_-]{40,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? ''}`);
    await member.locator('#invitation-sign-up').getByLabel(/Choose a password/).fill('a member password');
    await member.getByRole('button', { name: 'Create account and join' }).click();
    await member.waitForURL(`${dash.url}/members?joined=1`);

    // The owner: a team with a monthly budget, the member in it, and the member's own monthly budget of 0.
    await owner.getByRole('link', { name: 'Teams' }).click();
    await owner.locator('#new-team').getByLabel('Name').fill('search');
    await owner.locator('#new-team').getByLabel(/Monthly budget/).fill('500.00');
    await owner.getByRole('button', { name: 'Create team' }).click();
    await owner.waitForURL(`${dash.url}/teams?created=1`);
    await owner.getByLabel('Add a member').selectOption({ label: 'acme-dev@example.com' });
    await owner.getByRole('button', { name: 'Add to search' }).click();
    await owner.waitForURL(`${dash.url}/teams?members=1`);
    expect(await owner.locator('section.card').filter({ hasText: 'search' }).textContent()).toContain('acme-dev@example.com');
    await owner.getByRole('link', { name: 'Members' }).click();
    const devRow = owner.locator('#member-budgets tr').filter({ hasText: 'acme-dev@example.com' });
    await devRow.getByText('Set budgets').click();
    await devRow.getByLabel(/Monthly budget/).fill('0');
    await devRow.getByRole('button', { name: 'Save budgets of acme-dev@example.com' }).click();
    await owner.waitForURL(`${dash.url}/members?budgets=1`);

    // The member: a key in the team, from the Keys page; the gateway refuses it at their budget.
    await member.getByRole('link', { name: 'Teams' }).click();
    expect(await member.getByRole('heading', { name: 'search' }).count()).toBe(1);
    expect(await member.getByRole('button', { name: 'Create team' }).count()).toBe(0);
    await member.getByRole('link', { name: 'Keys' }).click();
    await member.getByLabel('Name').fill('search key');
    await member.getByLabel('Team').selectOption({ label: 'search' });
    await member.getByRole('button', { name: 'Create key' }).click();
    await member.waitForURL(`${dash.url}/keys`);
    const secret = (await member.locator('#new-key').textContent()) ?? '';
    expect(await member.getByRole('row').filter({ hasText: 'search key' }).filter({ hasText: 'search' }).count()).toBe(1);
    const openai = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    expect(await ask(openai)).toEqual({ served: false, status: 402, message: expect.stringContaining('Your monthly budget of 0.00 USD in Acme is used up; ask an owner or admin to raise it.') });
    // The member sees their own budget, not the others'.
    await member.goto(`${dash.url}/members`);
    expect(await member.locator('#member-budgets tr').filter({ hasText: 'acme-dev@example.com' }).count()).toBe(1);
    expect(await member.locator('#member-budgets tr').filter({ hasText: 'acme-owner@example.com' }).count()).toBe(0);

    // Raised to 20.00: served. Then the team's budget lowered to nothing: refused, naming the team.
    await owner.goto(`${dash.url}/members`);
    await devRow.getByText('Set budgets').click();
    await devRow.getByLabel(/Monthly budget/).fill('20.00');
    await devRow.getByRole('button', { name: 'Save budgets of acme-dev@example.com' }).click();
    await owner.waitForURL(`${dash.url}/members?budgets=1`);
    expect(await ask(openai)).toEqual({ served: true });
    await owner.goto(`${dash.url}/teams`);
    const searchCard = owner.locator('section.card[id^="team-"]').filter({ hasText: 'search' });
    await searchCard.getByText('Rename or change the budgets').click();
    await searchCard.getByLabel(/Monthly budget/).fill('0');
    await owner.getByRole('button', { name: 'Save search' }).click();
    await owner.waitForURL(`${dash.url}/teams?saved=1`);
    expect(await ask(openai)).toEqual({
      served: false,
      status: 402,
      message: expect.stringContaining("The search team's monthly budget of 0.00 USD is used up; an owner or admin can raise it in the dashboard."),
    });

    // The owner sees what the member and the team spent (the one request served).
    const spent = await accounts.scopeSpend(acme, 'team', (await tdb.db.query<{ id: string }>("SELECT id FROM teams WHERE account_id = $1 AND name = 'search'", [acme])).rows[0]?.id ?? '');
    expect(spent.monthSpent).toBeGreaterThan(0);
    const shown = `$${(spent.monthSpent / 1_000_000).toFixed(6)}`;
    await owner.goto(`${dash.url}/teams`);
    expect(await owner.locator('section.card').filter({ hasText: 'search' }).first().textContent()).toContain(`${shown} of $0.000000`);
    await shots.narrow(owner, 'teams');
    await owner.goto(`${dash.url}/members`);
    expect(await owner.locator('#member-budgets tr').filter({ hasText: 'acme-dev@example.com' }).textContent()).toContain(`${shown} of $20.000000`);
    expect(await owner.locator('#member-budgets tr').filter({ hasText: 'acme-owner@example.com' }).textContent()).toContain('$0.000000 no budget');
    await shots.narrow(owner, 'members-budgets');
    await ownerContext.close();
    await memberContext.close();
  }, 90_000);
});
