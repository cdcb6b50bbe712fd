// docs/dashboard-openapi.yaml against the real dashboard: every /api route the app serves is in the
// file, every operation in the file is called here for real (over HTTP, with a gateway journaling to a
// real PostgreSQL, and top-ups on the test-mode providers), and every response is checked against the
// schema the file gives for its status.
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import OpenAI from 'openai';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { createDashboardApp } from '../../src/dashboard/app.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { startTestModePayments, type TestModePayments } from '../../src/top-ups/payments-config.js';
import { TopUpService } from '../../src/top-ups/service.js';
import { topUpWebhooks } from '../../src/top-ups/webhooks.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: object }> }>;
}
interface OpenApiDoc {
  paths: Record<string, Record<string, Operation>>;
  components: object;
}

const doc = parse(readFileSync(new URL('../../docs/dashboard-openapi.yaml', import.meta.url), 'utf8')) as OpenApiDoc;
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
const tdb = useTestDatabase('dashapi');
let harness: Harness;
let payments: TestModePayments;
let service: DashboardService;
let topUps: TopUpService;
let dash: { url: string; close(): Promise<void> };
const exercised = new Set<string>();
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** The documented operation a concrete call hits: its template and schema, or a failure. */
function check(method: string, path: string, status: number, text: string, contentType: string): void {
  const bare = path.split('?')[0] ?? '';
  // A literal path (/api/invitations/accept) before a template that would also match it (/api/invitations/{id}).
  const template = Object.keys(doc.paths)
    .sort((x, y) => x.split('{').length - y.split('{').length)
    .find((t) => new RegExp(`^${t.replace(/\./g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`).test(bare));
  expect(template, `${method} ${bare} is not in the OpenAPI file`).toBeDefined();
  const op = doc.paths[template ?? '']?.[method.toLowerCase()];
  expect(op, `${method} ${template} is not in the OpenAPI file`).toBeDefined();
  const response = op?.responses[String(status)];
  expect(response, `${method} ${template} answered ${status}, which the file does not list: ${text.slice(0, 200)}`).toBeDefined();
  exercised.add(`${method.toLowerCase()} ${template}`);
  const schema = response?.content?.['application/json']?.schema;
  if (schema === undefined) return;
  expect(contentType).toMatch(/application\/json/);
  const validate = ajv.compile({ ...schema, components: doc.components });
  const body: unknown = JSON.parse(text);
  expect(validate(body), `${method} ${template} ${status}: ${JSON.stringify(validate.errors)} in ${text.slice(0, 300)}`).toBe(true);
}

class CheckedClient extends DashboardClient {
  override async req(...args: Parameters<DashboardClient['req']>): ReturnType<DashboardClient['req']> {
    const r = await super.req(...args);
    const [method, path] = args;
    if (path.startsWith('/api/')) check(method, path, r.status, r.text, r.res.headers.get('content-type') ?? '');
    return r;
  }
}

beforeAll(async () => {
  harness = await startHarness({ record: tdb.db });
  payments = await startTestModePayments();
  const ledger = harness.backend.ledger as RecordedLedger;
  let url = '';
  const accounts = new AccountService({ accounts: harness.backend.accounts, ledger, onRevoke: () => harness.gateway.authenticator.forget(), applyCommitted: (m, r) => ledger.applyCommitted(m, r) });
  topUps = new TopUpService({ db: tdb.db, providers: payments.providers, accounts, publicUrl: () => url });
  service = new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000 });
  const books = reconcileSources(tdb.db, harness.backend, undefined, undefined);
  dash = await startDashboard({ service, secureCookie: false, topUps, webhooks: topUpWebhooks(topUps), reconcile: () => reconcile(books), models: () => harness.catalog.current() }, 0, '127.0.0.1');
  url = dash.url;
  payments.deliverTo(dash.url);
  const operators = await harness.backend.accounts.createAccount('operators');
  await service.provisioning.upsertUser('openapi-admin@example.com', 'an admin password', operators.id, 'admin');
});

afterAll(async () => {
  await dash?.close();
  await payments?.close();
  await harness?.close();
});

describe('the dashboard API matches docs/dashboard-openapi.yaml', () => {
  it('every /api route is documented', () => {
    const app = createDashboardApp({ service, secureCookie: false, topUps });
    const served = (app.middleware as unknown as Array<{ router?: { stack: Array<{ path: string; methods: string[] }> } }>)
      .flatMap((m) => m.router?.stack ?? [])
      .filter((l) => l.path.startsWith('/api/'))
      .flatMap((l) => l.methods.filter((m) => m !== 'HEAD').map((m) => `${m.toLowerCase()} ${l.path.replace(/:(\w+)/g, '{$1}')}`));
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m} ${p}`));
    expect(served.sort()).toEqual([...new Set(documented)].sort());
  });

  it('every documented operation answers as documented', async () => {
    const base = (): string => dash.url;
    const h = new CheckedClient(base);
    const signUp = await h.req('POST', '/api/sign-up', { email: 'openapi@example.com', password: 'correct horse battery' });
    h.csrf = (signUp.json() as { csrf_token: string }).csrf_token;
    expect((await h.req('POST', '/api/sign-up', { email: 'bad', password: 'x' })).status).toBe(400);
    // Keys and top-ups wait for the address: a new link, then the link followed through the API.
    expect((await h.api('POST', '/api/keys', { name: 'too soon' })).status).toBe(403);
    expect((await h.api('POST', '/api/top-ups/quote', { amount_usd: '10' })).status).toBe(403);
    expect((await h.api('POST', '/api/top-ups', { amount_usd: '10', provider: 'stripe' })).status).toBe(403);
    expect((await h.api('POST', '/api/resend-verification')).status).toBe(202);
    expect((await h.req('POST', '/api/verify-email/not-a-token')).status).toBe(400);
    const link = await DashboardClient.confirmationPath(tdb.db, 'openapi@example.com');
    expect((await h.req('POST', `/api${link}`)).status).toBe(204);
    const anon = new CheckedClient(base);
    expect((await anon.req('POST', '/api/sign-in', { email: 'openapi@example.com', password: 'wrong password!' })).status).toBe(401);
    const session = (await h.api('GET', '/api/session')).json() as { user: { account_id: string } };
    const accountId = session.user.account_id;
    const created = (await h.api('POST', '/api/keys', { name: 'api', monthly_cap_usd: '3' })).json() as { key: { id: string }; secret: string };
    await h.api('GET', '/api/keys');
    await h.api('GET', `/api/keys/${created.key.id}`);
    await h.api('PATCH', `/api/keys/${created.key.id}`, { monthly_cap_usd: '4' });
    await h.api('PATCH', `/api/keys/${created.key.id}`, { requests_per_minute: 60, lifetime_cap_usd: null });
    expect((await h.api('PATCH', `/api/keys/${created.key.id}`, { monthly_cap_usd: 'lots' })).status).toBe(400);
    expect((await h.api('GET', '/api/keys/key_nope')).status).toBe(404);

    const root = new CheckedClient(base);
    root.csrf = ((await root.req('POST', '/api/sign-in', { email: 'openapi-admin@example.com', password: 'an admin password' })).json() as { csrf_token: string }).csrf_token;
    await root.api('POST', `/api/admin/accounts/${accountId}/credit`, { amount_usd: '5', idempotency_key: 'openapi-credit' });
    expect((await root.api('POST', `/api/admin/accounts/${accountId}/credit`, { amount_usd: '6', idempotency_key: 'openapi-credit' })).status).toBe(409);
    expect((await h.api('GET', '/api/admin/accounts')).status).toBe(403);
    await root.api('GET', '/api/admin/accounts');

    const openai = new OpenAI({ apiKey: created.secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const res = await openai.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }).withResponse();
    const requestId = res.response.headers.get('x-request-id') ?? '';
    await until('recorded', async () => (((await h.api('GET', `/api/usage?request_id=${requestId}`)).json() as { usage: unknown[] }).usage.length === 1 ? true : undefined), 10_000);
    await h.api('GET', '/api/usage');
    expect((await h.api('GET', '/api/usage?status=nope')).status).toBe(400);
    await h.api('GET', '/api/usage.csv');
    await h.api('GET', '/api/usage/daily');
    const me = ((await h.api('GET', '/api/session')).json() as { user: { id: string } }).user.id;
    const byMember = (await h.api('GET', `/api/usage/totals?group=member&member=${me}`)).json() as { groups: Array<{ id: string | null; requests: number }> };
    expect(byMember.groups.map((g) => g.requests).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    await h.api('GET', '/api/usage/totals?group=team');
    expect((await h.api('GET', '/api/usage/totals?group=nobody')).status).toBe(400);
    await h.api('GET', '/api/models');
    await h.api('GET', '/api/balance');
    await h.api('GET', '/api/statement?limit=5');
    expect((await h.api('GET', '/api/statement?cursor=x')).status).toBe(400);

    const t1 = (await h.api('POST', '/api/refund-tickets', { request_id: requestId, reason: 'checking the API' })).json() as { ticket: { id: string } };
    expect((await h.api('POST', '/api/refund-tickets', { request_id: requestId, reason: 'again please' })).status).toBe(409);
    expect((await h.api('POST', '/api/refund-tickets', { request_id: 'req_nope', reason: 'unknown one' })).status).toBe(404);
    expect((await h.api('POST', '/api/refund-tickets', { request_id: requestId, reason: '' })).status).toBe(400);
    await h.api('GET', '/api/refund-tickets');
    await h.api('GET', `/api/refund-tickets/${t1.ticket.id}`);
    expect((await h.api('GET', '/api/refund-tickets/rt_nope')).status).toBe(404);
    await root.api('GET', '/api/admin/refund-tickets');
    await root.api('POST', `/api/admin/refund-tickets/${t1.ticket.id}/decline`, { note: 'fine as it was' });
    expect((await root.api('POST', `/api/admin/refund-tickets/${t1.ticket.id}/approve`)).status).toBe(409);
    expect((await root.api('POST', '/api/admin/refund-tickets/rt_nope/approve')).status).toBe(404);
    await root.api('GET', '/api/admin/reconciliation');
    const holderId = (await tdb.db.query<{ id: string }>("SELECT id FROM dashboard_users WHERE email = 'openapi@example.com'")).rows[0]?.id ?? '';
    expect(((await root.api('POST', `/api/admin/accounts/${accountId}/users/${holderId}/clear-two-factor`)).json() as { cleared: boolean }).cleared).toBe(false);
    expect((await root.api('POST', `/api/admin/accounts/${accountId}/users/usr_nope/clear-two-factor`)).status).toBe(404);
    expect((await h.api('POST', `/api/admin/accounts/${accountId}/users/${holderId}/clear-two-factor`)).status).toBe(403);

    await h.api('POST', '/api/top-ups/quote', { amount_usd: '10' });
    expect((await h.api('POST', '/api/top-ups/quote', { amount_usd: '4.99' })).status).toBe(400);
    const topUp = (await h.api('POST', '/api/top-ups', { amount_usd: '10', provider: 'stripe' })).json() as { top_up: { id: string } };
    expect((await h.api('POST', '/api/top-ups', { amount_usd: '10', provider: 'paypal' })).status).toBe(400);
    await h.api('GET', '/api/top-ups');
    await h.api('GET', `/api/top-ups/${topUp.top_up.id}`);
    await h.api('POST', `/api/top-ups/${topUp.top_up.id}/recheck`);
    expect((await h.api('GET', '/api/top-ups/tu_nope')).status).toBe(404);
    expect(((await h.api('POST', `/api/top-ups/${topUp.top_up.id}/cancel`)).json() as { top_up: { state: string } }).top_up.state).toBe('cancelled');
    expect((await h.api('POST', `/api/top-ups/${topUp.top_up.id}/cancel`)).status).toBe(409);
    expect((await h.api('POST', '/api/top-ups/tu_nope/cancel')).status).toBe(404);

    await root.api('POST', `/api/admin/accounts/${accountId}/keys/${created.key.id}/revoke`);
    expect((await root.api('POST', `/api/admin/accounts/${accountId}/keys/key_nope/revoke`)).status).toBe(404);
    await h.api('POST', `/api/keys/${created.key.id}/revoke`);

    await anon.req('POST', '/api/password-reset', { email: 'openapi@example.com' });
    expect((await anon.req('POST', '/api/password-reset/not-a-token', { password: 'a long new password' })).status).toBe(400);
    const mail = await tdb.db.query<{ body: string }>(`SELECT body FROM email_outbox WHERE recipient = 'openapi@example.com' AND subject LIKE 'Reset%'`);
    const token = /password-reset\/([A-Za-z0-9_-]{20,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? '';
    expect((await anon.req('POST', `/api/password-reset/${token}`, { password: 'a long new password' })).status).toBe(204);
    const again = new CheckedClient(base);
    again.csrf = ((await again.req('POST', '/api/sign-in', { email: 'openapi@example.com', password: 'a long new password' })).json() as { csrf_token: string }).csrf_token;
    await again.api('POST', '/api/sign-out-everywhere');
    expect((await again.api('GET', '/api/session')).status).toBe(401);
    await root.api('POST', '/api/sign-out');

    await organizationsThroughTheApi(base, root, anon);

    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m} ${p}`));
    expect(documented.filter((op) => !exercised.has(op))).toEqual([]);
  }, 60_000);
});

/** The token of the newest invitation mailed to an address (read from the outbox, as the invitee would). */
async function invitationToken(email: string): Promise<string> {
  const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", [email]);
  const token = /\/invitations\/([A-Za-z0-9_-]{20,})/.exec(mail.rows[0]?.body ?? '')?.[1];
  expect(token, `an invitation mailed to ${email}`).toBeDefined();
  return token ?? '';
}

/** Signed in through the API: the CSRF token and the user's id. */
async function signedIn(c: CheckedClient, r: { status: number; json: () => unknown }, status: number): Promise<string> {
  expect(r.status).toBe(status);
  const body = r.json() as { csrf_token: string; user: { id: string } };
  c.csrf = body.csrf_token;
  return body.user.id;
}

/** Every team and budget operation, by the owner, and what a member may see and do. */
async function teamsThroughTheApi(owner: CheckedClient, member: CheckedClient, memberId: string): Promise<void> {
  const team = ((await owner.api('POST', '/api/teams', { name: 'oa-search', monthly_budget_usd: '500.00' })).json() as { team: { id: string } }).team;
  expect((await owner.api('POST', '/api/teams', { name: 'OA-Search' })).status).toBe(409);
  expect((await owner.api('POST', '/api/teams', { name: '' })).status).toBe(400);
  expect((await member.api('POST', '/api/teams', { name: 'mine' })).status).toBe(403);
  await owner.api('GET', '/api/teams');
  await owner.api('GET', `/api/teams/${team.id}`);
  expect((await member.api('GET', `/api/teams/${team.id}`)).status).toBe(404);
  await owner.api('PATCH', `/api/teams/${team.id}`, { name: 'oa-search-2', lifetime_budget_usd: '1000' });
  expect((await owner.api('PATCH', `/api/teams/${team.id}`, { monthly_budget_usd: 'lots' })).status).toBe(400);
  expect((await owner.api('PATCH', '/api/teams/team_nope', { name: 'x' })).status).toBe(404);
  expect((await member.api('PATCH', `/api/teams/${team.id}`, { name: 'x' })).status).toBe(403);
  const other = ((await owner.api('POST', '/api/teams', { name: 'oa-other' })).json() as { team: { id: string } }).team;
  expect((await owner.api('PATCH', `/api/teams/${other.id}`, { name: 'OA-SEARCH-2' })).status).toBe(409);
  await owner.api('PUT', `/api/teams/${team.id}/members/${memberId}`);
  expect((await owner.api('PUT', `/api/teams/${team.id}/members/usr_nope`)).status).toBe(404);
  expect((await member.api('PUT', `/api/teams/${team.id}/members/${memberId}`)).status).toBe(403);
  await member.api('GET', '/api/teams');
  const key = ((await member.api('POST', '/api/keys', { name: 'in a team', team_id: team.id })).json() as { key: { id: string } }).key;
  expect((await member.api('POST', '/api/keys', { name: 'not my team', team_id: other.id })).status).toBe(403);
  await member.api('PATCH', `/api/keys/${key.id}`, { team_id: null });
  await owner.api('GET', '/api/budgets');
  await member.api('GET', '/api/budgets');
  await owner.api('PATCH', `/api/members/${memberId}/budgets`, { monthly_budget_usd: '20.00' });
  expect((await owner.api('PATCH', `/api/members/${memberId}/budgets`, { monthly_budget_usd: 'lots' })).status).toBe(400);
  expect((await owner.api('PATCH', '/api/members/usr_nope/budgets', { monthly_budget_usd: '1' })).status).toBe(404);
  expect((await member.api('PATCH', `/api/members/${memberId}/budgets`, { monthly_budget_usd: '1' })).status).toBe(403);
  await owner.api('DELETE', `/api/teams/${team.id}/members/${memberId}`);
  expect((await member.api('DELETE', `/api/teams/${team.id}/members/${memberId}`)).status).toBe(403);
  await owner.api('DELETE', `/api/teams/${team.id}`);
  expect((await owner.api('DELETE', `/api/teams/${team.id}`)).status).toBe(404);
  expect((await member.api('DELETE', `/api/teams/${other.id}`)).status).toBe(403);
  expect((await owner.api('DELETE', `/api/teams/${team.id}/members/${memberId}`)).status).toBe(404);
}

/** Every organization and member operation: create, invite, join three ways, roles, transfer, leave, delete. */
async function organizationsThroughTheApi(base: () => string, root: CheckedClient, anon: CheckedClient): Promise<void> {
  const pw = 'correct horse battery';
  const owner = new CheckedClient(base);
  const ownerId = await signedIn(owner, await owner.req('POST', '/api/sign-in', { email: 'openapi@example.com', password: 'a long new password' }), 200);
  expect((await owner.api('GET', '/api/organization')).status).toBe(409);
  await owner.api('GET', '/api/accounts');
  expect((await owner.api('POST', '/api/organizations', { name: '' })).status).toBe(400);
  const org = ((await owner.api('POST', '/api/organizations', { name: 'OpenAPI Org' })).json() as { account: { id: string } }).account;
  await owner.api('GET', '/api/organization');
  await owner.api('PATCH', '/api/organization', { name: 'OpenAPI Org Renamed' });
  expect((await owner.api('PATCH', '/api/organization', { name: '' })).status).toBe(400);

  // A member joins by signing up with the invitation; a wrong address, a used and an unknown token are refused.
  await owner.api('POST', '/api/invitations', { email: 'oa-member@example.com', role: 'member' });
  expect((await owner.api('POST', '/api/invitations', { email: 'not an address', role: 'member' })).status).toBe(400);
  expect((await owner.api('POST', '/api/invitations', { email: 'openapi@example.com', role: 'member' })).status).toBe(409);
  await owner.api('GET', '/api/invitations');
  const memberToken = await invitationToken('oa-member@example.com');
  expect((await anon.req('POST', '/api/sign-up', { email: 'oa-stranger@example.com', password: pw, invitation: memberToken })).status).toBe(403);
  const member = new CheckedClient(base);
  const memberId = await signedIn(member, await member.req('POST', '/api/sign-up', { email: 'oa-member@example.com', password: pw, invitation: memberToken }), 201);
  expect((await anon.req('POST', '/api/sign-up', { email: 'oa-member@example.com', password: pw, invitation: memberToken })).status).toBe(410);
  expect((await anon.req('POST', '/api/sign-up', { email: 'oa-nobody@example.com', password: pw, invitation: 'no-such-invitation' })).status).toBe(404);
  await member.api('GET', '/api/members');
  await teamsThroughTheApi(owner, member, memberId);
  for (const [method, path] of [['GET', '/api/invitations'], ['GET', '/api/balance'], ['PATCH', '/api/organization'], ['POST', '/api/invitations'], ['DELETE', '/api/invitations/inv_x'], ['DELETE', '/api/organization']] as const) {
    expect((await member.api(method, path, method === 'GET' ? undefined : {})).status, `${method} ${path} as a member`).toBe(403);
  }

  // A billing member signs up on their own first, then accepts while signed in.
  await owner.api('POST', '/api/invitations', { email: 'oa-billing@example.com', role: 'billing' });
  const billingToken = await invitationToken('oa-billing@example.com');
  const billing = new CheckedClient(base);
  const billingId = await signedIn(billing, await billing.req('POST', '/api/sign-up', { email: 'oa-billing@example.com', password: pw }), 201);
  expect((await billing.api('POST', '/api/organizations', { name: 'Too soon' })).status).toBe(403);
  expect((await billing.api('POST', '/api/invitations/accept', {})).status).toBe(400);
  expect((await billing.api('POST', '/api/invitations/accept', { token: 'no-such-invitation' })).status).toBe(404);
  await billing.api('POST', '/api/invitations/accept', { token: billingToken });
  expect((await billing.api('POST', '/api/invitations/accept', { token: billingToken })).status).toBe(410);
  expect((await billing.api('GET', '/api/keys')).status).toBe(403);

  // The operator signs in with an invitation; one for another address is refused; one is revoked.
  await owner.api('POST', '/api/invitations', { email: 'openapi-admin@example.com', role: 'admin' });
  const adminToken = await invitationToken('openapi-admin@example.com');
  const someoneElse = ((await owner.api('POST', '/api/invitations', { email: 'oa-else@example.com', role: 'member' })).json() as { invitation: { id: string } }).invitation;
  const elseToken = await invitationToken('oa-else@example.com');
  expect((await root.req('POST', '/api/sign-in', { email: 'openapi-admin@example.com', password: 'an admin password', invitation: elseToken })).status).toBe(403);
  await signedIn(root, await root.req('POST', '/api/sign-in', { email: 'openapi-admin@example.com', password: 'an admin password', invitation: adminToken }), 200);
  expect((await root.req('POST', '/api/sign-in', { email: 'openapi-admin@example.com', password: 'an admin password', invitation: adminToken })).status).toBe(410);
  expect((await root.req('POST', '/api/sign-in', { email: 'openapi-admin@example.com', password: 'an admin password', invitation: 'no-such-invitation' })).status).toBe(404);
  root.csrf = ((await root.req('POST', '/api/sign-in', { email: 'openapi-admin@example.com', password: 'an admin password' })).json() as { csrf_token: string }).csrf_token;
  expect((await owner.api('POST', '/api/invitations/accept', { token: elseToken })).status).toBe(403);
  expect((await owner.api('DELETE', `/api/invitations/${someoneElse.id}`)).status).toBe(204);
  expect((await owner.api('DELETE', `/api/invitations/${someoneElse.id}`)).status).toBe(404);

  // Roles: changed by an owner; the last owner stays; an admin cannot touch an owner.
  await owner.api('PATCH', `/api/members/${memberId}`, { role: 'admin' });
  expect((await owner.api('PATCH', `/api/members/${memberId}`, { role: 'king' })).status).toBe(400);
  expect((await owner.api('PATCH', '/api/members/usr_nope', { role: 'member' })).status).toBe(404);
  expect((await owner.api('PATCH', `/api/members/${ownerId}`, { role: 'member' })).status).toBe(409);
  expect((await member.api('PATCH', `/api/members/${ownerId}`, { role: 'member' })).status).toBe(403);
  expect((await member.api('DELETE', `/api/members/${ownerId}`)).status).toBe(403);
  expect((await owner.api('DELETE', `/api/members/${ownerId}`)).status).toBe(409);
  await owner.api('DELETE', `/api/members/${billingId}`);
  expect((await owner.api('DELETE', `/api/members/${billingId}`)).status).toBe(404);

  // Ownership moves to the member (now owner); the old owner, an admin, cannot move it back, and leaves.
  expect((await owner.api('POST', '/api/organization/transfer', {})).status).toBe(400);
  expect((await owner.api('POST', '/api/organization/transfer', { user_id: 'usr_nope' })).status).toBe(404);
  await owner.api('POST', '/api/organization/transfer', { user_id: memberId });
  expect((await owner.api('POST', '/api/organization/transfer', { user_id: memberId })).status).toBe(403);
  await owner.api('POST', '/api/organization/leave');
  expect((await member.api('POST', '/api/organization/leave')).status).toBe(409);

  // Deleted only with nothing left in it: a credited organization says what it holds.
  const spare = ((await member.api('POST', '/api/organizations', { name: 'OpenAPI Spare' })).json() as { account: { id: string } }).account;
  await root.api('POST', `/api/admin/accounts/${spare.id}/credit`, { amount_usd: '1', idempotency_key: 'openapi-spare' });
  expect((await member.api('DELETE', '/api/organization')).status).toBe(409);
  expect((await member.api('POST', '/api/session/account', { account_id: 'acct_nope' })).status).toBe(404);
  await member.api('POST', '/api/session/account', { account_id: org.id });
  await member.api('DELETE', '/api/organization');
}
