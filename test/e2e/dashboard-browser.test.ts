// The dashboard in a real browser (Debian's chromium driven by playwright-core), over a gateway that
// journals to a real PostgreSQL: sign up, create a key and copy it, call the API with the openai client,
// find the request by its id in Usage with the right cost, set a monthly cap and see a 402 past it,
// export the CSV and check its total against the statement, file a refund ticket that an admin approves
// (the balance rises by exactly the request's cost), revoke the key and see the 401. Photographs the
// main pages, desktop and narrow (files rewritten only with TOLLGATE_SCREENSHOTS=1).
import { AccountService } from '../../src/account-service/account-service.js';
import { writeFileSync } from 'node:fs';
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { totpCode } from '../../src/dashboard/totp.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { browserMissing, launchChromium } from '../helpers/browser.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { EXAMPLE_MODELS, startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { until } from './e2e-support.js';

const tdb = useTestDatabase('dashb');
const MODEL = 'outlaw-1-xploded';
const pricing = EXAMPLE_MODELS.find((m) => m.id === MODEL)?.pricing;
const prices = { input: usdPerMillionToMicros(pricing?.input ?? '0'), output: usdPerMillionToMicros(pricing?.output ?? '0'), display: { input: '', output: '' } };

describe.skipIf(browserMissing)('dashboard in a browser', () => {
  let harness: Harness;
  let dash: { url: string; close(): Promise<void> };
  let browser: Browser;
  let service: DashboardService;
  const shots: Array<[string, Buffer]> = [];

  beforeAll(async () => {
    harness = await startHarness({ record: tdb.db });
    service = new DashboardService({
      db: tdb.db,
      accounts: new AccountService({ accounts: harness.backend.accounts, ledger: harness.backend.ledger, onRevoke: () => harness.gateway.authenticator.forget() }),
      signUp: true,
      sessionTtlMs: 3_600_000,
    });
    dash = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
    const operators = await harness.backend.accounts.createAccount('operators');
    await service.provisioning.upsertUser('admin@example.com', 'the admin password', operators.id, 'admin');
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    if (process.env.TOLLGATE_SCREENSHOTS === '1') for (const [name, png] of shots) writeFileSync(new URL(`../../docs/screenshots/${name}.png`, import.meta.url), png);
    await browser?.close();
    await dash?.close();
    await harness?.close();
  });

  /** Desktop and narrow photographs of the page as it is now. */
  async function photograph(page: Page, name: string): Promise<void> {
    const desktop = await page.screenshot({ fullPage: true });
    await page.setViewportSize({ width: 390, height: 800 });
    const narrow = await page.screenshot({ fullPage: true });
    await page.setViewportSize({ width: 1100, height: 760 });
    expect(desktop.length).toBeGreaterThan(10_000);
    expect(narrow.length).toBeGreaterThan(10_000);
    shots.push([`dashboard-${name}`, desktop], [`dashboard-${name}-narrow`, narrow]);
  }

  async function balanceOf(page: Page): Promise<number> {
    return ((await (await page.request.get(`${dash.url}/api/balance`)).json()) as { balance_micro_usd: number }).balance_micro_usd;
  }

  it('sign-up to refund: key, copy, call, find by id, cap and 402, CSV against the statement, refund approved, revoke and 401', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: dash.url });
    const page = await context.newPage();
    await page.goto(`${dash.url}/`);
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByLabel('E-mail').fill('browser@example.com');
    await page.getByLabel(/Password/).fill('a browser password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    expect(await page.getByText('No keys yet').count()).toBe(1);
    // No key before the address is confirmed: the holder follows the mailed link.
    expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await page.getByText('Confirm your e-mail address').count()).toBe(1);
    await page.goto(`${dash.url}${await DashboardClient.confirmationPath(tdb.db, 'browser@example.com')}`);
    expect(await page.getByRole('status').textContent()).toMatch(/create API keys/);
    await page.getByRole('link', { name: 'Go to your keys' }).click();

    await page.getByLabel('Name').fill('browser key');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    const shown = (await page.locator('#new-key').textContent()) ?? '';
    expect(shown).toMatch(/^sk-tg-/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await until('copied', async () => ((await page.getByRole('button', { name: 'Copied' }).count()) === 1 ? true : undefined), 5_000);
    const secret = await page.evaluate<string>('navigator.clipboard.readText()');
    expect(secret).toBe(shown);
    // A reload (the browser's, after the redirect) shows the list: no second key, no secret again.
    await page.reload();
    expect(await page.locator('#new-key').count()).toBe(0);
    expect(await page.getByRole('row').filter({ hasText: 'browser key' }).count()).toBe(1);
    expect(await page.content()).not.toContain(secret);

    const account = (await harness.backend.accounts.listAccounts()).find((a) => a.name === 'browser@example.com');
    await harness.backend.ledger.credit(account?.id ?? '', 5_000_000, 'browser-test');
    const client = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }).withResponse();
    const requestId = res.response.headers.get('x-request-id') ?? '';
    const cost = costMicros({ input: res.data.usage?.prompt_tokens ?? 0, output: res.data.usage?.completion_tokens ?? 0, cachedInput: 0, reasoning: 0 }, prices);
    await page.goto(`${dash.url}/keys`);
    expect(await page.content()).not.toContain(secret);
    await photograph(page, 'keys');

    // Usage: find the request by its id, with its cost.
    const row = await until(
      'the request in Usage',
      async () => {
        await page.goto(`${dash.url}/usage`);
        await page.getByLabel('Request id').fill(requestId);
        await page.getByRole('button', { name: 'Show' }).click();
        const found = page.getByRole('row').filter({ hasText: requestId });
        return (await found.count()) === 1 ? found : undefined;
      },
      10_000,
    );
    expect(await row.textContent()).toContain(`$${(cost / 1e6).toFixed(6)}`);

    // A monthly cap below the next request's worst case: 402.
    await page.goto(`${dash.url}/keys`);
    await page.getByRole('link', { name: 'Edit caps' }).click();
    await page.getByLabel(/Monthly cap/).fill('0.000001');
    await page.getByRole('button', { name: 'Save caps' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    harness.gateway.authenticator.forget();
    const capped = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'again' }], max_tokens: 8 }).catch((e: unknown) => e);
    expect((capped as { status?: number }).status).toBe(402);
    await until(
      'the 402 in Usage',
      async () => {
        await page.goto(`${dash.url}/usage?status=refused`);
        return (await page.getByText('refused: key monthly cap').count()) > 0 ? true : undefined;
      },
      10_000,
    );
    await page.goto(`${dash.url}/usage`);
    await photograph(page, 'usage');

    // CSV export: its total equals the statement's usage entries.
    const download = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Export CSV' }).click();
    const file = await (await download).createReadStream();
    let csv = '';
    for await (const chunk of file) csv += String(chunk);
    const rows = csv.trim().split('\r\n');
    const total = Number(rows[rows.length - 1]?.split(',')[12]);
    const statement = (await (await page.request.get(`${dash.url}/api/statement`)).json()) as { entries: Array<{ kind: string; amount_micro_usd: number }> };
    expect(total).toBe(cost);
    expect(-statement.entries.filter((e) => e.kind === 'usage').reduce((a, e) => a + e.amount_micro_usd, 0)).toBe(total);
    await page.goto(`${dash.url}/balance`);
    await photograph(page, 'statement');

    // A refund ticket, approved by an admin: the balance rises by exactly the request's cost.
    await page.goto(`${dash.url}/usage?request_id=${requestId}`);
    await page.getByRole('link', { name: 'Request a refund' }).click();
    await page.getByLabel(/Why should it be refunded/).fill('The answer was not what I asked for.');
    await page.getByRole('button', { name: 'Send to support' }).click();
    expect(await page.getByRole('status').textContent()).toContain(requestId);
    const before = await balanceOf(page);
    const adminContext = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const admin = await adminContext.newPage();
    await admin.goto(`${dash.url}/sign-in`);
    await admin.getByLabel('E-mail').fill('admin@example.com');
    await admin.getByLabel('Password').fill('the admin password');
    await admin.getByRole('button', { name: 'Sign in' }).click();
    await admin.goto(`${dash.url}/admin`);
    await photograph(admin, 'admin');
    await admin.getByRole('row').filter({ hasText: requestId }).getByRole('button', { name: 'Approve' }).click();
    expect(await admin.getByRole('status').textContent()).toContain(requestId);
    expect((await balanceOf(page)) - before).toBe(cost);
    await page.goto(`${dash.url}/refunds`);
    expect(await page.getByRole('row').filter({ hasText: requestId }).textContent()).toContain('approved');
    await photograph(page, 'refunds');

    // Revoke, with confirmation: the gateway answers 401.
    await page.goto(`${dash.url}/keys`);
    await page.getByRole('link', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    expect(await page.getByRole('cell', { name: 'revoked' }).count()).toBe(1);
    const refused = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }).catch((e: unknown) => (e as { status?: number }).status);
    expect(refused).toBe(401);
    await adminContext.close();
    await context.close();
  }, 90_000);
  /** Nothing on the page reaches past the viewport's right edge, so nothing needs a sideways scroll. */
  async function fitsWidth(page: Page, what: string): Promise<void> {
    const widths = await page.evaluate<{ doc: number; view: number; wide: string[] }>(`(() => {
      const view = document.documentElement.clientWidth;
      const wide = [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > view + 0.5 && e.closest('table:not(.stack)') === null).map((e) => e.tagName + '.' + e.className + ': ' + (e.textContent || '').slice(0, 40));
      return { doc: document.documentElement.scrollWidth, view, wide };
    })()`);
    expect(widths.wide, `${what}: elements past the right edge`).toEqual([]);
    expect(widths.doc, `${what}: page wider than the screen`).toBeLessThanOrEqual(widths.view);
  }

  /** The element is on screen horizontally (not clipped inside a scrolling table). */
  async function reachable(page: Page, selector: string): Promise<number> {
    const boxes = await page.locator(selector).evaluateAll((els) => els.map((e) => e.getBoundingClientRect()).map((r) => ({ left: r.left, right: r.right, width: r.width })));
    for (const b of boxes) {
      expect(b.width).toBeGreaterThan(0);
      expect(b.left).toBeGreaterThanOrEqual(0);
      expect(b.right).toBeLessThanOrEqual(390);
    }
    return boxes.length;
  }

  it('on a 390 px phone: Keys actions and the statement\'s Amount and Balance are in view, the refund form and the admin account heading fit (issue 29, defect 11)', async () => {
    const account = await harness.backend.accounts.createAccount('a-holder-with-a-rather-long-name@phone.example.com');
    await service.provisioning.upsertUser('phone@example.com', 'a phone password', account.id);
    const context = await browser.newContext({ viewport: { width: 390, height: 800 }, isMobile: true, hasTouch: true });
    const page = await context.newPage();
    await page.goto(`${dash.url}/sign-in`);
    await page.getByLabel('E-mail').fill('phone@example.com');
    await page.getByLabel('Password').fill('a phone password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    for (const name of ['phone key with a long descriptive name', 'second phone key']) {
      await page.getByLabel('Name').fill(name);
      await page.getByLabel(/Monthly cap/).fill('25.50');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.waitForURL(`${dash.url}/keys`);
    }
    const secret = (await page.locator('#new-key').textContent()) ?? '';
    await page.reload();
    await fitsWidth(page, 'Keys');
    expect(await reachable(page, 'a:text-is("Revoke")')).toBe(2);
    expect(await reachable(page, 'a:text-is("Edit caps and limits")')).toBe(2);
    const keysShot = await page.screenshot({ fullPage: true });

    await harness.backend.ledger.credit(account.id, 12_345_678, 'phone-credit');
    const client = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }).withResponse();
    const requestId = res.response.headers.get('x-request-id') ?? '';
    await until(
      'the request on the statement',
      async () => {
        await page.goto(`${dash.url}/balance`);
        return (await page.locator('#statement td[data-label="Amount"]').count()) >= 2 ? true : undefined;
      },
      10_000,
    );
    await fitsWidth(page, 'Balance');
    expect(await reachable(page, '#statement td[data-label="Amount"]')).toBeGreaterThanOrEqual(2);
    expect(await reachable(page, '#statement td[data-label="Balance"]')).toBeGreaterThanOrEqual(2);
    expect(await page.locator('#statement td[data-label="Balance"]').first().isVisible()).toBe(true);
    const statementShot = await page.screenshot({ fullPage: true });

    await until('the request in the record', async () => ((await (await page.request.get(`${dash.url}/api/usage?request_id=${requestId}`)).json()) as { usage: unknown[] }).usage.length === 1 ? true : undefined, 10_000);
    await page.goto(`${dash.url}/usage/${requestId}/refund`);
    await fitsWidth(page, 'Refund form');
    await reachable(page, 'textarea[name="reason"]');
    await reachable(page, 'button:text-is("Send to support")');

    const adminContext = await browser.newContext({ viewport: { width: 390, height: 800 }, isMobile: true, hasTouch: true });
    const admin = await adminContext.newPage();
    await admin.goto(`${dash.url}/sign-in`);
    await admin.getByLabel('E-mail').fill('admin@example.com');
    await admin.getByLabel('Password').fill('the admin password');
    await admin.getByRole('button', { name: 'Sign in' }).click();
    await admin.waitForURL(`${dash.url}/keys`);
    await admin.goto(`${dash.url}/admin/accounts/${account.id}`);
    await fitsWidth(admin, 'Admin account');
    await reachable(admin, 'h1');
    await reachable(admin, 'button:text-is("Revoke for the holder")');
    const adminShot = await admin.screenshot({ fullPage: true });
    const dir = process.env.TOLLGATE_NARROW_SHOTS;
    if (dir !== undefined && dir !== '') {
      writeFileSync(`${dir}/keys-390.png`, keysShot);
      writeFileSync(`${dir}/statement-390.png`, statementShot);
      writeFileSync(`${dir}/admin-account-390.png`, adminShot);
    }
    await adminContext.close();
    await context.close();
  }, 60_000);

  it('two-factor sign-in on the Security page: on with a code and the password, ten recovery codes shown once (copied), one signs in in place of a code, off with another; every page fits a phone (issue 37, item 5)', async () => {
    const account = await harness.backend.accounts.createAccount('security');
    await service.provisioning.upsertUser('security@example.com', 'a security password', account.id);
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: dash.url });
    const page = await context.newPage();
    const signIn = async (code?: string): Promise<void> => {
      await page.goto(`${dash.url}/sign-in`);
      await page.getByLabel('E-mail').fill('security@example.com');
      await page.getByLabel('Password').fill('a security password');
      if (code !== undefined) await page.getByLabel(/Authenticator code or a recovery code/).fill(code);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${dash.url}/keys`);
    };
    const shots: Array<[string, Buffer]> = [];
    const phone = async (name: string): Promise<void> => {
      await page.setViewportSize({ width: 390, height: 800 });
      await fitsWidth(page, name);
      shots.push([`${name}-390`, await page.screenshot({ fullPage: true })]);
      await page.setViewportSize({ width: 1100, height: 760 });
    };
    await signIn();
    await page.getByRole('link', { name: 'Security' }).click();
    await page.waitForURL(`${dash.url}/account/two-factor`);
    const secret = (await page.locator('#totp-secret').textContent()) ?? '';
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    await photograph(page, 'two-factor-enrol');
    await phone('two-factor-enrol');
    await page.getByLabel('Code from the app').fill(totpCode(secret));
    await page.getByLabel('Your password').fill('a security password');
    await page.getByRole('button', { name: 'Turn on' }).click();
    await page.getByRole('heading', { name: 'Save your recovery codes' }).waitFor();
    const codes = await page.locator('#recovery-code-list code').allTextContents();
    expect(codes).toHaveLength(10);
    await page.getByRole('button', { name: 'Copy all' }).click();
    const copied = await page.evaluate('navigator.clipboard.readText()');
    for (const c of codes) expect(copied).toContain(c);
    await photograph(page, 'two-factor-codes');
    await phone('two-factor-codes');
    await page.getByRole('link', { name: 'I have saved them' }).click();
    expect(await page.locator('#recovery-codes').textContent()).toContain('10 of 10');
    await photograph(page, 'two-factor-on');
    await phone('two-factor-on');

    // Signed out, a recovery code stands in for the phone.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL(`${dash.url}/sign-in`);
    await signIn(codes[3]);
    await page.goto(`${dash.url}/account/two-factor`);
    expect(await page.locator('#recovery-codes').textContent()).toContain('9 of 10');
    // Turned off with the password and another recovery code.
    const off = page.locator('#turn-off');
    await off.getByLabel(/Code from the app, or a recovery code/).fill(codes[4] ?? '');
    await off.getByLabel('Your password').fill('a security password');
    await off.getByRole('button', { name: 'Turn off' }).click();
    await page.waitForURL(`${dash.url}/account/two-factor?done=off`);
    expect(await page.locator('main').textContent()).toContain('Two-factor sign-in is off');
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await signIn();
    const dir = process.env.TOLLGATE_NARROW_SHOTS;
    if (dir !== undefined && dir !== '') for (const [name, png] of shots) writeFileSync(`${dir}/${name}.png`, png);
    await context.close();
  }, 60_000);
});
