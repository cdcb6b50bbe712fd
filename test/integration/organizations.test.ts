// Organizations and members over real HTTP, against a gateway journaling to a real PostgreSQL and
// top-ups on the test-mode providers: an owner creates an organization and invites people by e-mail
// (the link read from the outbox), who join by signing up or signing in with that address; a member
// sees only their own keys and usage and none of the Members page's controls; a billing member tops
// the organization up but has no keys; removing a member revokes their keys and keeps their usage;
// invitations work once and expire; and every guarded route checks the permission it names against
// the one table of roles (a route without a check fails the walk).
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { guardedRoutes } from '../../src/dashboard/app.js';
import { can, MEMBER_ROLES, type MemberRole } from '../../src/dashboard/roles.js';
import { guardOf, type RouteGuard } from '../../src/dashboard/route-guards.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { sessionCookie } from '../../src/dashboard/state.js';
import { AttemptThrottle } from '../../src/dashboard/throttle.js';
import { createRedisBackend } from '../../src/billing/backends.js';
import { openPglite } from '../../src/record/database.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { loadMigrations, migrate } from '../../src/record/migrate.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { startTestModePayments, type TestModePayments } from '../../src/top-ups/payments-config.js';
import { TopUpService } from '../../src/top-ups/service.js';
import { topUpWebhooks } from '../../src/top-ups/webhooks.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const tdb = useTestDatabase('orgs');
const testRedis = useTestRedis('t-orgs');
const PASSWORD = 'correct horse battery';
const MODEL = 'outlaw-1-xploded';
let harness: Harness;
let payments: TestModePayments;
let accounts: AccountService;
let topUps: TopUpService;
let service: DashboardService;
let dash: { url: string; close(): Promise<void> };
const base = (): string => dash.url;

beforeAll(async () => {
  harness = await startHarness({ record: tdb.db });
  payments = await startTestModePayments();
  const ledger = harness.backend.ledger as RecordedLedger;
  // The file's one account service, as the composition root builds it.
  accounts = new AccountService({ accounts: harness.backend.accounts, ledger, onRevoke: () => harness.gateway.authenticator.forget(), applyCommitted: (m, r) => ledger.applyCommitted(m, r) });
  let url = '';
  topUps = new TopUpService({ db: tdb.db, providers: payments.providers, accounts, publicUrl: () => url });
  // Everyone here signs up and in from 127.0.0.1: wide budgets (the throttles have their own tests).
  const wide = (): AttemptThrottle => new AttemptThrottle({ perAccount: 50, perAddress: 1000, windowMs: 60_000 });
  service = new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000, throttles: { signUp: wide(), signIn: wide() } });
  dash = await startDashboard({ service, secureCookie: false, topUps, webhooks: topUpWebhooks(topUps) }, 0, '127.0.0.1');
  url = dash.url;
  payments.deliverTo(dash.url);
});

afterAll(async () => {
  await dash?.close();
  await payments?.close();
  await harness?.close();
});

interface Session {
  user: { id: string; email: string; email_verified: boolean };
  account: { id: string; name: string; kind: string; role: string } | null;
  accounts: Array<{ id: string; role: string }>;
}

const sessionOf = async (c: DashboardClient): Promise<Session> => (await c.api('GET', '/api/session')).json() as Session;

/** A signed-up holder with a confirmed address (their personal account, which they own). */
async function holder(email: string): Promise<DashboardClient> {
  const c = new DashboardClient(base);
  await c.signUpConfirmed(tdb.db, email, PASSWORD);
  return c;
}

/** The link of the newest invitation mailed to `email`, as it arrives in the inbox (the outbox). */
async function mailedInvitation(email: string): Promise<{ path: string; token: string; text: string }> {
  const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", [email]);
  const text = mail.rows[0]?.body ?? '';
  const m = /https?:\/\/[^/\s]+(\/invitations\/([A-Za-z0-9_-]{40,}))/.exec(text);
  expect(m, `an invitation mailed to ${email}`).not.toBeNull();
  return { path: m?.[1] ?? '', token: m?.[2] ?? '', text };
}

/** An organization of a new owner, the session acting on it, with money to spend. */
async function organization(ownerEmail: string, name: string, credit = 5_000_000): Promise<{ owner: DashboardClient; accountId: string }> {
  const owner = await holder(ownerEmail);
  const created = await owner.api('POST', '/api/organizations', { name });
  expect(created.status).toBe(201);
  const accountId = (created.json() as { account: { id: string } }).account.id;
  if (credit > 0) await accounts.credit(accountId, credit, `seed-${accountId}`);
  return { owner, accountId };
}

/** Invites `email` in `role` and has them sign up through the mailed link (API); signed in on the organization. */
async function invitedMember(owner: DashboardClient, email: string, role: MemberRole): Promise<DashboardClient> {
  expect((await owner.api('POST', '/api/invitations', { email, role })).status).toBe(201);
  const { token } = await mailedInvitation(email);
  const c = new DashboardClient(base);
  const r = await c.req('POST', '/api/sign-up', { email, password: PASSWORD, invitation: token });
  expect(r.status).toBe(201);
  c.csrf = (r.json() as { csrf_token: string }).csrf_token;
  c.email = email;
  return c;
}

async function createKey(c: DashboardClient, name: string): Promise<{ id: string; secret: string; openai: OpenAI }> {
  const r = await c.api('POST', '/api/keys', { name });
  expect(r.status).toBe(201);
  const body = r.json() as { key: { id: string }; secret: string };
  return { id: body.key.id, secret: body.secret, openai: new OpenAI({ apiKey: body.secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 }) };
}

/** One served request's id, once the record has it (as the account's owner sees it). */
async function served(openai: OpenAI, reader: DashboardClient): Promise<string> {
  const res = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 10 }).withResponse();
  const requestId = res.response.headers.get('x-request-id') ?? '';
  await until('the request in the record', async () => (((await reader.api('GET', `/api/usage?request_id=${requestId}`)).json() as { usage: unknown[] }).usage.length === 1 ? true : undefined), 10_000);
  return requestId;
}

const keyIds = async (c: DashboardClient): Promise<string[]> => ((await c.api('GET', '/api/keys')).json() as { keys: Array<{ id: string }> }).keys.map((k) => k.id).sort();
const usageIds = async (c: DashboardClient): Promise<string[]> => ((await c.api('GET', '/api/usage')).json() as { usage: Array<{ request_id: string }> }).usage.map((u) => u.request_id).sort();

describe('an organization and its members', () => {
  it('an owner creates an organization and invites a member, who signs up through the mailed link, makes a key, and sees neither the others\' keys nor the Members page\'s controls', async () => {
    const owner = await holder('acme-owner@example.com');
    // Created from the page (the creator owns it), which then acts on it.
    expect((await owner.req('GET', '/organizations/new')).status).toBe(200);
    const created = await owner.req('POST', '/organizations', { name: 'Acme', csrf: owner.csrf }, { form: true });
    expect(created.status).toBe(303);
    expect(created.res.headers.get('location')).toBe('/members?created=1');
    const session = await sessionOf(owner);
    expect(session.account).toMatchObject({ name: 'Acme', kind: 'organization', role: 'owner' });
    expect(session.accounts.map((a) => a.role)).toEqual(['owner', 'owner']);
    const acme = session.account?.id ?? '';
    await accounts.credit(acme, 5_000_000, 'acme-seed');
    // Its own balance: the owner's personal account is not it.
    expect(acme).not.toBe(((await owner.api('GET', '/api/accounts')).json() as { accounts: Array<{ id: string; kind: string }> }).accounts.find((a) => a.kind === 'personal')?.id);
    expect(((await owner.api('GET', '/api/balance')).json() as { balance_micro_usd: number }).balance_micro_usd).toBe(5_000_000);

    // The invitation, from the Members page's form, mailed through the outbox.
    const members = await owner.req('GET', '/members?created=1');
    expect(members.text).toContain('Members of Acme');
    expect(members.text).toContain('action="/members/invite"');
    const invited = await owner.req('POST', '/members/invite', { email: 'Acme-Member@Example.com', role: 'member', csrf: owner.csrf }, { form: true });
    expect(invited.status).toBe(303);
    const mail = await mailedInvitation('acme-member@example.com');
    expect(mail.text).toContain('acme-owner@example.com invites you to the organization Acme on Tollgate, as member');
    // Only the token's hash is kept.
    const stored = (await tdb.db.query<{ token_hash: string }>("SELECT token_hash FROM invitations WHERE email = 'acme-member@example.com'")).rows;
    expect(stored.map((r) => r.token_hash)).toEqual([createHash('sha256').update(mail.token).digest('hex')]);

    // The invitee follows the link and signs up with that address (the link proves it: no confirmation mail).
    const member = new DashboardClient(base);
    const landing = await member.req('GET', mail.path);
    expect(landing.status).toBe(200);
    expect(landing.text).toContain('Join Acme');
    expect(landing.text).toContain('acme-member@example.com');
    const joined = await member.req('POST', '/sign-up', { email: 'acme-member@example.com', password: PASSWORD, invitation: mail.token }, { form: true });
    expect(joined.status).toBe(303);
    expect(joined.res.headers.get('location')).toBe('/members?joined=1');
    const memberSession = (await member.req('GET', '/api/session')).json() as Session & { csrf_token: string };
    member.csrf = memberSession.csrf_token;
    expect(memberSession.account).toMatchObject({ id: acme, kind: 'organization', role: 'member' });
    expect(memberSession.user.email_verified).toBe(true);
    expect((await tdb.db.query("SELECT 1 FROM email_outbox WHERE recipient = 'acme-member@example.com' AND subject LIKE 'Confirm%'")).rows).toEqual([]);

    // Keys: each makes one in Acme; the member sees and manages only their own, the owner both.
    const ownerKey = await createKey(owner, 'owner key');
    const memberKey = await createKey(member, 'member key');
    expect(await keyIds(member)).toEqual([memberKey.id]);
    expect(await keyIds(owner)).toEqual([ownerKey.id, memberKey.id].sort());
    for (const [method, path] of [['GET', `/api/keys/${ownerKey.id}`], ['PATCH', `/api/keys/${ownerKey.id}`], ['POST', `/api/keys/${ownerKey.id}/revoke`]] as const) {
      expect((await member.api(method, path, method === 'GET' ? undefined : { monthly_cap_usd: '1' })).status, `${method} ${path}`).toBe(404);
    }
    expect((await member.req('GET', `/keys/${ownerKey.id}/edit`)).status).toBe(404);
    const memberKeysPage = await member.req('GET', '/keys');
    expect(memberKeysPage.text).toContain('member key');
    expect(memberKeysPage.text).not.toContain('owner key');
    const ownerKeysPage = await owner.req('GET', '/keys');
    expect(ownerKeysPage.text).toContain('Made by');
    expect(ownerKeysPage.text).toContain('acme-member@example.com');
    expect(((await owner.api('GET', `/api/keys/${memberKey.id}`)).json() as { key: { owner: { email: string } } }).key.owner.email).toBe('acme-member@example.com');

    // Usage: the member sees their own requests, the owner the organization's.
    const ownerCall = await served(ownerKey.openai, owner);
    const memberCall = await served(memberKey.openai, owner);
    expect(await usageIds(member)).toEqual([memberCall]);
    expect(await usageIds(owner)).toEqual([ownerCall, memberCall].sort());
    expect(((await member.api('GET', `/api/usage?request_id=${ownerCall}`)).json() as { usage: unknown[] }).usage).toEqual([]);
    expect((await member.req('GET', '/api/usage.csv')).text).not.toContain(ownerCall);

    // The Members page: the list without a single control; the routes behind them refuse.
    const memberPage = await member.req('GET', '/members?joined=1');
    expect(memberPage.status).toBe(200);
    expect(memberPage.text).toContain('acme-owner@example.com');
    for (const control of ['action="/members/invite"', 'Change role', '>Remove<', 'Revoke</button>', 'Send invitation']) expect(memberPage.text).not.toContain(control);
    expect((await member.req('POST', '/members/invite', { email: 'x@example.com', role: 'member', csrf: member.csrf }, { form: true })).status).toBe(403);
    expect((await member.api('GET', '/api/invitations')).status).toBe(403);
    // Nor the organization's money.
    expect((await member.req('GET', '/balance')).status).toBe(403);
    expect((await member.api('GET', '/api/balance')).status).toBe(403);
  });

  it('a billing member tops the organization up (its own balance) but cannot manage keys; an admin sees the balance without paying', async () => {
    const { owner, accountId } = await organization('globex-owner@example.com', 'Globex', 0);
    // An existing user accepts while signed in, with the page's Join button.
    const billing = await holder('globex-billing@example.com');
    expect((await owner.api('POST', '/api/invitations', { email: 'globex-billing@example.com', role: 'billing' })).status).toBe(201);
    const mail = await mailedInvitation('globex-billing@example.com');
    const landing = await billing.req('GET', mail.path);
    expect(landing.text).toContain(`action="/invitations/${mail.token}/accept"`);
    const accepted = await billing.req('POST', `/invitations/${mail.token}/accept`, { csrf: billing.csrf }, { form: true });
    expect(accepted.status).toBe(303);
    expect((await sessionOf(billing)).account).toMatchObject({ id: accountId, role: 'billing' });

    // No keys: not the page, not the API.
    expect((await billing.req('GET', '/keys')).status).toBe(403);
    expect((await billing.api('POST', '/api/keys', { name: 'nope' })).status).toBe(403);
    expect((await billing.api('GET', '/api/keys')).status).toBe(403);
    // Money in: a top-up of the organization, paid on the provider's page, credited to the organization.
    const balancePage = await billing.req('GET', '/balance');
    expect(balancePage.text).toContain('action="/balance/quote"');
    const started = await billing.api('POST', '/api/top-ups', { amount_usd: '10', provider: 'stripe' });
    expect(started.status).toBe(201);
    const { checkout_url: checkout, top_up: topUp } = started.json() as { checkout_url: string; top_up: { id: string } };
    expect((await fetch(checkout, { method: 'POST', body: new URLSearchParams({ outcome: 'paid' }), redirect: 'manual' })).status).toBe(303);
    await until('the top-up credited', async () => (((await billing.api('GET', `/api/top-ups/${topUp.id}`)).json() as { top_up: { state: string } }).top_up.state === 'credited' ? true : undefined), 10_000);
    expect(((await owner.api('GET', '/api/balance')).json() as { balance_micro_usd: number }).balance_micro_usd).toBe(10_000_000);
    expect((await accounts.balance(accountId)).balance).toBe(10_000_000);
    const personal = (await sessionOf(billing)).accounts.find((a) => a.id !== accountId)?.id ?? '';
    expect((await accounts.balance(personal)).balance).toBe(0);
    expect((await topUps.get(accountId, topUp.id)).state).toBe('credited');

    // An admin sees the balance, but the page offers no way to pay and the routes refuse.
    const admin = await invitedMember(owner, 'globex-admin@example.com', 'admin');
    const adminBalance = await admin.req('GET', '/balance');
    expect(adminBalance.status).toBe(200);
    expect(adminBalance.text).not.toContain('action="/balance/quote"');
    expect((await admin.api('POST', '/api/top-ups', { amount_usd: '10', provider: 'stripe' })).status).toBe(403);
  });

  it("a key's cost ceiling per request is managed like its caps: a member sets it on their own keys only, owners and admins on every key, a billing member on none; the gateway applies it", async () => {
    const { owner, accountId } = await organization('cyberdyne-owner@example.com', 'Cyberdyne');
    const admin = await invitedMember(owner, 'cyberdyne-admin@example.com', 'admin');
    const billing = await invitedMember(owner, 'cyberdyne-billing@example.com', 'billing');
    const member = await invitedMember(owner, 'cyberdyne-member@example.com', 'member');
    const ceilingOf = async (keyId: string): Promise<number | undefined> => (await accounts.getKey(accountId, keyId))?.maxCostPerRequest;

    // A member makes a key with a ceiling, then changes it through the JSON API and the edit page's form.
    const made = await member.api('POST', '/api/keys', { name: 'agent', max_cost_per_request_usd: '0.0005' });
    expect(made.status).toBe(201);
    const mine = made.json() as { key: { id: string; max_cost_per_request_micro_usd: number | null }; secret: string };
    expect(mine.key.max_cost_per_request_micro_usd).toBe(500);
    expect((await member.req('GET', `/keys/${mine.key.id}/edit`)).text).toContain(`action="/keys/${mine.key.id}/max-cost"`);
    expect((await member.api('PATCH', `/api/keys/${mine.key.id}`, { max_cost_per_request_usd: '0.0004' })).status).toBe(200);
    expect((await member.req('POST', `/keys/${mine.key.id}/max-cost`, { max_cost_per_request_usd: '0.0003', csrf: member.csrf }, { form: true })).status).toBe(302);
    expect(await ceilingOf(mine.key.id)).toBe(300);

    // Another member's key answers as one that does not exist, and keeps its ceiling.
    const ownerKey = await createKey(owner, 'owner key');
    expect((await owner.api('PATCH', `/api/keys/${ownerKey.id}`, { max_cost_per_request_usd: '0.01' })).status).toBe(200);
    expect((await member.api('PATCH', `/api/keys/${ownerKey.id}`, { max_cost_per_request_usd: '5' })).status).toBe(404);
    expect((await member.req('POST', `/keys/${ownerKey.id}/max-cost`, { max_cost_per_request_usd: '5', csrf: member.csrf }, { form: true })).status).toBe(404);
    expect(await ceilingOf(ownerKey.id)).toBe(10_000);

    // Owners and admins manage every key's ceiling (keys.all); a billing member none (no keys.own).
    expect((await admin.api('PATCH', `/api/keys/${mine.key.id}`, { max_cost_per_request_usd: '0.0002' })).status).toBe(200);
    expect((await owner.req('POST', `/keys/${mine.key.id}/max-cost`, { max_cost_per_request_usd: '0.0005', csrf: owner.csrf }, { form: true })).status).toBe(302);
    expect(await ceilingOf(mine.key.id)).toBe(500);
    expect((await billing.api('PATCH', `/api/keys/${mine.key.id}`, { max_cost_per_request_usd: null })).status).toBe(403);
    expect((await billing.req('POST', `/keys/${mine.key.id}/max-cost`, { max_cost_per_request_usd: '', csrf: billing.csrf }, { form: true })).status).toBe(403);
    expect(await ceilingOf(mine.key.id)).toBe(500);

    // The gateway holds the member's key to it: the output limit sent is lowered to fit.
    const client = new OpenAI({ apiKey: mine.secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const { response } = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2_000 }).withResponse();
    expect(Number(response.headers.get('x-tollgate-max-tokens'))).toBeLessThan(2_000);
  });

  it('removing a member revokes the keys they made (the gateway refuses them); their usage stays on record, and their session falls back to their own account', async () => {
    const { owner, accountId } = await organization('initech-owner@example.com', 'Initech');
    const member = await invitedMember(owner, 'initech-member@example.com', 'member');
    const key = await createKey(member, 'leaving key');
    const spare = await createKey(member, 'second key');
    const requestId = await served(key.openai, owner);
    const memberId = (await sessionOf(member)).user.id;

    const removed = await owner.req('POST', `/members/${memberId}/remove`, { csrf: owner.csrf }, { form: true });
    expect(removed.status).toBe(303);
    expect((await owner.req('GET', '/members?removed=1')).text).not.toContain('initech-member@example.com');
    // Both keys revoked, through the account service (the gateway's key cache is told).
    for (const k of [key, spare]) expect((await accounts.getKey(accountId, k.id))?.revokedAt).toBeDefined();
    await expect(key.openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 5 })).rejects.toMatchObject({ status: 401 });
    // The usage stays on the organization's record.
    expect(((await owner.api('GET', `/api/usage?request_id=${requestId}`)).json() as { usage: Array<{ key_id: string }> }).usage.map((u) => u.key_id)).toEqual([key.id]);
    // The removed member's session acts on their personal account now; the organization is out of reach.
    const after = await sessionOf(member);
    expect(after.account?.kind).toBe('personal');
    expect(after.accounts.map((a) => a.id)).not.toContain(accountId);
    expect((await member.api('POST', '/api/session/account', { account_id: accountId })).status).toBe(404);
    expect(await keyIds(member)).toEqual([]);
    // A key whose making was under way when the removal swept the member's keys: revoked as it is made.
    const late = { user: { id: memberId, email: 'initech-member@example.com', role: 'holder' as const, accountId: after.account?.id ?? '', emailVerified: true, totpEnabled: false }, member: { accountId, role: 'member' as const, organization: 'Initech' } };
    await expect(service.keys.createKey(late, 'made late', {})).rejects.toMatchObject({ status: 403 });
    const made = (await accounts.listKeys(accountId)).filter((k) => k.name === 'made late');
    expect(made.map((k) => k.revokedAt !== undefined)).toEqual([true]);
  });

  it('roles change only by the rules: the last owner stays, an admin cannot touch an owner, ownership is transferred', async () => {
    const { owner, accountId } = await organization('hooli-owner@example.com', 'Hooli', 0);
    const admin = await invitedMember(owner, 'hooli-admin@example.com', 'admin');
    const member = await invitedMember(owner, 'hooli-member@example.com', 'member');
    const ids = Object.fromEntries((((await owner.api('GET', '/api/members')).json() as { members: Array<{ user_id: string; email: string }> }).members).map((m) => [m.email, m.user_id]));
    const ownerId = ids['hooli-owner@example.com'] ?? '';
    // The only owner can neither step down nor leave.
    expect((await owner.api('PATCH', `/api/members/${ownerId}`, { role: 'admin' })).status).toBe(409);
    expect((await owner.api('POST', '/api/organization/leave')).status).toBe(409);
    // An admin manages members, but not owners, and cannot make one.
    expect((await admin.api('PATCH', `/api/members/${ids['hooli-member@example.com']}`, { role: 'billing' })).status).toBe(200);
    expect((await admin.api('PATCH', `/api/members/${ownerId}`, { role: 'member' })).status).toBe(403);
    expect((await admin.api('DELETE', `/api/members/${ownerId}`)).status).toBe(403);
    expect((await admin.api('PATCH', `/api/members/${ids['hooli-member@example.com']}`, { role: 'owner' })).status).toBe(403);
    expect((await admin.api('POST', '/api/invitations', { email: 'hooli-boss@example.com', role: 'owner' })).status).toBe(403);
    // Transfer from the settings page: the admin becomes owner, the old owner an admin.
    const settings = await owner.req('GET', '/organization');
    expect(settings.text).toContain('Transfer ownership');
    expect((await owner.req('POST', '/organization/transfer', { user_id: ids['hooli-admin@example.com'] ?? '', csrf: owner.csrf }, { form: true })).status).toBe(303);
    const roles = Object.fromEntries((((await admin.api('GET', '/api/members')).json() as { members: Array<{ email: string; role: string }> }).members).map((m) => [m.email, m.role]));
    expect(roles).toEqual({ 'hooli-admin@example.com': 'owner', 'hooli-owner@example.com': 'admin', 'hooli-member@example.com': 'billing' });
    expect((await owner.req('GET', '/organization')).text).not.toContain('Transfer ownership');
    // Deleted once empty, from the settings page (the name typed out); keys revoked, members gone.
    const key = await createKey(admin, 'hooli key');
    expect((await admin.req('POST', '/organization/delete', { confirm: 'not the name', csrf: admin.csrf }, { form: true })).status).toBe(400);
    expect((await admin.req('POST', '/organization/delete', { confirm: 'Hooli', csrf: admin.csrf }, { form: true })).status).toBe(303);
    expect((await accounts.getKey(accountId, key.id))?.revokedAt).toBeDefined();
    for (const c of [owner, admin, member]) expect((await sessionOf(c)).accounts.map((a) => a.id)).not.toContain(accountId);
  });

  it('an organization with money in it is not deleted: the owner is told what it holds', async () => {
    const { owner } = await organization('umbrella-owner@example.com', 'Umbrella', 1_500_000);
    const page = await owner.req('GET', '/organization');
    expect(page.text).toContain('It still holds <strong>$1.500000</strong>');
    expect(page.text).not.toContain('action="/organization/delete"');
    const refused = await owner.api('DELETE', '/api/organization');
    expect(refused.status).toBe(409);
    expect((refused.json() as { error: { message: string } }).error.message).toContain('still holds 1.500000 USD');
    expect((await sessionOf(owner)).account?.name).toBe('Umbrella');
  });
});

describe('invitations', () => {
  it('work once, expire after their time, stop when revoked or replaced, and only for the invited address', async () => {
    const { owner } = await organization('vandelay-owner@example.com', 'Vandelay', 0);
    // Used once: the second use is refused, on the page and the API.
    const first = await invitedMember(owner, 'vandelay-a@example.com', 'member');
    const used = await mailedInvitation('vandelay-a@example.com');
    const again = await new DashboardClient(base).req('GET', used.path);
    expect(again.status).toBe(410);
    expect(again.text).toContain('used already');
    expect((await first.api('POST', '/api/invitations/accept', { token: used.token })).status).toBe(410);

    // Expired: a week later the link no longer works, and sign-up with it is refused.
    expect((await owner.api('POST', '/api/invitations', { email: 'vandelay-b@example.com', role: 'member' })).status).toBe(201);
    const late = await mailedInvitation('vandelay-b@example.com');
    const row = (await tdb.db.query<{ expires_at: Date; created_at: Date }>("SELECT expires_at, created_at FROM invitations WHERE email = 'vandelay-b@example.com'")).rows[0];
    expect(Math.round(((row?.expires_at.getTime() ?? 0) - (row?.created_at.getTime() ?? 0)) / 86_400_000)).toBe(7);
    await tdb.db.query("UPDATE invitations SET expires_at = now() - interval '1 second' WHERE email = 'vandelay-b@example.com'");
    const expired = await new DashboardClient(base).req('GET', late.path);
    expect(expired.status).toBe(410);
    expect(expired.text).toContain('has expired');
    expect((await new DashboardClient(base).req('POST', '/api/sign-up', { email: 'vandelay-b@example.com', password: PASSWORD, invitation: late.token })).status).toBe(410);
    expect(((await owner.api('GET', '/api/invitations')).json() as { invitations: unknown[] }).invitations).toEqual([]);

    // Revoked from the Members page: the link stops working.
    expect((await owner.api('POST', '/api/invitations', { email: 'vandelay-c@example.com', role: 'billing' })).status).toBe(201);
    const withdrawn = await mailedInvitation('vandelay-c@example.com');
    const pending = ((await owner.api('GET', '/api/invitations')).json() as { invitations: Array<{ id: string; email: string }> }).invitations;
    expect(pending.map((i) => i.email)).toEqual(['vandelay-c@example.com']);
    expect((await owner.req('POST', `/members/invitations/${pending[0]?.id ?? ''}/revoke`, { csrf: owner.csrf }, { form: true })).status).toBe(303);
    expect((await new DashboardClient(base).req('GET', withdrawn.path)).status).toBe(410);

    // Invited again: the earlier link stops, the new one works.
    expect((await owner.api('POST', '/api/invitations', { email: 'vandelay-d@example.com', role: 'member' })).status).toBe(201);
    const older = await mailedInvitation('vandelay-d@example.com');
    expect((await owner.api('POST', '/api/invitations', { email: 'vandelay-d@example.com', role: 'admin' })).status).toBe(201);
    const newer = await mailedInvitation('vandelay-d@example.com');
    expect((await new DashboardClient(base).req('GET', older.path)).status).toBe(410);
    // Only the invited address: someone else signed in is told so, and cannot accept it.
    const stranger = await holder('stranger@example.com');
    expect((await stranger.req('GET', newer.path)).text).toContain('this invitation is for vandelay-d@example.com');
    expect((await stranger.api('POST', '/api/invitations/accept', { token: newer.token })).status).toBe(403);
    const d = new DashboardClient(base);
    expect((await d.req('POST', '/api/sign-up', { email: 'vandelay-d@example.com', password: PASSWORD, invitation: newer.token })).status).toBe(201);
    expect((await sessionOf(d)).account?.role).toBe('admin');
    // A member already there cannot be invited again.
    expect((await owner.api('POST', '/api/invitations', { email: 'vandelay-d@example.com', role: 'member' })).status).toBe(409);
  });
});

describe('the permission table on every route', () => {
  /** Every route behind the session guard: method, path and the guard it names first (if any). */
  function routeTable(): Array<{ method: string; path: string; guard: RouteGuard | undefined; guards: number }> {
    // Every path of ours is a string (no RegExp routes).
    const router = guardedRoutes({ service, secureCookie: false, topUps }, { cookie: sessionCookie(false), linkBase: base });
    return router.stack
      .filter((layer) => layer.methods.length > 0)
      .flatMap((layer) =>
        layer.methods
          .filter((m) => m !== 'HEAD')
          .map((method) => ({ method, path: String(layer.path), guard: guardOf(layer.stack[0]), guards: layer.stack.filter((mw) => guardOf(mw) !== undefined).length })),
      );
  }

  it('every route of the app names one check as its first middleware: a permission of the table, a signed-in user, or the deployment admin', () => {
    const routes = routeTable();
    expect(routes.length).toBeGreaterThan(60);
    expect(routes.filter((r) => r.guard === undefined || r.guards !== 1).map((r) => `${r.method} ${r.path}`)).toEqual([]);
    // The state-changing routes of an account all check a permission (signed-in only: the user's own business).
    const own = routes.filter((r) => r.guard?.kind === 'signed-in' && r.method !== 'GET').map((r) => r.path);
    expect(own.every((p) => /^\/(api\/)?(sign-out|sign-out-everywhere|resend-verification|account\/|session\/account|organizations|invitations\/)/.test(p)), own.join(', ')).toBe(true);
  });

  it('each role is refused (403) on every route whose permission its role lacks, pages and JSON API alike, before anything runs', async () => {
    const { owner } = await organization('table-owner@example.com', 'Table', 0);
    const as: Record<MemberRole, DashboardClient> = {
      owner,
      admin: await invitedMember(owner, 'table-admin@example.com', 'admin'),
      billing: await invitedMember(owner, 'table-billing@example.com', 'billing'),
      member: await invitedMember(owner, 'table-member@example.com', 'member'),
    };
    const before = (await tdb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM account_memberships')).rows[0]?.n;
    let refused = 0;
    for (const r of routeTable()) {
      const path = r.path.replace(/:(\w+)/g, 'x');
      const lacking = r.guard?.kind === 'permission' ? MEMBER_ROLES.filter((role) => !can(role, r.guard?.kind === 'permission' ? r.guard.permission : 'models.view')) : r.guard?.kind === 'deployment-admin' ? MEMBER_ROLES : [];
      for (const role of lacking) {
        const c = as[role];
        const res = path.startsWith('/api/') ? await c.api(r.method, path, r.method === 'GET' ? undefined : {}) : await c.req(r.method, path, r.method === 'GET' ? undefined : { csrf: c.csrf }, { form: true });
        expect(res.status, `${r.method} ${r.path} as ${role}`).toBe(403);
        if (r.guard?.kind === 'permission') expect(res.text, `${r.method} ${r.path} as ${role}`).toContain(`(${role}) cannot`);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(60);
    // Nothing changed: the members are as they were.
    expect((await tdb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM account_memberships')).rows[0]?.n).toBe(before);
  });
});

describe("a key's owner", () => {
  it('is kept on the Redis hot path with the key, and read back from the record once Redis lost it', async () => {
    const hot = createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-1` });
    const recorded = recordedBackend(hot, tdb.db, 'tg', { rebuildWindowMs: 0, keySweepMs: 0 });
    onTestFinished(() => recorded.ledger.close());
    const account = await recorded.accounts.createAccount('redis-owner@example.com');
    const user = await service.provisioning.upsertUser('redis-owner@example.com', PASSWORD, account.id);
    const { record } = await recorded.accounts.createKey(account.id, { name: 'owned', ownerId: user.id });
    expect((await hot.accounts.getKey(account.id, record.id))?.ownerId).toBe(user.id);
    expect((await tdb.db.query<{ owner_user_id: string }>('SELECT owner_user_id FROM api_keys WHERE id = $1', [record.id])).rows[0]?.owner_user_id).toBe(user.id);
    // A revoke rewrites the key's hash: the owner stays.
    await recorded.accounts.revokeKey(account.id, record.id);
    expect((await hot.accounts.getKey(account.id, record.id))?.ownerId).toBe(user.id);
    // Redis loses the key: the record gives it back, owner and all.
    const keys = await testRedis.redis.keys(`${testRedis.namespace}-1*`);
    await testRedis.redis.del(...keys);
    expect((await recorded.accounts.getKey(account.id, record.id))?.ownerId).toBe(user.id);
    expect((await hot.accounts.getKey(account.id, record.id))?.ownerId).toBe(user.id);
  });
});

describe('the migration', () => {
  it('makes every existing user the owner of the account they had, and gives a single user\'s keys to them', async () => {
    const db = await openPglite();
    try {
      await migrate(db, loadMigrations().filter((m) => m.name < '026'));
      await db.query("INSERT INTO accounts (id, name) VALUES ('acct_solo', 'solo'), ('acct_shared', 'shared')");
      await db.query(`INSERT INTO dashboard_users (id, email, password_hash, role, account_id) VALUES
        ('usr_solo', 'solo@example.com', 'h', 'holder', 'acct_solo'), ('usr_a', 'a@example.com', 'h', 'admin', 'acct_shared'), ('usr_b', 'b@example.com', 'h', 'admin', 'acct_shared')`);
      await db.query(`INSERT INTO api_keys (id, account_id, secret_hash, display_prefix, last_four, name) VALUES
        ('key_solo', 'acct_solo', 'h1', 'sk-tg-a', 'aaaa', 'solo'), ('key_shared', 'acct_shared', 'h2', 'sk-tg-b', 'bbbb', 'shared')`);
      expect(await migrate(db)).toContain('026_organizations.sql');
      const members = await db.query<{ account_id: string; user_id: string; role: string }>('SELECT account_id, user_id, role FROM account_memberships ORDER BY user_id');
      expect(members.rows).toEqual([
        { account_id: 'acct_shared', user_id: 'usr_a', role: 'owner' },
        { account_id: 'acct_shared', user_id: 'usr_b', role: 'owner' },
        { account_id: 'acct_solo', user_id: 'usr_solo', role: 'owner' },
      ]);
      const keys = await db.query<{ id: string; owner_user_id: string | null; version: number; hot_version: number }>('SELECT id, owner_user_id, version::int AS version, hot_version::int AS hot_version FROM api_keys ORDER BY id');
      // The owned key is pushed to the hot path again (its version is ahead), so Redis learns its owner.
      expect(keys.rows).toEqual([
        { id: 'key_shared', owner_user_id: null, version: 1, hot_version: 1 },
        { id: 'key_solo', owner_user_id: 'usr_solo', version: 2, hot_version: 1 },
      ]);
    } finally {
      await db.close();
    }
  });
});
