// docs/dashboard-openapi.yaml against the real dashboard: every /api route the app serves is in the
// file, every operation in the file is called here for real (over HTTP, with a gateway journaling to a
// real PostgreSQL, and top-ups on the test-mode providers), and every response is checked against the
// schema the file gives for its status.
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import OpenAI from 'openai';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/accounts/service.js';
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
const METHODS = ['get', 'post', 'patch', 'delete'];

/** The documented operation a concrete call hits: its template and schema, or a failure. */
function check(method: string, path: string, status: number, text: string, contentType: string): void {
  const bare = path.split('?')[0] ?? '';
  const template = Object.keys(doc.paths).find((t) => new RegExp(`^${t.replace(/\./g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`).test(bare));
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

    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m} ${p}`));
    expect(documented.filter((op) => !exercised.has(op))).toEqual([]);
  }, 60_000);
});
