// Every state-changing route writes the audit log (issue 40's Done-when): the dashboard's and the admin
// API's route tables are walked, a route missing from the table of calls below fails the test, and each
// route is called for real (real PostgreSQL, real HTTP, the official openai client for the requests a
// refund needs, the fake Stripe behind the real `stripe` client) and must leave at least one entry whose
// request_id is the one the call was answered with (X-Request-Id), naming the caller. The few routes
// that change nothing recorded are listed with the reason, and are checked to write nothing. The CLI,
// which calls the admin API, is run as a process: its changes are the CLI's (actor_kind 'cli').
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { createAdminApp } from '../../src/admin/admin-api.js';
import { startAdminServer } from '../../src/admin/server.js';
import { createDashboardApp } from '../../src/dashboard/app.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { AttemptThrottle } from '../../src/dashboard/throttle.js';
import { totpCode } from '../../src/dashboard/totp.js';
import type { Listening } from '../../src/http/listen.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { AutoTopUps } from '../../src/top-ups/auto-top-up.js';
import { startFakeStripe, type FakeStripe } from '../../src/top-ups/fakes/fake-stripe.js';
import type { PaymentProvider, SavedCards } from '../../src/top-ups/provider.js';
import { stripeProvider } from '../../src/top-ups/providers/stripe.js';
import { TopUpService } from '../../src/top-ups/service.js';
import { topUpWebhooks } from '../../src/top-ups/webhooks.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { freePort } from '../helpers/redis-server.js';
import { useTestDatabase } from '../helpers/test-database.js';

const run = promisify(execFile);
const tdb = useTestDatabase('audit_routes');
const PASSWORD = 'correct horse battery';
const NEW_PASSWORD = 'a long new password';
const ADMIN_TOKEN = 'audit-routes-admin-token';
const WEBHOOK_SECRET = 'whsec_audit_routes';
const USER_AGENT = 'audit-walk/1.0';
let harness: Harness;
let stripe: FakeStripe;
let service: DashboardService;
let topUps: TopUpService;
let autoTopUps: AutoTopUps;
let dash: { url: string; close(): Promise<void> };
let admin: Listening;

const STATE_CHANGING = ['POST', 'PUT', 'PATCH', 'DELETE'];

/** The state-changing routes of an app's routers (@koa/router's route table), as "METHOD /path". */
function stateChangingRoutes(app: { middleware: unknown[] }): string[] {
  return (app.middleware as Array<{ router?: { stack: Array<{ path: string | RegExp; methods: string[] }> } }>)
    .flatMap((m) => m.router?.stack ?? [])
    .flatMap((l) => l.methods.filter((m) => STATE_CHANGING.includes(m)).map((m) => `${m} ${String(l.path)}`));
}

/** An answer: its status, its request id (X-Request-Id) and its body. */
interface Answer {
  status: number;
  requestId: string;
  text: string;
  json: () => unknown;
}

const answerOf = async (r: ReturnType<DashboardClient['req']>): Promise<Answer> => {
  const a = await r;
  return { status: a.status, requestId: a.res.headers.get('x-request-id') ?? '', text: a.text, json: a.json };
};

/** Everything the walk makes and later calls need: the people, their ids, what they made. */
interface Walk {
  anon: DashboardClient;
  holder: DashboardClient;
  holderId: string;
  holderAccount: string;
  page: DashboardClient;
  pageId: string;
  pageAccount: string;
  root: DashboardClient;
  alice: DashboardClient;
  aliceId: string;
  bob: DashboardClient;
  bobId: string;
  ids: Record<string, string>;
  recoveryCodes: string[];
  keySecret: string;
}
const w = {} as Walk;

const client = (): DashboardClient => new DashboardClient(() => dash.url, { 'user-agent': USER_AGENT });

/** The session's CSRF token (a page client signed in by a form has not seen it). */
async function withCsrf(c: DashboardClient): Promise<DashboardClient> {
  const r = await c.req('GET', '/api/session');
  expect(r.status).toBe(200);
  c.csrf = (r.json() as { csrf_token: string }).csrf_token;
  return c;
}

const form = (c: DashboardClient, path: string, fields: Record<string, string> = {}): Promise<Answer> => answerOf(c.req('POST', path, { csrf: c.csrf, ...fields }, { form: true }));
const api = (c: DashboardClient, method: string, path: string, body?: object): Promise<Answer> => answerOf(c.api(method, path, body));

async function userId(email: string): Promise<string> {
  return (await tdb.db.query<{ id: string }>('SELECT id FROM dashboard_users WHERE email = $1', [email])).rows[0]?.id ?? '';
}

async function accountOf(email: string): Promise<string> {
  return (await tdb.db.query<{ account_id: string }>('SELECT account_id FROM dashboard_users WHERE email = $1', [email])).rows[0]?.account_id ?? '';
}

/** The token of the newest mail to `email` whose subject starts with `subject`, from the link at `path`. */
async function mailedToken(email: string, subject: string, path: string): Promise<string> {
  const mail = await tdb.db.query<{ body: string }>('SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE $2 ORDER BY id DESC LIMIT 1', [email, `${subject}%`]);
  const token = new RegExp(`/${path}/([A-Za-z0-9_-]{20,})`).exec(mail.rows[0]?.body ?? '')?.[1];
  expect(token, `a ${path} link mailed to ${email}`).toBeDefined();
  return token ?? '';
}

/** A signed-up (and confirmed) user in a client of their own, with their id. */
async function newUser(email: string): Promise<{ c: DashboardClient; id: string }> {
  const c = client();
  await c.signUpConfirmed(tdb.db, email, PASSWORD);
  return { c, id: await userId(email) };
}

/** An invitation to the holder's organization, accepted through the API by `who` (set-up, not a call under test). */
async function joinOrganization(who: DashboardClient, email: string, role: string): Promise<void> {
  expect((await w.holder.api('POST', '/api/invitations', { email, role })).status).toBe(201);
  const token = await mailedToken(email, 'You are invited', 'invitations');
  expect((await who.api('POST', '/api/invitations/accept', { token })).status).toBe(200);
}

/** A request made with the holder's key, recorded: its id (the refunds need one each). */
async function spentRequest(): Promise<string> {
  const openai = new OpenAI({ apiKey: w.keySecret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
  const res = await openai.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }).withResponse();
  const requestId = res.response.headers.get('x-request-id') ?? '';
  await until('recorded', async () => ((await tdb.db.query('SELECT 1 FROM usage_records WHERE request_id = $1', [requestId])).rowCount === 1 ? true : undefined), 10_000);
  return requestId;
}

/** Turns a user's two-factor sign-in on directly (set-up for the operator's clearing of it). */
async function totpOn(email: string): Promise<void> {
  await tdb.db.query("UPDATE dashboard_users SET totp_secret = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', totp_enabled_at = now() WHERE email = $1", [email]);
}

/** A fresh card top-up of the holder's personal account (set-up): its id. */
async function startedTopUp(): Promise<string> {
  return (await topUps.start(w.holderAccount, 1000, 'stripe')).topUp.id;
}

type Call = () => Promise<Answer>;

/**
 * How to call each state-changing route of the dashboard validly, in the order the walk calls them
 * (what one makes, a later one uses). A route added to the app without a line here fails the first test.
 */
const DASHBOARD_CALLS: Record<string, Call> = {
  'POST /api/sign-up': async () => {
    w.holder = client();
    const a = await answerOf(w.holder.req('POST', '/api/sign-up', { email: 'holder@example.com', password: PASSWORD }));
    w.holder.csrf = (a.json() as { csrf_token: string }).csrf_token;
    w.holder.email = 'holder@example.com';
    w.holderId = await userId('holder@example.com');
    w.holderAccount = await accountOf('holder@example.com');
    return a;
  },
  'POST /sign-up': async () => {
    w.page = client();
    const a = await answerOf(w.page.req('POST', '/sign-up', { email: 'page@example.com', password: PASSWORD }, { form: true }));
    await withCsrf(w.page);
    w.pageId = await userId('page@example.com');
    w.pageAccount = await accountOf('page@example.com');
    return a;
  },
  'POST /api/verify-email/:token': async () => answerOf(w.anon.req('POST', `/api/verify-email/${await mailedToken('holder@example.com', 'Confirm', 'verify-email')}`)),
  'POST /api/resend-verification': () => api(w.page, 'POST', '/api/resend-verification'),
  'POST /resend-verification': () => form(w.page, '/resend-verification'),
  'POST /api/password-reset': () => answerOf(w.anon.req('POST', '/api/password-reset', { email: 'holder@example.com' })),
  'POST /password-reset': () => answerOf(w.anon.req('POST', '/password-reset', { email: 'page@example.com' }, { form: true })),
  'POST /api/password-reset/:token': async () =>
    answerOf(w.anon.req('POST', `/api/password-reset/${await mailedToken('holder@example.com', 'Reset', 'password-reset')}`, { password: NEW_PASSWORD })),
  'POST /password-reset/:token': async () =>
    answerOf(w.anon.req('POST', `/password-reset/${await mailedToken('page@example.com', 'Reset', 'password-reset')}`, { password: NEW_PASSWORD }, { form: true })),
  'POST /api/sign-in': async () => {
    const a = await answerOf(w.holder.req('POST', '/api/sign-in', { email: 'holder@example.com', password: NEW_PASSWORD }));
    w.holder.csrf = (a.json() as { csrf_token: string }).csrf_token;
    return a;
  },
  'POST /sign-in': async () => {
    const a = await answerOf(w.page.req('POST', '/sign-in', { email: 'page@example.com', password: NEW_PASSWORD }, { form: true }));
    await withCsrf(w.page);
    return a;
  },

  // The holder's keys, in their personal account.
  'POST /api/keys': async () => {
    const a = await api(w.holder, 'POST', '/api/keys', { name: 'audit-api' });
    const body = a.json() as { key: { id: string }; secret: string };
    w.ids.key = body.key.id;
    w.keySecret = body.secret;
    return a;
  },
  'PATCH /api/keys/:keyId': () => api(w.holder, 'PATCH', `/api/keys/${w.ids.key}`, { monthly_cap_usd: '4' }),
  'POST /keys': async () => {
    const a = await form(w.holder, '/keys', { name: 'audit-page' });
    w.ids.pageKey = (await tdb.db.query<{ id: string }>("SELECT id FROM api_keys WHERE account_id = $1 AND name = 'audit-page'", [w.holderAccount])).rows[0]?.id ?? '';
    return a;
  },
  'POST /keys/rate-limits': () => form(w.holder, '/keys/rate-limits', { requests_per_minute: '120' }),
  'POST /keys/:keyId/caps': () => form(w.holder, `/keys/${w.ids.pageKey}/caps`, { monthly_cap_usd: '7' }),
  'POST /keys/:keyId/max-cost': () => form(w.holder, `/keys/${w.ids.pageKey}/max-cost`, { max_cost_per_request_usd: '0.5' }),
  'POST /keys/:keyId/rate-limits': () => form(w.holder, `/keys/${w.ids.pageKey}/rate-limits`, { requests_per_minute: '30' }),

  // Two-factor sign-in of the page user: on, new recovery codes (a recovery code confirms), off.
  'POST /account/two-factor': async () => {
    const secret = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
    const a = await form(w.page, '/account/two-factor', { password: NEW_PASSWORD, secret, code: totpCode(secret) });
    w.recoveryCodes = a.text.match(/[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}/g) ?? [];
    return a;
  },
  'POST /account/two-factor/recovery-codes': async () => {
    const a = await form(w.page, '/account/two-factor/recovery-codes', { password: NEW_PASSWORD, code: w.recoveryCodes[0] ?? '' });
    w.recoveryCodes = a.text.match(/[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}/g) ?? [];
    return a;
  },
  'POST /account/two-factor/off': () => form(w.page, '/account/two-factor/off', { password: NEW_PASSWORD, code: w.recoveryCodes[0] ?? '' }),

  // Money in, in the holder's personal account.
  'POST /balance/quote': () => form(w.holder, '/balance/quote', { amount_usd: '10' }),
  'POST /api/top-ups/quote': () => api(w.holder, 'POST', '/api/top-ups/quote', { amount_usd: '10' }),
  'POST /api/top-ups': async () => {
    const a = await api(w.holder, 'POST', '/api/top-ups', { amount_usd: '10', provider: 'stripe' });
    w.ids.topUp = (a.json() as { top_up: { id: string } }).top_up.id;
    return a;
  },
  'POST /balance/top-ups': async () => {
    const a = await form(w.holder, '/balance/top-ups', { amount_usd: '10', provider: 'stripe' });
    w.ids.pageTopUp = (await tdb.db.query<{ id: string }>('SELECT id FROM top_ups WHERE account_id = $1 ORDER BY created_at DESC LIMIT 1', [w.holderAccount])).rows[0]?.id ?? '';
    return a;
  },
  'POST /api/top-ups/:id/recheck': () => api(w.holder, 'POST', `/api/top-ups/${w.ids.topUp}/recheck`),
  'POST /top-ups/:id/recheck': () => form(w.holder, `/top-ups/${w.ids.pageTopUp}/recheck`),
  'POST /api/top-ups/:id/cancel': () => api(w.holder, 'POST', `/api/top-ups/${w.ids.topUp}/cancel`),
  'POST /top-ups/:id/cancel': () => form(w.holder, `/top-ups/${w.ids.pageTopUp}/cancel`),
  'POST /balance/auto-top-up/card': () => form(w.holder, '/balance/auto-top-up/card'),
  'POST /balance/auto-top-up': () => form(w.holder, '/balance/auto-top-up', { threshold_usd: '6', amount_usd: '25', monthly_max_usd: '150' }),

  // The deployment's admin: credits, refunds decided, keys revoked, two-factor cleared, a re-check.
  'POST /api/admin/accounts/:accountId/credit': () => api(w.root, 'POST', `/api/admin/accounts/${w.holderAccount}/credit`, { amount_usd: '20', idempotency_key: 'audit-walk-1' }),
  'POST /admin/accounts/:accountId/credit': () => form(w.root, `/admin/accounts/${w.holderAccount}/credit`, { amount_usd: '5', idempotency_key: 'audit-walk-2' }),
  'POST /api/refund-tickets': async () => {
    const a = await api(w.holder, 'POST', '/api/refund-tickets', { request_id: await spentRequest(), reason: 'checking the audit log' });
    w.ids.ticket1 = (a.json() as { ticket: { id: string } }).ticket.id;
    return a;
  },
  'POST /refunds': async () => {
    const requestId = await spentRequest();
    const a = await form(w.holder, '/refunds', { request_id: requestId, reason: 'checking the page' });
    w.ids.ticket2 = (await tdb.db.query<{ id: string }>('SELECT id FROM refund_tickets WHERE request_id = $1', [requestId])).rows[0]?.id ?? '';
    for (const n of [3, 4]) {
      const t = await w.holder.api('POST', '/api/refund-tickets', { request_id: await spentRequest(), reason: `ticket ${n}` });
      w.ids[`ticket${n}`] = (t.json() as { ticket: { id: string } }).ticket.id;
    }
    return a;
  },
  'POST /api/admin/refund-tickets/:ticketId/approve': () => api(w.root, 'POST', `/api/admin/refund-tickets/${w.ids.ticket1}/approve`),
  'POST /admin/refund-tickets/:ticketId/decline': () => form(w.root, `/admin/refund-tickets/${w.ids.ticket2}/decline`, { note: 'no' }),
  'POST /admin/refund-tickets/:ticketId/approve': () => form(w.root, `/admin/refund-tickets/${w.ids.ticket3}/approve`),
  'POST /api/admin/refund-tickets/:ticketId/decline': () => api(w.root, 'POST', `/api/admin/refund-tickets/${w.ids.ticket4}/decline`, { note: 'no' }),
  'POST /admin/top-ups/:topUpId/recheck': async () => form(w.root, `/admin/top-ups/${await startedTopUp()}/recheck`),
  'POST /api/admin/accounts/:accountId/keys/:keyId/revoke': () => api(w.root, 'POST', `/api/admin/accounts/${w.holderAccount}/keys/${w.ids.pageKey}/revoke`),
  'POST /admin/accounts/:accountId/keys/:keyId/revoke': async () => {
    const k = (await w.holder.api('POST', '/api/keys', { name: 'revoked by the admin page' })).json() as { key: { id: string } };
    return form(w.root, `/admin/accounts/${w.holderAccount}/keys/${k.key.id}/revoke`);
  },
  'POST /api/keys/:keyId/revoke': () => api(w.holder, 'POST', `/api/keys/${w.ids.key}/revoke`),
  'POST /keys/:keyId/revoke': async () => {
    const k = (await w.holder.api('POST', '/api/keys', { name: 'revoked by its page' })).json() as { key: { id: string } };
    return form(w.holder, `/keys/${k.key.id}/revoke`);
  },
  'POST /admin/accounts/:accountId/users/:userId/clear-two-factor': async () => {
    await totpOn('page@example.com');
    return form(w.root, `/admin/accounts/${w.pageAccount}/users/${w.pageId}/clear-two-factor`);
  },
  'POST /api/admin/accounts/:accountId/users/:userId/clear-two-factor': async () => {
    await totpOn('page@example.com');
    return api(w.root, 'POST', `/api/admin/accounts/${w.pageAccount}/users/${w.pageId}/clear-two-factor`);
  },
  'POST /admin/reconciliation': () => form(w.root, '/admin/reconciliation'),

  // An organization: made, its members invited, joined, given roles and budgets, teams, settings, left, deleted.
  'POST /api/organizations': async () => {
    // The clearing of two-factor sign-in ended the page user's sessions.
    expect((await w.page.req('POST', '/sign-in', { email: 'page@example.com', password: NEW_PASSWORD }, { form: true })).status).toBe(302);
    await withCsrf(w.page);
    const a = await api(w.holder, 'POST', '/api/organizations', { name: 'Audit Org' });
    w.ids.org = (a.json() as { account: { id: string } }).account.id;
    return a;
  },
  'POST /organizations': async () => {
    const a = await form(w.page, '/organizations', { name: 'Page Org' });
    w.ids.pageOrg = (await tdb.db.query<{ account_id: string }>("SELECT account_id FROM organizations WHERE name = 'Page Org'")).rows[0]?.account_id ?? '';
    return a;
  },
  'POST /account/switch': () => form(w.holder, '/account/switch', { account_id: w.holderAccount }),
  'POST /api/session/account': () => api(w.holder, 'POST', '/api/session/account', { account_id: w.ids.org }),
  'POST /api/invitations': () => api(w.holder, 'POST', '/api/invitations', { email: 'alice@example.com', role: 'member' }),
  'POST /members/invite': () => form(w.holder, '/members/invite', { email: 'bob@example.com', role: 'member' }),
  'POST /api/invitations/accept': async () => {
    const alice = await newUser('alice@example.com');
    w.alice = alice.c;
    w.aliceId = alice.id;
    return api(w.alice, 'POST', '/api/invitations/accept', { token: await mailedToken('alice@example.com', 'You are invited', 'invitations') });
  },
  'POST /invitations/:token/accept': async () => {
    const bob = await newUser('bob@example.com');
    w.bob = bob.c;
    w.bobId = bob.id;
    return form(w.bob, `/invitations/${await mailedToken('bob@example.com', 'You are invited', 'invitations')}/accept`);
  },
  'DELETE /api/invitations/:id': async () => {
    const inv = (await w.holder.api('POST', '/api/invitations', { email: 'carol@example.com', role: 'member' })).json() as { invitation: { id: string } };
    return api(w.holder, 'DELETE', `/api/invitations/${inv.invitation.id}`);
  },
  'POST /members/invitations/:id/revoke': async () => {
    const inv = (await w.holder.api('POST', '/api/invitations', { email: 'dave@example.com', role: 'member' })).json() as { invitation: { id: string } };
    return form(w.holder, `/members/invitations/${inv.invitation.id}/revoke`);
  },
  'PATCH /api/members/:userId': () => api(w.holder, 'PATCH', `/api/members/${w.aliceId}`, { role: 'admin' }),
  'POST /members/:userId/role': () => form(w.holder, `/members/${w.bobId}/role`, { role: 'billing' }),
  'PATCH /api/members/:userId/budgets': () => api(w.holder, 'PATCH', `/api/members/${w.aliceId}/budgets`, { monthly_budget_usd: '20' }),
  'POST /members/:userId/budgets': () => form(w.holder, `/members/${w.aliceId}/budgets`, { monthly_budget_usd: '10' }),
  'POST /api/teams': async () => {
    const a = await api(w.holder, 'POST', '/api/teams', { name: 'team-api' });
    w.ids.team = (a.json() as { team: { id: string } }).team.id;
    return a;
  },
  'POST /teams': async () => {
    const a = await form(w.holder, '/teams', { name: 'team-page' });
    w.ids.pageTeam = (await tdb.db.query<{ id: string }>("SELECT id FROM teams WHERE name = 'team-page'")).rows[0]?.id ?? '';
    return a;
  },
  'PATCH /api/teams/:teamId': () => api(w.holder, 'PATCH', `/api/teams/${w.ids.team}`, { name: 'team-api-2' }),
  'POST /teams/:teamId': () => form(w.holder, `/teams/${w.ids.pageTeam}`, { monthly_budget_usd: '50' }),
  'PUT /api/teams/:teamId/members/:userId': () => api(w.holder, 'PUT', `/api/teams/${w.ids.team}/members/${w.aliceId}`),
  'POST /teams/:teamId/members': () => form(w.holder, `/teams/${w.ids.pageTeam}/members`, { user_id: w.aliceId }),
  'DELETE /api/teams/:teamId/members/:userId': () => api(w.holder, 'DELETE', `/api/teams/${w.ids.team}/members/${w.aliceId}`),
  'POST /teams/:teamId/members/:userId/remove': () => form(w.holder, `/teams/${w.ids.pageTeam}/members/${w.aliceId}/remove`),
  'POST /keys/:keyId/team': async () => {
    const k = (await w.holder.api('POST', '/api/keys', { name: 'a team key' })).json() as { key: { id: string } };
    return form(w.holder, `/keys/${k.key.id}/team`, { team_id: w.ids.pageTeam ?? '' });
  },
  'DELETE /api/teams/:teamId': () => api(w.holder, 'DELETE', `/api/teams/${w.ids.team}`),
  'POST /teams/:teamId/delete': () => form(w.holder, `/teams/${w.ids.pageTeam}/delete`),
  'PATCH /api/organization': () => api(w.holder, 'PATCH', '/api/organization', { name: 'Audit Org 2' }),
  'POST /organization/name': () => form(w.holder, '/organization/name', { name: 'Audit Org 3' }),
  'POST /organization/transfer': () => form(w.holder, '/organization/transfer', { user_id: w.aliceId }),
  'POST /api/organization/transfer': () => api(w.alice, 'POST', '/api/organization/transfer', { user_id: w.holderId }),
  'DELETE /api/members/:userId': () => api(w.holder, 'DELETE', `/api/members/${w.bobId}`),
  'POST /members/:userId/remove': async () => {
    await joinOrganization(w.bob, 'bob@example.com', 'member');
    return form(w.holder, `/members/${w.bobId}/remove`);
  },
  'POST /organization/leave': async () => {
    await joinOrganization(w.page, 'page@example.com', 'member');
    return form(w.page, '/organization/leave');
  },
  'POST /api/organization/leave': () => api(w.alice, 'POST', '/api/organization/leave'),
  'DELETE /api/organization': () => api(w.holder, 'DELETE', '/api/organization'),
  'POST /organization/delete': async () => {
    expect((await w.page.api('POST', '/api/session/account', { account_id: w.ids.pageOrg })).status).toBe(200);
    return form(w.page, '/organization/delete', { confirm: 'Page Org' });
  },

  'POST /api/sign-out-everywhere': () => api(w.alice, 'POST', '/api/sign-out-everywhere'),
  'POST /sign-out-everywhere': () => form(w.bob, '/sign-out-everywhere'),
  'POST /api/sign-out': () => api(w.holder, 'POST', '/api/sign-out'),
  'POST /sign-out': () => form(w.page, '/sign-out'),
};

/** Routes that change nothing the audit log records, and why; the walk checks they write nothing. */
const NO_CHANGE: Record<string, string> = {
  'POST /balance/quote': 'a quote is computed and shown; nothing is stored',
  'POST /api/top-ups/quote': 'a quote is computed and answered; nothing is stored',
  'POST /admin/reconciliation': 'runs a reconciliation and shows its report: it compares the books and changes none',
  'POST /account/switch': "chooses which of the user's own accounts this browser session shows; no account, key, role or money changes",
  'POST /api/session/account': "chooses which of the user's own accounts this session acts on; no account, key, role or money changes",
};

/** The admin API's calls, in order (its bearer token is the caller). */
const adminHeaders = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', 'user-agent': USER_AGENT };
async function adminCall(method: string, path: string, body?: object): Promise<Answer> {
  const res = await fetch(`${admin.url}/admin${path}`, { method, headers: adminHeaders, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  return { status: res.status, requestId: res.headers.get('x-request-id') ?? '', text, json: () => JSON.parse(text) as unknown };
}

const ADMIN_CALLS: Record<string, Call> = {
  'POST /admin/accounts': async () => {
    const a = await adminCall('POST', '/accounts', { name: 'made by the admin API' });
    w.ids.adminAccount = (a.json() as { id: string }).id;
    return a;
  },
  'POST /admin/accounts/:accountId/keys': async () => {
    const a = await adminCall('POST', `/accounts/${w.ids.adminAccount}/keys`, { name: 'admin key' });
    w.ids.adminKey = (a.json() as { record: { id: string } }).record.id;
    return a;
  },
  'PATCH /admin/accounts/:accountId/keys/:keyId': () => adminCall('PATCH', `/accounts/${w.ids.adminAccount}/keys/${w.ids.adminKey}`, { monthly_cap_usd: '3' }),
  'PUT /admin/accounts/:accountId/keys/:keyId/caps': () => adminCall('PUT', `/accounts/${w.ids.adminAccount}/keys/${w.ids.adminKey}/caps`, { lifetime_cap_usd: '9' }),
  'PUT /admin/accounts/:accountId/keys/:keyId/max-cost-per-request': () => adminCall('PUT', `/accounts/${w.ids.adminAccount}/keys/${w.ids.adminKey}/max-cost-per-request`, { max_cost_per_request_usd: '1' }),
  'PUT /admin/accounts/:accountId/keys/:keyId/rate-limits': () => adminCall('PUT', `/accounts/${w.ids.adminAccount}/keys/${w.ids.adminKey}/rate-limits`, { requests_per_minute: 10 }),
  'PUT /admin/accounts/:accountId/rate-limits': () => adminCall('PUT', `/accounts/${w.ids.adminAccount}/rate-limits`, { requests_per_minute: 100 }),
  'PATCH /admin/accounts/:accountId/rate-limits': () => adminCall('PATCH', `/accounts/${w.ids.adminAccount}/rate-limits`, { tokens_per_minute: 1000 }),
  'POST /admin/accounts/:accountId/credit': () => adminCall('POST', `/accounts/${w.ids.adminAccount}/credit`, { amount_usd: '1', idempotency_key: 'audit-walk-admin' }),
  'POST /admin/accounts/:accountId/refund': async () => {
    // A key of the holder's again (the walk revoked theirs and signed out), and a request to refund.
    w.holder.csrf = ((await w.holder.req('POST', '/api/sign-in', { email: 'holder@example.com', password: NEW_PASSWORD })).json() as { csrf_token: string }).csrf_token;
    const k = (await w.holder.api('POST', '/api/keys', { name: 'for the admin refund' })).json() as { secret: string };
    w.keySecret = k.secret;
    return adminCall('POST', `/accounts/${w.holderAccount}/refund`, { request_id: await spentRequest() });
  },
  'POST /admin/top-ups/:topUpId/recheck': async () => adminCall('POST', `/top-ups/${await startedTopUp()}/recheck`),
  'POST /admin/dashboard-users/clear-two-factor': async () => {
    await totpOn('page@example.com');
    return adminCall('POST', '/dashboard-users/clear-two-factor', { email: 'page@example.com' });
  },
  'POST /admin/accounts/:accountId/teams': async () => {
    const a = await adminCall('POST', `/accounts/${w.holderAccount}/teams`, { name: 'admin-team' });
    w.ids.adminTeam = (a.json() as { team: { id: string } }).team.id;
    return a;
  },
  'PATCH /admin/accounts/:accountId/teams/:teamId': () => adminCall('PATCH', `/accounts/${w.holderAccount}/teams/${w.ids.adminTeam}`, { name: 'admin-team-2' }),
  'PUT /admin/accounts/:accountId/teams/:teamId/members/:userId': () => adminCall('PUT', `/accounts/${w.holderAccount}/teams/${w.ids.adminTeam}/members/${w.holderId}`),
  'DELETE /admin/accounts/:accountId/teams/:teamId/members/:userId': () => adminCall('DELETE', `/accounts/${w.holderAccount}/teams/${w.ids.adminTeam}/members/${w.holderId}`),
  'PATCH /admin/accounts/:accountId/members/:userId/budgets': () => adminCall('PATCH', `/accounts/${w.holderAccount}/members/${w.holderId}/budgets`, { monthly_budget_usd: '5' }),
  'DELETE /admin/accounts/:accountId/teams/:teamId': () => adminCall('DELETE', `/accounts/${w.holderAccount}/teams/${w.ids.adminTeam}`),
  'POST /admin/accounts/:accountId/keys/:keyId/revoke': () => adminCall('POST', `/accounts/${w.ids.adminAccount}/keys/${w.ids.adminKey}/revoke`),
};

interface WrittenEntry {
  actor_kind: string;
  actor_id: string | null;
  actor_label: string | null;
  address: string | null;
  user_agent: string | null;
  action: string;
}

async function entriesOf(requestId: string): Promise<WrittenEntry[]> {
  return (await tdb.db.query<WrittenEntry>('SELECT actor_kind, actor_id, actor_label, address, user_agent, action FROM audit_log WHERE request_id = $1 AND seq IS NOT NULL ORDER BY seq', [requestId])).rows;
}

/** Calls each route of `calls` in order: a valid call (2xx or a redirect), answered with a request id its entries carry. */
async function walk(calls: Record<string, Call>, check: (route: string, entries: WrittenEntry[]) => void): Promise<number> {
  let written = 0;
  for (const [route, call] of Object.entries(calls)) {
    const a = await call();
    expect(a.status, `${route} answered ${a.status}: ${a.text.slice(0, 300)}`).toBeLessThan(400);
    expect(a.requestId, `${route} answers with its request id`).toMatch(/^req_/);
    const entries = await entriesOf(a.requestId);
    if (NO_CHANGE[route] !== undefined) {
      expect(entries, `${route} is listed as changing nothing recorded`).toEqual([]);
      continue;
    }
    expect(entries.length, `${route} wrote no audit entry`).toBeGreaterThan(0);
    check(route, entries);
    written += entries.length;
  }
  return written;
}

beforeAll(async () => {
  harness = await startHarness({ record: tdb.db });
  stripe = await startFakeStripe({ webhookSecret: WEBHOOK_SECRET });
  const port = await freePort();
  const dashUrl = `http://127.0.0.1:${port}`;
  const ledger = harness.backend.ledger as RecordedLedger;
  const accounts = new AccountService({ accounts: harness.backend.accounts, ledger, onRevoke: () => harness.gateway.authenticator.forget(), applyCommitted: (m, r) => ledger.applyCommitted(m, r) });
  const card = stripeProvider({ secretKey: 'sk_test_audit', webhookSecret: WEBHOOK_SECRET, apiBase: stripe.url }) as PaymentProvider & { savedCards: SavedCards };
  topUps = new TopUpService({ db: tdb.db, providers: [card], accounts, publicUrl: dashUrl });
  autoTopUps = new AutoTopUps({ db: tdb.db, provider: card, publicUrl: () => dashUrl });
  const generous = (): AttemptThrottle => new AttemptThrottle({ perAccount: 1000, perAddress: 1000, windowMs: 60_000 });
  service = new DashboardService({
    db: tdb.db,
    accounts,
    signUp: true,
    sessionTtlMs: 3_600_000,
    throttles: { signIn: generous(), signUp: generous(), resetRequest: generous(), resetSubmit: generous() },
    log: () => undefined,
  });
  const books = reconcileSources(tdb.db, harness.backend, undefined, undefined);
  dash = await startDashboard({ service, secureCookie: false, topUps, autoTopUps, webhooks: topUpWebhooks(topUps, () => undefined), reconcile: () => reconcile(books) }, port, '127.0.0.1');
  stripe.setWebhookUrl(`${dashUrl}/webhooks/stripe`);
  admin = await startAdminServer({ accounts, ledger, token: ADMIN_TOKEN, record: tdb.db, topUps, log: () => undefined }, 0, '127.0.0.1');
  w.anon = client();
  w.ids = {};
  const operators = await accounts.createAccount('operators');
  await service.provisioning.upsertUser('root@example.com', 'an admin password', operators.id, 'admin');
  w.root = client();
  w.root.csrf = ((await w.root.req('POST', '/api/sign-in', { email: 'root@example.com', password: 'an admin password' })).json() as { csrf_token: string }).csrf_token;
}, 60_000);

afterAll(async () => {
  await admin?.close();
  await dash?.close();
  await stripe?.close();
  await harness?.close();
});

describe('every state-changing route writes the audit log', () => {
  it('each dashboard route, named in the table of calls and called for real, leaves entries with its request id naming the user (or the visitor) and where from', async () => {
    // The table names exactly the app's state-changing routes: a route added without a call fails here.
    const dashboardRoutes = stateChangingRoutes(createDashboardApp({ service, secureCookie: false, topUps, autoTopUps }));
    expect(dashboardRoutes.length).toBeGreaterThan(80);
    expect(Object.keys(DASHBOARD_CALLS).sort()).toEqual([...new Set(dashboardRoutes)].sort());
    expect(Object.keys(NO_CHANGE).every((r) => r in DASHBOARD_CALLS)).toBe(true);
    const written = await walk(DASHBOARD_CALLS, (route, entries) => {
      for (const e of entries) {
        expect(e.actor_kind, route).toBe('user');
        expect(e.address, route).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
        expect(e.user_agent, route).toBe(USER_AGENT);
      }
    });
    expect(written).toBeGreaterThan(100);
    // Who: the signed-in user by id and address; a visitor by nothing more than where from.
    const signUp = (await tdb.db.query<{ actor_id: string | null }>("SELECT actor_id FROM audit_log WHERE action = 'dashboard_users.insert' AND target = $1", [w.holderId])).rows[0];
    expect(signUp?.actor_id).toBeNull();
    const renamed = (await tdb.db.query<{ actor_id: string; actor_label: string }>("SELECT actor_id, actor_label FROM audit_log WHERE action = 'organizations.update' AND after->>'name' = 'Audit Org 2'")).rows[0];
    expect(renamed).toEqual({ actor_id: w.holderId, actor_label: 'holder@example.com' });
    const credit = (await tdb.db.query<{ actor_label: string }>("SELECT actor_label FROM audit_log WHERE action = 'ledger_entries.insert' AND account_id = $1 AND after->>'kind' = 'admin_credit' ORDER BY seq LIMIT 1", [w.holderAccount])).rows[0];
    expect(credit?.actor_label).toBe('root@example.com');
  }, 120_000);

  it("each admin API route, named in the table of calls and called for real, leaves entries with its request id naming the admin token", async () => {
    const adminRoutes = stateChangingRoutes(createAdminApp({ accounts: service.accounts, ledger: harness.backend.ledger, token: ADMIN_TOKEN }));
    expect(adminRoutes.length).toBeGreaterThan(15);
    expect(Object.keys(ADMIN_CALLS).sort()).toEqual([...new Set(adminRoutes)].sort());
    const written = await walk(ADMIN_CALLS, (route, entries) => {
      for (const e of entries) expect({ route, kind: e.actor_kind, id: e.actor_id, label: e.actor_label, ua: e.user_agent }).toEqual({ route, kind: 'admin_token', id: 'admin-token', label: 'admin API', ua: USER_AGENT });
    });
    expect(written).toBeGreaterThan(18);
  }, 60_000);

  it("a payment's webhook is the author of what it changes, by the provider's name", async () => {
    const { topUp, checkoutUrl } = await topUps.start(w.holderAccount, 1000, 'stripe');
    await stripe.pay(checkoutUrl.split('/').pop() ?? '');
    const entries = await until(
      'the webhook applied',
      async () => {
        const r = await tdb.db.query<{ actor_kind: string; actor_label: string | null; state: string }>(
          "SELECT actor_kind, actor_label, after->>'state' AS state FROM audit_log WHERE target = $1 AND action = 'top_ups.update' AND seq IS NOT NULL ORDER BY seq",
          [topUp.id],
        );
        return r.rows.some((e) => e.state === 'credited') ? r.rows : undefined;
      },
      10_000,
    );
    // Started here with no one acting (the system's); paid and credited by the webhook, which says so.
    expect(entries.filter((e) => e.state === 'credited')).toEqual([{ actor_kind: 'system', actor_label: 'stripe webhook', state: 'credited' }]);
    const credit = await tdb.db.query<{ actor_label: string }>("SELECT actor_label FROM audit_log WHERE action = 'ledger_entries.insert' AND after->>'kind' = 'top_up' AND after->>'account_id' = $1", [w.holderAccount]);
    expect(credit.rows.map((r) => r.actor_label)).toEqual(['stripe webhook']);
  });

  it("the CLI's changes are the CLI's (actor_kind cli, its own user agent), and its audit-log verify and head read the chain", async () => {
    const env = { ...process.env, TOLLGATE_ADMIN_URL: admin.url, TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN };
    const cli = (...args: string[]) => run(process.execPath, ['--import', 'tsx', 'src/admin/cli.ts', ...args], { env, cwd: new URL('../../', import.meta.url).pathname });
    const before = Number((await tdb.db.query<{ head_seq: string }>('SELECT head_seq FROM audit_chain')).rows[0]?.head_seq);
    const made = JSON.parse((await cli('create-account', 'cli-made')).stdout) as { id: string };
    const key = JSON.parse((await cli('create-key', made.id, 'cli-key', '--monthly-cap', '2')).stdout) as { record: { id: string } };
    await cli('credit', made.id, '3', 'cli-credit-1');
    await cli('revoke', made.id, key.record.id);
    const rows = (await tdb.db.query<{ actor_kind: string; actor_label: string; user_agent: string; action: string }>('SELECT actor_kind, actor_label, user_agent, action FROM audit_log WHERE seq > $1 ORDER BY seq', [before])).rows;
    expect(rows.map((r) => r.action)).toEqual(expect.arrayContaining(['accounts.insert', 'api_keys.insert', 'ledger_entries.insert', 'api_keys.update']));
    for (const r of rows) expect({ kind: r.actor_kind, label: r.actor_label, ua: r.user_agent }).toEqual({ kind: 'cli', label: 'admin CLI', ua: 'tollgate-cli/0.1.0' });

    const head = JSON.parse((await cli('audit-log', 'head')).stdout) as { seq: number; hash: string };
    expect(head.seq).toBeGreaterThanOrEqual(before + rows.length);
    const verified = await cli('audit-log', 'verify', '--expect-seq', String(head.seq), '--expect-hash', head.hash);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, first_break: null });
    const listed = JSON.parse((await cli('audit-log', 'list', '--account', made.id, '--action', 'api_keys')).stdout) as { entries: Array<{ action: string; actor_kind: string }> };
    expect(listed.entries.map((e) => e.action)).toEqual(['api_keys.update', 'api_keys.insert']);

    // An entry edited behind the log's back (as a superuser could): verify names it and exits 1.
    const victim = head.seq - 1;
    await tdb.db.transaction(async (tx) => {
      await tx.query("SET LOCAL session_replication_role = 'replica'");
      await tx.query("UPDATE audit_log SET actor_label = 'someone else' WHERE seq = $1", [victim]);
    });
    const broken = await cli('audit-log', 'verify').then(
      () => undefined,
      (err: { code: number; stdout: string }) => err,
    );
    expect(broken?.code).toBe(1);
    expect(JSON.parse(broken?.stdout ?? '{}')).toMatchObject({ ok: false, first_break: { seq: victim, reason: 'edited' } });
  }, 60_000);
});
