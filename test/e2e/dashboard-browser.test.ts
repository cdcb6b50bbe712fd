// The dashboard in a real browser (Debian's chromium driven by playwright-core): sign up, create a key,
// the gateway takes it, revoke it, the gateway refuses it. Saves a screenshot of the keys page for docs.
import { existsSync, writeFileSync } from 'node:fs';
import OpenAI from 'openai';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DashboardService } from '../../src/dashboard/service.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';

const CHROMIUM = '/usr/bin/chromium';
const tdb = useTestDatabase('dashb');

// CI installs chromium (.ci/run); a developer machine without it skips this file rather than fail.
describe.skipIf(!existsSync(CHROMIUM) && process.env.CI === undefined)('dashboard in a browser', () => {
  let harness: Harness;
  let dash: { url: string; close(): Promise<void> };
  let browser: Browser;

  beforeAll(async () => {
    harness = await startHarness();
    const service = new DashboardService({
      db: tdb.db,
      accounts: harness.backend.accounts,
      ledger: harness.backend.ledger,
      signUp: true,
      sessionTtlMs: 3_600_000,
      onRevoke: () => harness.gateway.authenticator.forget(),
    });
    dash = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
    // launch() gives every run a fresh throwaway profile (it refuses a --user-data-dir of ours).
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await dash?.close();
    await harness?.close();
  });

  it('signs up, creates a key the gateway accepts, revokes it and the gateway refuses it', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
    await page.goto(`${dash.url}/`);
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByLabel('E-mail').fill('browser@example.com');
    await page.getByLabel(/Password/).fill('a browser password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    expect(await page.getByText('No keys yet').count()).toBe(1);

    await page.getByLabel('Name').fill('browser key');
    await page.getByLabel(/Monthly cap/).fill('3.50');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.locator('#new-key').textContent()) ?? '';
    expect(secret).toMatch(/^sk-tg-/);
    expect(await page.getByRole('cell', { name: 'browser key' }).count()).toBe(1);
    // The README's screenshot is refreshed only on request (TOLLGATE_SCREENSHOTS=1), so a test run does
    // not rewrite a tracked file; the page is photographed every run all the same.
    const shot = await page.screenshot({ fullPage: true });
    expect(shot.length).toBeGreaterThan(10_000);
    if (process.env.TOLLGATE_SCREENSHOTS === '1') writeFileSync(new URL('../../docs/screenshots/dashboard-keys.png', import.meta.url), shot);

    const account = (await harness.backend.accounts.listAccounts()).find((a) => a.name === 'browser@example.com');
    expect(account).toBeDefined();
    await harness.backend.ledger.credit(account?.id ?? '', 5_000_000, 'browser-test');
    const client = new OpenAI({ apiKey: secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const model = (await client.models.list()).data[0]?.id ?? '';
    const reply = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 });
    expect(reply.choices).toHaveLength(1);

    // Reloading the list never shows the secret again.
    await page.goto(`${dash.url}/keys`);
    expect(await page.content()).not.toContain(secret);
    await page.getByRole('link', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(`${dash.url}/keys`);
    expect(await page.getByRole('cell', { name: 'revoked' }).count()).toBe(1);
    const refused = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }).then(
      () => 0,
      (err: unknown) => (err instanceof OpenAI.APIError ? (err.status ?? -1) : -2),
    );
    expect(refused).toBe(401);
    await page.close();
  }, 60_000);
});
