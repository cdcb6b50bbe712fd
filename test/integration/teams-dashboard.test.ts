// Teams and budgets over real HTTP: the dashboard's pages and JSON API against a gateway on Redis
// journaling to a real PostgreSQL, the official SDKs as clients. Owners and admins create teams, set
// their budgets and members, and set members' budgets; a member sees only their teams and their own
// budgets and puts their own keys only in a team they are in; a request past a team's or a member's
// budget is refused 402 naming that budget in the client's format; GET /v1/key lists the limits on the
// key's path with what is left of each; alerts at 80% and 100% of a budget reach the owners and admins
// (and the member, of their own), once per crossing.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccountService } from '../../src/account-service/account-service.js';
import { checkAlerts } from '../../src/dashboard/alerts.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import type { Harness } from '../helpers/gateway-harness.js';
import { startGatewayDashboard, type GatewayDashboard } from '../helpers/gateway-dashboard.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('teamsdash');
const PASSWORD = 'correct horse battery';
const MODEL = 'outlaw-1-xploded';
let harness: Harness;
let accounts: AccountService;
let dash: { url: string; close(): Promise<void> };
const base = (): string => dash.url;

let world: GatewayDashboard | undefined;

beforeAll(async () => {
  world = await startGatewayDashboard(tdb.db, { ledger: 'redis', applyCommitted: true, wideThrottles: true });
  ({ harness, accounts, dash } = world);
});

afterAll(async () => {
  await world?.close();
});

async function holder(email: string): Promise<DashboardClient> {
  const c = new DashboardClient(base);
  await c.signUpConfirmed(tdb.db, email, PASSWORD);
  return c;
}

/** An organization with an admin, two members, and money. */
async function organization(prefix: string, name: string) {
  const owner = await holder(`${prefix}-owner@example.com`);
  const created = await owner.api('POST', '/api/organizations', { name });
  expect(created.status).toBe(201);
  const accountId = (created.json() as { account: { id: string } }).account.id;
  await accounts.credit(accountId, 5_000_000, `seed-${accountId}`);
  const join = async (who: string, role: string): Promise<{ c: DashboardClient; id: string }> => {
    const email = `${prefix}-${who}@example.com`;
    expect((await owner.api('POST', '/api/invitations', { email, role })).status).toBe(201);
    const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", [email]);
    const token = /\/invitations\/([A-Za-z0-9_-]{40,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? '';
    const c = new DashboardClient(base);
    const r = await c.req('POST', '/api/sign-up', { email, password: PASSWORD, invitation: token });
    expect(r.status).toBe(201);
    c.csrf = (r.json() as { csrf_token: string }).csrf_token;
    const me = (await c.api('GET', '/api/session')).json() as { user: { id: string } };
    return { c, id: me.user.id };
  };
  return { owner, accountId, admin: await join('admin', 'admin'), alice: await join('alice', 'member'), bob: await join('bob', 'member') };
}

interface TeamBody {
  id: string;
  name: string;
  monthly_budget_micro_usd: number | null;
  lifetime_budget_micro_usd: number | null;
  month_spent_micro_usd: number;
  members: Array<{ user_id: string; email: string }>;
  keys: number;
}

const teamsOf = async (c: DashboardClient): Promise<TeamBody[]> => ((await c.api('GET', '/api/teams')).json() as { teams: TeamBody[] }).teams;

describe('teams and budgets in the dashboard', () => {
  it('owners and admins manage teams and budgets; a member sees only their teams and their own budgets, and puts their own keys only in their teams', async () => {
    const { owner, admin, alice, bob } = await organization('manage', 'Manage Co');
    const created = await owner.api('POST', '/api/teams', { name: 'search', monthly_budget_usd: '500.00' });
    expect(created.status).toBe(201);
    const search = (created.json() as { team: TeamBody }).team;
    expect(search).toMatchObject({ name: 'search', monthly_budget_micro_usd: 500_000_000, lifetime_budget_micro_usd: null, month_spent_micro_usd: 0, members: [], keys: 0 });
    expect((await owner.api('POST', '/api/teams', { name: 'Search' })).status).toBe(409);
    expect((await owner.api('POST', '/api/teams', { name: '' })).status).toBe(400);
    expect((await owner.api('POST', '/api/teams', { name: 'x', monthly_budget_usd: 'lots' })).status).toBe(400);
    // An admin manages them too: a second team, its budget changed, a member added.
    const infra = ((await admin.c.api('POST', '/api/teams', { name: 'infra' })).json() as { team: TeamBody }).team;
    const patched = await admin.c.api('PATCH', `/api/teams/${infra.id}`, { lifetime_budget_usd: '20.00' });
    expect((patched.json() as { team: TeamBody }).team).toMatchObject({ name: 'infra', lifetime_budget_micro_usd: 20_000_000 });
    expect((await admin.c.api('PUT', `/api/teams/${search.id}/members/${alice.id}`)).status).toBe(200);
    expect((await admin.c.api('PUT', `/api/teams/${search.id}/members/not-a-member`)).status).toBe(404);
    // A member can do none of it.
    expect((await alice.c.api('POST', '/api/teams', { name: 'mine' })).status).toBe(403);
    expect((await alice.c.api('PATCH', `/api/members/${alice.id}/budgets`, { monthly_budget_usd: '1000' })).status).toBe(403);

    // Members' budgets: set by the owner; each member sees their own only, owners and admins everyone's.
    const set = await owner.api('PATCH', `/api/members/${alice.id}/budgets`, { monthly_budget_usd: '20.00' });
    expect((set.json() as { member: Record<string, unknown> }).member).toMatchObject({ user_id: alice.id, monthly_budget_micro_usd: 20_000_000, lifetime_budget_micro_usd: null });
    const seenBy = async (c: DashboardClient): Promise<string[]> => ((await c.api('GET', '/api/budgets')).json() as { members: Array<{ email: string }> }).members.map((m) => m.email).sort();
    expect(await seenBy(alice.c)).toEqual(['manage-alice@example.com']);
    expect(await seenBy(admin.c)).toHaveLength(4);
    // Teams: alice sees the one she is in, bob none; the owner both.
    expect((await teamsOf(alice.c)).map((t) => t.name)).toEqual(['search']);
    expect(await teamsOf(bob.c)).toEqual([]);
    expect((await teamsOf(owner)).map((t) => t.name)).toEqual(['infra', 'search']);
    expect((await bob.c.api('GET', `/api/teams/${search.id}`)).status).toBe(404);

    // Keys: alice makes one in her team, not in another; bob cannot put his in hers; the owner can.
    const inSearch = await alice.c.api('POST', '/api/keys', { name: 'alice search', team_id: search.id });
    expect(inSearch.status).toBe(201);
    expect((inSearch.json() as { key: { team: unknown } }).key.team).toEqual({ id: search.id, name: 'search' });
    expect((await alice.c.api('POST', '/api/keys', { name: 'alice infra', team_id: infra.id })).status).toBe(403);
    const bobKey = ((await bob.c.api('POST', '/api/keys', { name: 'bob' })).json() as { key: { id: string } }).key;
    expect((await bob.c.api('PATCH', `/api/keys/${bobKey.id}`, { team_id: search.id })).status).toBe(403);
    const moved = await owner.api('PATCH', `/api/keys/${bobKey.id}`, { team_id: infra.id });
    expect((moved.json() as { key: { team: unknown } }).key.team).toEqual({ id: infra.id, name: 'infra' });
    expect((await bob.c.api('PATCH', `/api/keys/${bobKey.id}`, { team_id: null })).status).toBe(200);
    expect((await teamsOf(owner)).map((t) => [t.name, t.keys])).toEqual([['infra', 0], ['search', 1]]);

    // The pages: Teams (the owner's controls, alice's view without them), budgets on Members.
    const page = await owner.req('GET', '/teams');
    expect(page.text).toContain('Create a team');
    expect(page.text).toContain('search');
    const alicePage = await alice.c.req('GET', '/teams');
    expect(alicePage.text).not.toContain('Create a team');
    expect(alicePage.text).not.toContain('infra');
    const members = await owner.req('GET', '/members');
    expect(members.text).toContain('id="member-budgets"');
    expect(members.text).toContain('$0.000000 of $20.000000');
    const byForm = await owner.req('POST', `/members/${bob.id}/budgets`, { csrf: owner.csrf, lifetime_budget_usd: '3.50', monthly_budget_usd: '' }, { form: true });
    expect(byForm.status).toBe(303);
    expect(((await owner.api('GET', '/api/budgets')).json() as { members: Array<{ user_id: string; lifetime_budget_micro_usd: number | null }> }).members.find((m) => m.user_id === bob.id)?.lifetime_budget_micro_usd).toBe(3_500_000);
    const deleted = await owner.req('POST', `/teams/${infra.id}/delete`, { csrf: owner.csrf }, { form: true });
    expect(deleted.status).toBe(303);
    expect((await teamsOf(owner)).map((t) => t.name)).toEqual(['search']);
  });

  it('a request past a team budget or a member budget is refused 402 naming it, in the OpenAI and the Anthropic format', async () => {
    const { owner, alice } = await organization('refuse', 'Refuse Co');
    const search = ((await owner.api('POST', '/api/teams', { name: 'search', monthly_budget_usd: '0' })).json() as { team: TeamBody }).team;
    await owner.api('PUT', `/api/teams/${search.id}/members/${alice.id}`);
    const key = ((await alice.c.api('POST', '/api/keys', { name: 'k', team_id: search.id })).json() as { secret: string }).secret;
    const openai = new OpenAI({ apiKey: key, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const anthropic = new Anthropic({ apiKey: key, baseURL: harness.baseUrl, maxRetries: 0 });
    const teamWords = "The search team's monthly budget of 0.00 USD is used up; an owner or admin can raise it in the dashboard.";
    const chat = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 }).catch((e: unknown) => e);
    expect(chat).toBeInstanceOf(OpenAI.APIError);
    expect((chat as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
    expect((chat as InstanceType<typeof OpenAI.APIError>).message).toContain(teamWords);
    expect((chat as InstanceType<typeof OpenAI.APIError>).code).toBe('team_monthly_budget_reached');
    const msg = await anthropic.messages.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 }).catch((e: unknown) => e);
    expect(msg).toBeInstanceOf(Anthropic.APIError);
    expect((msg as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
    expect((msg as InstanceType<typeof Anthropic.APIError>).message).toContain(teamWords);

    // Room in the team, none left of alice's own: her budget is named, in her organization's name.
    await owner.api('PATCH', `/api/teams/${search.id}`, { monthly_budget_usd: null });
    await owner.api('PATCH', `/api/members/${alice.id}/budgets`, { monthly_budget_usd: '0' });
    const mine = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 }).catch((e: unknown) => e);
    expect((mine as InstanceType<typeof OpenAI.APIError>).message).toContain('Your monthly budget of 0.00 USD in Refuse Co is used up; ask an owner or admin to raise it.');
    // Some left, less than the worst case: the amounts, and a smaller output limit that fits.
    await owner.api('PATCH', `/api/members/${alice.id}/budgets`, { monthly_budget_usd: '0.0001' });
    const close = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1000 }).catch((e: unknown) => e);
    expect((close as InstanceType<typeof OpenAI.APIError>).message).toMatch(/^402 Your monthly budget of 0\.0001 USD in Refuse Co is too close to be reached for this request: its worst case is 0\.0010\d+ USD and 0\.000100 USD is left\. A smaller output limit would fit: max_tokens \d+ or less\.$/);
    // Raised: served.
    await owner.api('PATCH', `/api/members/${alice.id}/budgets`, { monthly_budget_usd: '5' });
    const ok = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 });
    expect(ok.choices.length).toBe(1);
  });

  it("alerts at 80% and 100% of a team's budget go to the owners and admins, of a member's budget to them and the member, once per crossing", async () => {
    const { owner, accountId, alice } = await organization('alerts', 'Alerts Co');
    const search = ((await owner.api('POST', '/api/teams', { name: 'search' })).json() as { team: TeamBody }).team;
    await owner.api('PUT', `/api/teams/${search.id}/members/${alice.id}`);
    const key = ((await alice.c.api('POST', '/api/keys', { name: 'k', team_id: search.id })).json() as { secret: string }).secret;
    const openai = new OpenAI({ apiKey: key, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    for (let i = 0; i < 3; i++) await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 });
    // The record's spend: what alerts are measured by.
    const spent = await until('the spend on record', async () => {
      const r = await tdb.db.query<{ spent: number; n: number }>("SELECT COALESCE(sum(cost), 0)::bigint AS spent, count(*)::int AS n FROM usage_records WHERE account_id = $1 AND status = 'completed'", [accountId]);
      return r.rows[0]?.n === 3 ? Number(r.rows[0].spent) : undefined;
    });
    const mails = async (subject: string): Promise<string[]> =>
      (await tdb.db.query<{ recipient: string }>('SELECT recipient FROM email_outbox WHERE subject = $1 ORDER BY recipient', [subject])).rows.map((r) => r.recipient);
    // At exactly the budget: both marks crossed, each mailed once.
    await owner.api('PATCH', `/api/teams/${search.id}`, { monthly_budget_usd: (spent / 1_000_000).toFixed(6) });
    await owner.api('PATCH', `/api/members/${alice.id}/budgets`, { lifetime_budget_usd: (Math.ceil(spent / 0.9) / 1_000_000).toFixed(6) });
    await checkAlerts(tdb.db);
    await checkAlerts(tdb.db);
    const team80 = 'The search team has used 80% of its monthly budget';
    const team100 = 'The search team has used 100% of its monthly budget';
    const alice80 = 'alerts-alice@example.com has used 80% of their lifetime budget';
    expect(await mails(team80)).toEqual(['alerts-admin@example.com', 'alerts-owner@example.com']);
    expect(await mails(team100)).toEqual(['alerts-admin@example.com', 'alerts-owner@example.com']);
    expect(await mails(alice80)).toEqual(['alerts-admin@example.com', 'alerts-alice@example.com', 'alerts-owner@example.com']);
    expect(await mails('alerts-alice@example.com has used 100% of their lifetime budget')).toEqual([]);
    // Raised above both marks: the crossing is forgotten; brought back under them, it mails again.
    await owner.api('PATCH', `/api/teams/${search.id}`, { monthly_budget_usd: '100' });
    await checkAlerts(tdb.db);
    await owner.api('PATCH', `/api/teams/${search.id}`, { monthly_budget_usd: (Math.ceil(spent / 0.85) / 1_000_000).toFixed(6) });
    await checkAlerts(tdb.db);
    expect(await mails(team80)).toHaveLength(4);
    expect(await mails(team100)).toHaveLength(2);
  });

  it('GET /v1/key lists every limit of money on the key\'s path, its team by name, and what is left of each; remaining is the least of them', async () => {
    const { owner, alice } = await organization('standing', 'Standing Co');
    const search = ((await owner.api('POST', '/api/teams', { name: 'search', monthly_budget_usd: '3.00', lifetime_budget_usd: '100' })).json() as { team: TeamBody }).team;
    await owner.api('PUT', `/api/teams/${search.id}/members/${alice.id}`);
    await owner.api('PATCH', `/api/members/${alice.id}/budgets`, { lifetime_budget_usd: '2.50' });
    const key = ((await alice.c.api('POST', '/api/keys', { name: 'k', team_id: search.id, monthly_cap_usd: '4' })).json() as { secret: string }).secret;
    const openai = new OpenAI({ apiKey: key, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 });
    const res = await fetch(`${harness.baseUrl}/v1/key`, { headers: { authorization: `Bearer ${key}` } });
    const data = ((await res.json()) as { data: { remaining: number; team: unknown; micros: { remaining: number }; limits: Array<{ id: string; scope: string; scope_name?: string; window: string; micros: { limit: number | null; used: number; remaining: number | null } }> } }).data;
    expect(data.team).toEqual({ id: search.id, name: 'search' });
    expect(data.limits.map((l) => [l.id, l.scope, l.window])).toEqual([
      ['insufficient_balance', 'account', 'lifetime'],
      ['team_lifetime_budget_reached', 'team', 'lifetime'],
      ['team_monthly_budget_reached', 'team', 'month'],
      ['member_lifetime_budget_reached', 'member', 'lifetime'],
      ['member_monthly_budget_reached', 'member', 'month'],
      ['key_lifetime_cap_reached', 'key', 'lifetime'],
      ['key_monthly_cap_reached', 'key', 'month'],
    ]);
    const by = new Map(data.limits.map((l) => [l.id, l]));
    const spent = by.get('team_monthly_budget_reached')?.micros.used ?? 0;
    expect(spent).toBeGreaterThan(0);
    expect(by.get('team_monthly_budget_reached')).toMatchObject({ scope_name: 'search', micros: { limit: 3_000_000, used: spent, remaining: 3_000_000 - spent } });
    expect(by.get('member_lifetime_budget_reached')?.micros).toEqual({ limit: 2_500_000, used: spent, remaining: 2_500_000 - spent });
    expect(by.get('member_monthly_budget_reached')?.micros).toEqual({ limit: null, used: spent, remaining: null });
    // The member's lifetime budget has the least left: it is what the key can still spend.
    expect(data.micros.remaining).toBe(2_500_000 - spent);
  });
});
