// Steps the browser tests take through the dashboard's own pages, as a person does, written once.
import type { Page } from 'playwright-core';
import type { MemberRole } from '../../src/dashboard/roles.js';
import type { Database } from '../../src/record/database.js';
import { DashboardClient } from './dashboard-client.js';

/** Signs up on the page, then follows the mailed confirmation link (a new holder's first steps). */
export async function signUpAndConfirm(page: Page, baseUrl: string, db: Database, email: string, password: string): Promise<void> {
  await page.goto(`${baseUrl}/sign-up`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel(/Password/).fill(password);
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.waitForURL(`${baseUrl}/keys`);
  await page.goto(`${baseUrl}${await DashboardClient.confirmationPath(db, email)}`);
}

/** From the header: a new organization, which the session then acts on (it lands on its Members page). */
export async function createOrganization(page: Page, baseUrl: string, name: string): Promise<void> {
  await page.getByRole('link', { name: '+ Organization' }).click();
  await page.getByLabel('Name').fill(name);
  await page.getByRole('button', { name: 'Create organization' }).click();
  await page.waitForURL(`${baseUrl}/members?created=1`);
}

/** From the Members page: an invitation mailed to `email` with this role. */
export async function inviteMember(page: Page, baseUrl: string, email: string, role: Exclude<MemberRole, 'owner'>): Promise<void> {
  await page.getByLabel('E-mail').fill(email);
  await page.locator('#invite select[name=role]').selectOption(role);
  await page.getByRole('button', { name: 'Send invitation' }).click();
  await page.waitForURL(`${baseUrl}/members?invited=1`);
}
