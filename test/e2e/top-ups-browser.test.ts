// Top-ups in a real browser (Debian's chromium): sign up, ask for 10.00, see the fee 0.65 and the total
// 10.65 before paying, pay on the fake Stripe's hosted page, come back to a balance exactly 10.00
// higher with the entry on the statement; then the same by crypto on the fake BTCPay's page. Saves
// screenshots of the Balance page (desktop and narrow) for the README with TOLLGATE_SCREENSHOTS=1.
import { writeFileSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUpAndConfirm, createOrganization, inviteMember } from '../helpers/dashboard-pages.js';
import { recordMovement } from '../../src/record/money-movement.js';
import { until } from './e2e-support.js';
import { browserMissing, launchChromium } from '../helpers/browser.js';
import { startPaymentsWorld, type PaymentsWorld } from '../helpers/payments-world.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testDb = useTestDatabase('topup_browser');
const testRedis = useTestRedis('t-topup-browser');

describe.skipIf(browserMissing)('top-ups in a browser', () => {
  let w: PaymentsWorld;
  let browser: Browser;

  beforeAll(async () => {
    w = await startPaymentsWorld({ db: testDb.db, redis: testRedis.redis, namespace: testRedis.namespace });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await w?.close();
  });

  async function quote(page: Page, amount: string): Promise<{ credit: string; fee: string; total: string }> {
    await page.goto(`${w.url}/balance`);
    await page.getByLabel(/Amount to add/).fill(amount);
    await page.getByRole('button', { name: 'See the total' }).click();
    return {
      credit: (await page.locator('#quote-credit').textContent()) ?? '',
      fee: (await page.locator('#quote-fee').textContent()) ?? '',
      total: (await page.locator('#quote-total').textContent()) ?? '',
    };
  }

  it('card, then crypto: the total is shown before paying, and the balance rises by exactly the credit', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    await signUpAndConfirm(page, w.url, w.db, 'payer@example.com', 'a payer password');
    const accountId = (await w.backend.accounts.listAccounts()).find((a) => a.name === 'payer@example.com')?.id ?? '';
    expect(accountId).not.toBe('');

    // Below the minimum: refused on the page, nothing started.
    await page.goto(`${w.url}/balance`);
    await page.getByLabel(/Amount to add/).fill('4.99');
    await page.getByRole('button', { name: 'See the total' }).click();
    expect(await page.getByRole('alert').textContent()).toMatch(/minimum top-up is 5.00 USD/);

    expect(await quote(page, '10.00')).toEqual({ credit: '$10.00', fee: '$0.65', total: '$10.65' });
    await page.getByRole('button', { name: 'Pay $10.65 by card' }).click();
    await page.waitForURL(new RegExp(`^${w.stripe.url}/pay/`));
    expect(await page.getByRole('note').textContent()).toMatch(/Test mode/);
    await page.getByRole('button', { name: 'Pay 10.65 USD' }).click();
    await page.waitForURL(new RegExp(`^${w.url}/balance\\?top_up=`));
    expect(await page.getByRole('status').textContent()).toContain('$10.00 was added to your balance');
    expect(await page.locator('#balance').textContent()).toBe('$10.000000');
    expect(await page.getByRole('cell', { name: 'Top-up' }).count()).toBe(1);
    expect(await page.getByRole('cell', { name: '+$10.000000' }).count()).toBe(1);
    expect((await w.backend.ledger.balance(accountId)).balance).toBe(10_000_000);

    expect(await quote(page, '10')).toEqual({ credit: '$10.00', fee: '$0.65', total: '$10.65' });
    await page.getByRole('button', { name: 'Pay $10.65 by crypto' }).click();
    await page.waitForURL(new RegExp(`^${w.btcpay.url}/i/`));
    await page.getByRole('button', { name: /^Send 0.00021300 BTC$/ }).click();
    await page.waitForURL(new RegExp(`^${w.url}/balance\\?top_up=`));
    expect(await page.locator('#balance').textContent()).toBe('$20.000000');
    expect(await page.getByRole('cell', { name: 'Top-up' }).count()).toBe(2);
    const record = await w.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [accountId]);
    expect(record.rows[0]?.balance).toBe(20_000_000);

    // The top-up's own page shows its timeline.
    await page.getByRole('link', { name: /\d{4}-\d{2}-\d{2}/ }).first().click();
    expect(await page.locator('ol').textContent()).toMatch(/quoted.*checkout started.*paid.*credited/s);

    await page.goto(`${w.url}/balance`);
    const desktop = await page.screenshot({ fullPage: true });
    await page.setViewportSize({ width: 390, height: 800 });
    const narrow = await page.screenshot({ fullPage: true });
    expect(desktop.length).toBeGreaterThan(10_000);
    expect(narrow.length).toBeGreaterThan(10_000);
    if (process.env.TOLLGATE_SCREENSHOTS === '1') {
      writeFileSync(new URL('../../docs/screenshots/dashboard-balance.png', import.meta.url), desktop);
      writeFileSync(new URL('../../docs/screenshots/dashboard-balance-narrow.png', import.meta.url), narrow);
    }
  }, 90_000);

  it('a billing member of an organization, invited by mail, tops up the organization and sees no keys', async () => {
    // The owner makes the organization and invites a billing member from the Members page.
    const owner = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    await signUpAndConfirm(owner, w.url, w.db, 'acme-owner@example.com', 'an owner password');
    await createOrganization(owner, w.url, 'Acme Billing');
    await inviteMember(owner, w.url, 'acme-billing@example.com', 'billing');
    const org = (await w.db.query<{ account_id: string }>("SELECT account_id FROM organizations WHERE name = 'Acme Billing'")).rows[0]?.account_id ?? '';
    expect(org).not.toBe('');

    // The billing member follows the mailed link, signs up through it, and lands acting for the organization.
    const mail = await w.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", ['acme-billing@example.com']);
    const link = /https?:\/\/[^/\s]+(\/invitations\/[A-Za-z0-9_-]{40,})/.exec(mail.rows[0]?.body ?? '')?.[1];
    expect(link, 'the invitation mailed to the billing member').toBeDefined();
    const billing = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    await billing.goto(`${w.url}${link ?? ''}`);
    await billing.locator('#invitation-sign-up').getByLabel(/Choose a password/).fill('a billing password');
    await billing.getByRole('button', { name: 'Create account and join' }).click();
    await billing.waitForURL(/\/(members|balance)\?joined=1/);
    expect(await billing.locator('#account-switch option:checked').textContent()).toBe('Acme Billing · billing');
    // No keys for a billing member: no Keys link, and the page itself refused.
    expect(await billing.getByRole('link', { name: 'Keys', exact: true }).count()).toBe(0);
    expect((await billing.goto(`${w.url}/keys`))?.status()).toBe(403);

    // The top-up: the organization's balance rises by exactly the credit; the member's own does not.
    expect(await quote(billing, '10.00')).toEqual({ credit: '$10.00', fee: '$0.65', total: '$10.65' });
    await billing.getByRole('button', { name: 'Pay $10.65 by card' }).click();
    await billing.waitForURL(new RegExp(`^${w.stripe.url}/pay/`));
    await billing.getByRole('button', { name: 'Pay 10.65 USD' }).click();
    await billing.waitForURL(new RegExp(`^${w.url}/balance\\?top_up=`));
    expect(await billing.getByRole('status').textContent()).toContain('$10.00 was added to your balance');
    expect(await billing.locator('#balance').textContent()).toBe('$10.000000');
    expect((await w.backend.ledger.balance(org)).balance).toBe(10_000_000);
    const own = (await w.db.query<{ account_id: string }>("SELECT account_id FROM dashboard_users WHERE email = 'acme-billing@example.com'")).rows[0]?.account_id ?? '';
    expect(own).not.toBe(org);
    expect((await w.backend.ledger.balance(own)).balance).toBe(0);
    // The owner sees the same balance and the billing member's top-up on the statement.
    await owner.goto(`${w.url}/balance`);
    expect(await owner.locator('#balance').textContent()).toBe('$10.000000');
    expect(await owner.getByRole('cell', { name: 'Top-up' }).count()).toBe(1);
  }, 90_000);

  it('automatic top-up: save a card on the provider\'s page, set a threshold, spend past it, and the balance is recharged', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    await signUpAndConfirm(page, w.url, w.db, 'auto@example.com', 'an auto payer password');
    const accountId = (await w.backend.accounts.listAccounts()).find((a) => a.name === 'auto@example.com')?.id ?? '';
    await w.ledger.credit(accountId, 9_000_000, `auto-start-${accountId}`);

    await page.goto(`${w.url}/balance`);
    await page.getByRole('button', { name: 'Save a card' }).click();
    await page.waitForURL(new RegExp(`^${w.stripe.url}/pay/`));
    await page.getByRole('button', { name: 'Save card ending 4242' }).click();
    await page.waitForURL(new RegExp(`^${w.url}/balance\\?card_setup=`));
    expect(await page.locator('#auto-top-up').textContent()).toMatch(/Card saved.*visa ending 4242/s);
    await page.getByLabel(/When the balance is below/).fill('8.00');
    await page.getByLabel(/^Add, USD/).fill('5.00');
    await page.getByLabel(/At most charged per month/).fill('20.00');
    await page.getByLabel('Top up automatically').check();
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.waitForURL(`${w.url}/balance?auto=saved#auto-top-up`);
    expect(await page.getByLabel('Top up automatically').isChecked()).toBe(true);

    // Spending takes the balance from 9.00 to 7.50, under the threshold (a charge of record, as usage posts).
    const m = { accountId, kind: 'adjustment' as const, amount: -1_500_000, idempotencyKey: `auto-spend-${accountId}`, memo: 'spending' };
    const recorded = await w.db.transaction((tx) => recordMovement(tx, m));
    await w.ledger.applyCommitted(m, recorded);
    expect(await w.autoTopUps.check()).toBe(1);
    await until('the automatic top-up is credited', async () => ((await w.backend.ledger.balance(accountId)).balance === 12_500_000 ? true : undefined), 5_000);
    await page.goto(`${w.url}/balance`);
    expect(await page.locator('#balance').textContent()).toBe('$12.500000');
    // The monthly maximum counts what the card is charged: 5.00 of credit cost 5.48.
    expect(await page.locator('#auto-top-up').textContent()).toMatch(/This month: \$5\.48 charged of \$20\.00/);
    if (process.env.TOLLGATE_SCREENSHOTS === '1') writeFileSync(new URL('../../docs/screenshots/dashboard-auto-top-up.png', import.meta.url), await page.locator('#auto-top-up').screenshot());
    await page.close();
  }, 90_000);

  it('the payer leaves the card checkout: back on the Balance page nothing is cancelled until the button POSTs it, and then the checkout is closed', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    await signUpAndConfirm(page, w.url, w.db, 'leaver@example.com', 'a leaving payer password');
    await quote(page, '10');
    await page.getByRole('button', { name: /by card/ }).click();
    await page.waitForURL(new RegExp(`^${w.stripe.url}/pay/`));
    const sessionId = new URL(page.url()).pathname.split('/').pop() ?? '';
    // The provider's "cancel" link sends the browser back with a GET: it changes nothing by itself.
    await page.getByRole('link', { name: 'Cancel and go back' }).click();
    await page.waitForURL(new RegExp(`^${w.url}/balance\\?top_up=.*&cancelled=1`));
    const topUpId = new URL(page.url()).searchParams.get('top_up') ?? '';
    expect(await page.locator('#left-checkout').textContent()).toMatch(/You left the payment page\. The checkout of \$10\.65 is still open and nothing has been charged\./);
    expect((await w.topUps.get(undefined, topUpId)).state).toBe('pending');
    expect(w.stripe.sessions.get(sessionId)?.status).toBe('open');
    await page.getByRole('button', { name: 'Cancel this top-up' }).click();
    await page.waitForURL(`${w.url}/top-ups/${topUpId}`);
    expect(await page.locator('main').textContent()).toContain('Cancelled');
    expect((await w.topUps.get(undefined, topUpId)).state).toBe('cancelled');
    expect(w.stripe.sessions.get(sessionId)?.status).toBe('expired');
    await page.close();
  }, 90_000);
});
