// Organizations in a real browser (Debian's chromium driven by playwright-core): an owner signs up,
// creates an organization from the header, invites a member from the Members page; the member follows
// the mailed link (read from the outbox), signs up through it, lands on the Members page without its
// controls, creates a key and sees only their own; the account switcher moves between accounts. The
// pages fit a 390 px phone without sideways scrolling. Photographs the Members, settings and invitation
// pages, desktop and narrow (files rewritten only with TOLLGATE_SCREENSHOTS=1).
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { browserMissing, launchChromium } from '../helpers/browser.js';
import { Screenshots } from '../helpers/screenshots.js';
import { signUpAndConfirm, createOrganization, inviteMember } from '../helpers/dashboard-pages.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('orgsb');

describe.skipIf(browserMissing)('organizations in a browser', () => {
  let harness: Harness;
  let dash: { url: string; close(): Promise<void> };
  let browser: Browser;
  const shots = new Screenshots();

  beforeAll(async () => {
    harness = await startHarness({ record: tdb.db });
    const accounts = new AccountService({ accounts: harness.backend.accounts, ledger: harness.backend.ledger, onRevoke: () => harness.gateway.authenticator.forget() });
    dash = await startDashboard({ service: new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000 }), secureCookie: false }, 0, '127.0.0.1');
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    shots.save();
    await browser?.close();
    await dash?.close();
    await harness?.close();
  });

  async function invitationLink(email: string): Promise<string> {
    const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", [email]);
    const path = /https?:\/\/[^/\s]+(\/invitations\/[A-Za-z0-9_-]{40,})/.exec(mail.rows[0]?.body ?? '')?.[1];
    expect(path, `an invitation mailed to ${email}`).toBeDefined();
    return `${dash.url}${path ?? ''}`;
  }

  it('an owner creates an organization and invites a member; the member joins through the mailed link, makes a key, and sees only their own and no controls', async () => {
    const ownerContext = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const owner = await ownerContext.newPage();
    await signUpAndConfirm(owner, dash.url, tdb.db, 'platform-owner@example.com', 'an owner password');

    // From the header: a new organization, which the session then acts on.
    await createOrganization(owner, dash.url, 'Platform Team');
    expect(await owner.getByRole('heading', { name: 'Members of Platform Team' }).count()).toBe(1);
    expect(await owner.getByLabel('Account').inputValue()).not.toBe('');
    expect(await owner.locator('#account-switch option:checked').textContent()).toBe('Platform Team · owner');

    // The owner invites a member and makes a key of their own.
    await inviteMember(owner, dash.url, 'platform-member@example.com', 'member');
    expect(await owner.getByRole('row').filter({ hasText: 'platform-member@example.com' }).count()).toBe(1);
    await shots.narrow(owner, 'members');
    await owner.getByRole('link', { name: 'Keys' }).click();
    await owner.getByLabel('Name').fill('owner key');
    await owner.getByRole('button', { name: 'Create key' }).click();
    await owner.waitForURL(`${dash.url}/keys`);

    // The member follows the mailed link and signs up through it.
    const memberContext = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const member = await memberContext.newPage();
    await member.goto(await invitationLink('platform-member@example.com'));
    expect(await member.getByRole('heading', { name: 'Join Platform Team' }).count()).toBe(1);
    await shots.narrow(member, 'invitation');
    await member.locator('#invitation-sign-up').getByLabel(/Choose a password/).fill('a member password');
    await member.getByRole('button', { name: 'Create account and join' }).click();
    await member.waitForURL(`${dash.url}/members?joined=1`);
    expect(await member.getByRole('status').textContent()).toContain('You joined the organization');
    // The list, without a single control.
    expect(await member.getByRole('row').filter({ hasText: 'platform-owner@example.com' }).count()).toBe(1);
    for (const control of ['Send invitation', 'Change role', 'Remove', 'Revoke']) expect(await member.getByRole('button', { name: control }).count(), control).toBe(0);
    expect(await member.getByRole('link', { name: 'Balance' }).count()).toBe(0);

    // A key of their own (the address counts as confirmed: the link came to it); the owner's is not shown.
    await member.getByRole('link', { name: 'Keys' }).click();
    await member.getByLabel('Name').fill('member key');
    await member.getByRole('button', { name: 'Create key' }).click();
    await member.waitForURL(`${dash.url}/keys`);
    expect((await member.locator('#new-key').textContent()) ?? '').toMatch(/^sk-tg-/);
    expect(await member.getByRole('row').filter({ hasText: 'member key' }).count()).toBe(1);
    expect(await member.content()).not.toContain('owner key');
    await shots.narrow(member, 'keys-member');

    // The owner sees both keys, and who made each.
    await owner.goto(`${dash.url}/keys`);
    expect(await owner.getByRole('row').filter({ hasText: 'member key' }).filter({ hasText: 'platform-member@example.com' }).count()).toBe(1);
    expect(await owner.getByRole('row').filter({ hasText: 'owner key' }).count()).toBe(1);
    await owner.goto(`${dash.url}/organization`);
    expect(await owner.getByRole('heading', { name: 'Transfer ownership' }).count()).toBe(1);
    await shots.narrow(owner, 'organization');

    // The switcher: the member's personal account has none of the organization's keys.
    // Already on /keys, so waitForURL alone would not wait: the new document's load event does.
    const switched = member.waitForEvent('load');
    await member.getByLabel('Account').selectOption({ label: 'Personal · owner' });
    await switched;
    await member.waitForURL(`${dash.url}/keys`);
    expect(await member.locator('#account-switch option:checked').textContent()).toBe('Personal · owner');
    expect(await member.getByText('No keys yet').count()).toBe(1);
    await ownerContext.close();
    await memberContext.close();
  }, 60_000);
});
