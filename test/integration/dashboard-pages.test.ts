// The dashboard's Usage, Refunds and Admin pages and their JSON API over real HTTP, against a gateway
// journaling to a real PostgreSQL (the usage shown is the usage of record): a request is found by its
// id with its cost to the micro-dollar, a cap's 402 says which limit refused, the CSV's total equals the
// statement's usage entries, a refund ticket approved by an admin credits back exactly the request's
// cost once, support and the holder are mailed through the outbox (delivered to a loopback SMTP
// server), alerts mail once per crossing, and a holder reaches nothing of another account on any route.
import { AccountService } from '../../src/account-service/account-service.js';
import { SMTPServer } from 'smtp-server';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';
import { checkAlerts } from '../../src/dashboard/alerts.js';
import { createDashboardApp } from '../../src/dashboard/app.js';
import { smtpMailer, startOutboxWorker } from '../../src/dashboard/outbox.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { AttemptThrottle } from '../../src/dashboard/throttle.js';
import { recordMovement } from '../../src/record/money-movement.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient, type SeenResponse } from '../helpers/dashboard-client.js';
import { EXAMPLE_MODELS, startHarness, type Harness } from '../helpers/gateway-harness.js';
import { freePort } from '../helpers/redis-server.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('dashpages');
const seen: SeenResponse[] = [];
let harness: Harness;
let service: DashboardService;
let dash: { url: string; close(): Promise<void> };
const base = (): string => dash.url;
const MODEL = 'outlaw-1-xploded';
const pricing = EXAMPLE_MODELS.find((m) => m.id === MODEL)?.pricing;
const prices = { input: usdPerMillionToMicros(pricing?.input ?? '0'), output: usdPerMillionToMicros(pricing?.output ?? '0'), display: { input: '', output: '' } };

beforeAll(async () => {
  // A prompt that says CACHE-SPLIT is reported by the upstream as partly read from and written to a cache.
  harness = await startHarness({
    record: tdb.db,
    simulator: { cacheReport: ({ body, inputTokens }) => (JSON.stringify(body).includes('CACHE-SPLIT') ? { read: 3, write5m: 4, write1h: Math.min(5, inputTokens - 7) } : undefined) },
  });
  // Every holder here signs up from 127.0.0.1: a wide sign-up budget (the throttles have their own tests).
  const wide = new AttemptThrottle({ perAccount: 3, perAddress: 1000, windowMs: 60_000 });
  const accounts = new AccountService({ accounts: harness.backend.accounts, ledger: harness.backend.ledger, onRevoke: () => harness.gateway.authenticator.forget() });
  service = new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000, throttles: { signUp: wide } });
  dash = await startDashboard({ service, secureCookie: false, supportEmail: 'support@example.com', models: () => harness.catalog.current() }, 0, '127.0.0.1');
  const operators = await harness.backend.accounts.createAccount('operators');
  await service.provisioning.upsertUser('root@example.com', 'an admin password', operators.id, 'admin');
});

afterAll(async () => {
  await dash?.close();
  await harness?.close();
});

interface Holder {
  client: DashboardClient;
  accountId: string;
  secret: string;
  keyId: string;
  openai: OpenAI;
}

/** A holder with a key and money: signed up with the address confirmed, or provisioned by the operator. */
async function holder(email: string, credit = 5_000_000, how: 'sign-up' | 'provisioned' = 'sign-up'): Promise<Holder> {
  const client = new DashboardClient(base, {}, seen);
  if (how === 'sign-up') await client.signUpConfirmed(tdb.db, email);
  else {
    const account = await harness.backend.accounts.createAccount(email);
    await service.provisioning.upsertUser(email, 'correct horse battery', account.id);
    const r = await client.req('POST', '/api/sign-in', { email, password: 'correct horse battery' });
    client.csrf = (r.json() as { csrf_token: string }).csrf_token;
  }
  const session = (await client.api('GET', '/api/session')).json() as { user: { account_id: string } };
  const created = (await client.req('POST', '/api/keys', { name: `${email} key` }, { headers: { 'x-csrf-token': client.csrf }, reveal: true })).json() as { key: { id: string }; secret: string };
  if (credit > 0) await harness.backend.ledger.credit(session.user.account_id, credit, `start-${email}`);
  return { client, accountId: session.user.account_id, secret: created.secret, keyId: created.key.id, openai: new OpenAI({ apiKey: created.secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 }) };
}

async function admin(): Promise<DashboardClient> {
  const a = new DashboardClient(base, {}, seen);
  const r = await a.req('POST', '/api/sign-in', { email: 'root@example.com', password: 'an admin password' });
  expect(r.status).toBe(200);
  a.csrf = (r.json() as { csrf_token: string }).csrf_token;
  return a;
}

/** A served request's id and the cost of its reported usage. */
async function call(h: Holder): Promise<{ requestId: string; cost: number }> {
  const res = await h.openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 20 }).withResponse();
  const u = res.data.usage;
  return { requestId: res.response.headers.get('x-request-id') ?? '', cost: costMicros({ input: u?.prompt_tokens ?? 0, output: u?.completion_tokens ?? 0, cachedInput: 0, reasoning: 0 }, prices) };
}

async function recorded(h: Holder, requestId: string): Promise<Record<string, unknown>> {
  return until(
    'the request in the record',
    async () => ((await h.client.api('GET', `/api/usage?request_id=${requestId}`)).json() as { usage: Array<Record<string, unknown>> }).usage[0],
    10_000,
  );
}

describe('Usage', () => {
  it('finds a request by its id with its cost; a 402 says which limit; CSV total equals the statement', async () => {
    const h = await holder('usage@example.com');
    const first = await call(h);
    const second = await call(h);
    expect(await recorded(h, first.requestId)).toMatchObject({ request_id: first.requestId, cost_micro_usd: first.cost, status: 'completed', key_id: h.keyId });
    await recorded(h, second.requestId);
    const page = await h.client.req('GET', `/usage?request_id=${first.requestId}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain(first.requestId);
    expect(page.text).not.toContain(second.requestId);

    // A monthly cap below the next request's worst case: 402, and Usage says which limit refused.
    expect((await h.client.api('PATCH', `/api/keys/${h.keyId}`, { monthly_cap_usd: '0.000001' })).status).toBe(200);
    harness.gateway.authenticator.forget();
    const refused = await h.openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 20 }).catch((e: unknown) => e);
    expect((refused as { status?: number }).status).toBe(402);
    const refusedList = await until(
      'the refusal in the record',
      async () => {
        const list = ((await h.client.api('GET', '/api/usage?status=refused')).json() as { usage: Array<{ refusal_reason: string }> }).usage;
        return list.length > 0 ? list : undefined;
      },
      10_000,
    );
    expect(refusedList[0]?.refusal_reason).toBe('key_monthly_cap_reached');
    expect((await h.client.req('GET', '/usage?status=refused')).text).toContain('refused: key monthly cap');

    const csv = await h.client.req('GET', '/usage.csv');
    expect(csv.res.headers.get('content-type')).toMatch(/text\/csv/);
    const rows = csv.text.trim().split('\r\n');
    expect(rows[0]).toMatch(/^finished_at,request_id,/);
    const costs = rows.slice(1, -1).map((r) => Number(r.split(',')[12]));
    const total = Number(rows[rows.length - 1]?.split(',')[12]);
    expect(total).toBe(costs.reduce((a, b) => a + b, 0));
    expect(total).toBe(first.cost + second.cost);
    const statement = (await h.client.api('GET', '/api/statement')).json() as { entries: Array<{ kind: string; amount_micro_usd: number }> };
    expect(-statement.entries.filter((e) => e.kind === 'usage').reduce((a, e) => a + e.amount_micro_usd, 0)).toBe(total);
    // The daily chart's data: today's spend of the key.
    const daily = (await h.client.api('GET', '/api/usage/daily')).json() as { days: Array<{ key_id: string; spent_micro_usd: number }> };
    expect(daily.days.find((d) => d.key_id === h.keyId)?.spent_micro_usd).toBe(total);
    // Bad filters are 400s, not 500s.
    expect((await h.client.api('GET', '/api/usage?status=nope')).status).toBe(400);
    expect((await h.client.api('GET', '/api/usage?from=yesterday')).status).toBe(400);
    expect((await h.client.api('GET', '/api/usage?cursor=garbage')).status).toBe(400);
  });
});

describe('Usage by cache class', () => {
  it('the Usage page, the JSON API and the CSV show cache reads and 5-minute and 1-hour writes apart', async () => {
    const h = await holder('cache@example.com');
    const res = await h.openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'CACHE-SPLIT: a long shared prefix, then a question.' }], max_tokens: 20 }).withResponse();
    const requestId = res.response.headers.get('x-request-id') ?? '';
    const u = res.data.usage!;
    expect(u.prompt_tokens_details).toMatchObject({ cached_tokens: 3, cache_write_tokens: 9, cache_creation: { ephemeral_5m_input_tokens: 4, ephemeral_1h_input_tokens: 5 } });
    const row = await recorded(h, requestId);
    expect(row).toMatchObject({ input_tokens: u.prompt_tokens, cached_input_tokens: 3, cache_write_5m_tokens: 4, cache_write_1h_tokens: 5 });
    const page = (await h.client.req('GET', `/usage?request_id=${requestId}`)).text;
    expect(page).toContain('cache read 3 · cache write 5m 4 · cache write 1h 5');
    const csv = (await h.client.req('GET', `/usage.csv?request_id=${requestId}`)).text.trim().split('\r\n');
    const header = csv[0]!.split(',');
    const cells = csv[1]!.split(',');
    expect(cells[header.indexOf('cached_input_tokens')]).toBe('3');
    expect(cells[header.indexOf('cache_write_5m_tokens')]).toBe('4');
    expect(cells[header.indexOf('cache_write_1h_tokens')]).toBe('5');
  });

  it('the Models page lists every model with its cache prices, or says a class costs the input price', async () => {
    const h = await holder('models@example.com', 0);
    const page = (await h.client.req('GET', '/models')).text;
    const row = (id: string): string => page.slice(page.indexOf(`<code>${id}</code>`), page.indexOf('</tr>', page.indexOf(`<code>${id}</code>`)));
    // mimo-v2.6-flash-xploded: $1.00 input, $0.10 read, $1.25 5-minute write, $2.00 1-hour write.
    expect(row('mimo-v2.6-flash-xploded')).toMatch(/\$1\.00<\/td><td class="num">\$3\.00<\/td>\s*<td class="num">\$0\.10<\/td><td class="num">\$1\.25<\/td><td class="num">\$2\.00<\/td>/);
    expect(row('outlaw-1-xploded')).toContain('as input');
    const api = (await h.client.api('GET', '/api/models')).json() as { models: Array<{ id: string; pricing: Record<string, string | null> }> };
    expect(api.models.map((m) => m.id)).toEqual(EXAMPLE_MODELS.map((m) => m.id));
    expect(api.models.find((m) => m.id === 'mimo-v2.6-flash-xploded')?.pricing).toEqual({ input: '1.00', output: '3.00', cache_read: '0.10', cache_write_5m: '1.25', cache_write_1h: '2.00', reasoning: null });
  });
});

describe('Refund tickets', () => {
  it('a holder asks, support is mailed, an admin approves: the balance rises by exactly the cost, once', async () => {
    const h = await holder('refund@example.com');
    const served = await call(h);
    await recorded(h, served.requestId);
    const before = ((await h.client.api('GET', '/api/balance')).json() as { balance_micro_usd: number }).balance_micro_usd;
    const opened = await h.client.api('POST', '/api/refund-tickets', { request_id: served.requestId, reason: 'The answer was cut off.' });
    expect(opened.status).toBe(201);
    const ticket = (opened.json() as { ticket: { id: string; status: string } }).ticket;
    expect(ticket.status).toBe('open');
    expect((await h.client.api('POST', '/api/refund-tickets', { request_id: served.requestId, reason: 'again' })).status).toBe(409);
    const mail = await tdb.db.query<{ recipient: string; subject: string }>('SELECT recipient, subject FROM email_outbox WHERE subject LIKE $1', [`%${served.requestId}%`]);
    expect(mail.rows).toEqual([{ recipient: 'support@example.com', subject: `Refund request ${served.requestId}` }]);

    const root = await admin();
    // A holder cannot decide.
    expect((await h.client.api('POST', `/api/admin/refund-tickets/${ticket.id}/approve`)).status).toBe(403);
    const approved = await root.api('POST', `/api/admin/refund-tickets/${ticket.id}/approve`);
    expect(approved.status).toBe(200);
    expect((approved.json() as { ticket: { status: string; refunded_micro_usd: number } }).ticket).toMatchObject({ status: 'approved', refunded_micro_usd: served.cost });
    expect((await root.api('POST', `/api/admin/refund-tickets/${ticket.id}/approve`)).status).toBe(409);
    const after = ((await h.client.api('GET', '/api/balance')).json() as { balance_micro_usd: number }).balance_micro_usd;
    expect(after - before).toBe(served.cost);
    expect(((await h.client.api('GET', `/api/refund-tickets/${ticket.id}`)).json() as { ticket: { status: string } }).ticket.status).toBe('approved');
    expect((await h.client.req('GET', '/refunds')).text).toContain('approved');
    // Free requests and unknown ones cannot be ticketed.
    expect((await h.client.api('POST', '/api/refund-tickets', { request_id: 'req_nope', reason: 'why not' })).status).toBe(404);
  });
});

describe('Admin', () => {
  it('lists accounts with balances, credits once per idempotency key, revokes a key for its holder', async () => {
    const h = await holder('managed@example.com', 1_000_000);
    const root = await admin();
    const accounts = (await root.api('GET', '/api/admin/accounts')).json() as { accounts: Array<{ id: string; balance_micro_usd: number }> };
    expect(accounts.accounts.find((a) => a.id === h.accountId)?.balance_micro_usd).toBe(1_000_000);
    for (let i = 0; i < 2; i++) expect((await root.api('POST', `/api/admin/accounts/${h.accountId}/credit`, { amount_usd: '2.50', idempotency_key: `k-${h.accountId}` })).status).toBe(200);
    expect(((await h.client.api('GET', '/api/balance')).json() as { balance_micro_usd: number }).balance_micro_usd).toBe(3_500_000);
    expect((await root.api('POST', `/api/admin/accounts/${h.accountId}/credit`, { amount_usd: '3', idempotency_key: `k-${h.accountId}` })).status).toBe(409);
    expect((await root.api('POST', `/api/admin/accounts/${h.accountId}/keys/${h.keyId}/revoke`)).status).toBe(200);
    const after = await h.openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 5 }).catch((e: unknown) => e);
    expect((after as { status?: number }).status).toBe(401);
    const page = await root.req('GET', '/admin');
    expect(page.status).toBe(200);
    expect(page.text).toContain(h.accountId);
    expect((await h.client.req('GET', '/admin')).status).toBe(403);
  });
});

describe('E-mail and alerts', () => {
  it('alerts mail once per crossing and re-arm; the outbox delivers through SMTP', async () => {
    const h = await holder('alerts@example.com', 0);
    // A top-up of 10.00 on record, then the balance falls to 1.50: below 20%, not below 5%.
    await tdb.db.transaction((tx) => recordMovement(tx, { accountId: h.accountId, kind: 'top_up', amount: 10_000_000, idempotencyKey: `tu-${h.accountId}` }));
    await tdb.db.transaction((tx) => recordMovement(tx, { accountId: h.accountId, kind: 'adjustment', amount: -8_500_000, idempotencyKey: `adj-${h.accountId}` }));
    const mails = async () => (await tdb.db.query<{ subject: string }>(`SELECT subject FROM email_outbox WHERE recipient = 'alerts@example.com' AND subject NOT LIKE 'Confirm%' ORDER BY id`)).rows.map((r) => r.subject);
    await checkAlerts(tdb.db);
    await checkAlerts(tdb.db);
    expect(await mails()).toEqual(['Your Tollgate balance is below 20% of your last top-up']);
    await tdb.db.transaction((tx) => recordMovement(tx, { accountId: h.accountId, kind: 'adjustment', amount: -1_100_000, idempotencyKey: `adj2-${h.accountId}` }));
    await checkAlerts(tdb.db);
    expect((await mails()).length).toBe(2);
    // Back above, then below again: mailed again.
    await tdb.db.transaction((tx) => recordMovement(tx, { accountId: h.accountId, kind: 'adjustment', amount: 5_000_000, idempotencyKey: `adj3-${h.accountId}` }));
    await checkAlerts(tdb.db);
    await tdb.db.transaction((tx) => recordMovement(tx, { accountId: h.accountId, kind: 'adjustment', amount: -5_000_000, idempotencyKey: `adj4-${h.accountId}` }));
    await checkAlerts(tdb.db);
    expect((await mails()).filter((s) => s.includes('below 20%')).length).toBe(2);

    // The outbox worker delivers to a real SMTP server on loopback.
    const received: string[] = [];
    const port = await freePort();
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onData(stream, _session, done) {
        let data = '';
        stream.on('data', (c: Buffer) => (data += c.toString()));
        stream.on('end', () => {
          received.push(data);
          done();
        });
      },
    });
    await new Promise<void>((r) => smtp.listen(port, '127.0.0.1', () => r()));
    try {
      const worker = startOutboxWorker({ db: tdb.db, mailer: smtpMailer(`smtp://127.0.0.1:${port}`, 'Tollgate <no-reply@example.com>'), intervalMs: 0 });
      await worker.drain();
      expect(received.some((m) => m.includes('Subject: Your Tollgate balance is below 20% of your last top-up'))).toBe(true);
      const unsent = await tdb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM email_outbox WHERE sent_at IS NULL');
      expect(unsent.rows[0]?.n).toBe(0);
    } finally {
      await new Promise<void>((r) => smtp.close(() => r()));
    }
  });
});

describe('Isolation between accounts', () => {
  it("a holder reaches nothing of another account's on any route of the dashboard", async () => {
    const alice = await holder('iso-alice@example.com');
    const bob = await holder('iso-bob@example.com');
    const served = await call(alice);
    await recorded(alice, served.requestId);
    const ticket = ((await alice.client.api('POST', '/api/refund-tickets', { request_id: served.requestId, reason: 'mine' })).json() as { ticket: { id: string } }).ticket;
    // Every route of the app, with Alice's ids in its parameters, tried as Bob.
    const app = createDashboardApp({ service, secureCookie: false });
    const routes = (app.middleware as unknown as Array<{ router?: { stack: Array<{ path: string; methods: string[] }> } }>)
      .flatMap((m) => m.router?.stack ?? [])
      .flatMap((l) => l.methods.filter((x) => x !== 'HEAD').map((method) => ({ method, path: l.path })))
      // Every route naming a resource; a reset token names none of an account's (it is its own secret).
      .filter((r) => r.path.includes(':') && !r.path.includes(':token'));
    expect(routes.length).toBeGreaterThan(10);
    const ids: Record<string, string> = { keyId: alice.keyId, requestId: served.requestId, ticketId: ticket.id, id: 'tu_alice', topUpId: 'tu_alice', accountId: alice.accountId };
    for (const r of routes) {
      const path = r.path.replace(/:(\w+)/g, (_, name: string) => ids[name] ?? 'x');
      const res = r.path.startsWith('/api/')
        ? await bob.client.api(r.method, path, r.method === 'GET' ? undefined : {})
        : await bob.client.req(r.method, path, r.method === 'GET' ? undefined : { csrf: bob.client.csrf }, { form: true });
      expect([403, 404], `${r.method} ${r.path} as another holder`).toContain(res.status);
      expect(res.text).not.toContain(served.requestId);
    }
    // Bob's own lists never show Alice's.
    expect((await bob.client.req('GET', '/usage')).text).not.toContain(served.requestId);
    expect((await bob.client.req('GET', '/refunds')).text).not.toContain(served.requestId);
    expect((await bob.client.req('GET', '/balance')).text).not.toContain(served.requestId);
    expect(JSON.stringify((await bob.client.api('GET', '/api/statement')).json())).not.toContain(served.requestId);
    // Nothing sent any key secret except its one-time reveal.
    for (const h of [alice, bob]) {
      const carriers = seen.filter((s) => s.text.includes(h.secret));
      expect(carriers.map((c) => c.reveal)).toEqual([true]);
    }
  });
});

describe('Password reset', () => {
  it('mails a single-use link for a known address only; the new password works, the old one and every session end', async () => {
    const h = await holder('forgetful@example.com', 0);
    const anon = new DashboardClient(base, {}, seen);
    const known = await anon.req('POST', '/api/password-reset', { email: 'forgetful@example.com' });
    const unknown = await anon.req('POST', '/api/password-reset', { email: 'nobody@example.com' });
    expect([known.status, unknown.status]).toEqual([202, 202]);
    expect(known.text).toBe(unknown.text);
    const mail = await tdb.db.query<{ recipient: string; body: string }>(`SELECT recipient, body FROM email_outbox WHERE subject = 'Reset your Tollgate password'`);
    expect(mail.rows.map((m) => m.recipient)).toEqual(['forgetful@example.com']);
    const token = /password-reset\/([A-Za-z0-9_-]{20,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? '';
    expect((await tdb.db.query('SELECT 1 FROM password_resets WHERE token_hash = $1', [token])).rows).toEqual([]);
    expect((await anon.req('GET', `/password-reset/${token}`)).text).toContain('Choose a new password');
    expect((await anon.req('POST', `/password-reset/${token}`, { password: 'short' }, { form: true })).status).toBe(400);
    expect((await anon.req('POST', `/password-reset/${token}`, { password: 'a brand new password' }, { form: true })).status).toBe(200);
    expect((await anon.req('POST', `/api/password-reset/${token}`, { password: 'yet another password' })).status).toBe(400);
    // The holder's old session is gone; the old password fails, the new one works.
    expect((await h.client.api('GET', '/api/session')).status).toBe(401);
    expect((await anon.req('POST', '/api/sign-in', { email: 'forgetful@example.com', password: 'correct horse battery' })).status).toBe(401);
    expect((await anon.req('POST', '/api/sign-in', { email: 'forgetful@example.com', password: 'a brand new password' })).status).toBe(200);
  });
});

describe('CSRF and origin on the new pages', () => {
  it('refuses a refund request without the token or from another origin', async () => {
    const h = await holder('csrf@example.com');
    const served = await call(h);
    await recorded(h, served.requestId);
    expect((await h.client.api('POST', '/api/refund-tickets', { request_id: served.requestId, reason: 'x y z' }, { 'x-csrf-token': 'wrong' })).status).toBe(403);
    expect((await h.client.api('POST', '/api/refund-tickets', { request_id: served.requestId, reason: 'x y z' }, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await tdb.db.query('SELECT id FROM refund_tickets WHERE request_id = $1', [served.requestId])).rows).toEqual([]);
  });
});

describe('post-redirect-get after every form that creates something (issue 29, defect 11)', () => {
  it('a refund request, an admin credit and an admin decision each answer 303, so a reload repeats nothing', async () => {
    const h = await holder('prg@example.com', 5_000_000, 'provisioned');
    const served = await call(h);
    await recorded(h, served.requestId);
    const opened = await h.client.req('POST', '/refunds', { csrf: h.client.csrf, request_id: served.requestId, reason: 'please refund' }, { form: true });
    expect(opened.status).toBe(303);
    const location = opened.res.headers.get('location') ?? '';
    expect(location).toMatch(/^\/refunds\?opened=/);
    const shown = await h.client.req('GET', location);
    expect(shown.text).toContain(`Sent to support: refund request for ${served.requestId}.`);
    // A reload is that GET again: still one ticket.
    await h.client.req('GET', location);
    expect((await tdb.db.query('SELECT id FROM refund_tickets WHERE request_id = $1', [served.requestId])).rows).toHaveLength(1);

    const root = await admin();
    const page = await root.req('GET', `/admin/accounts/${h.accountId}`);
    const idem = /name="idempotency_key" value="([^"]+)"/.exec(page.text)?.[1] ?? '';
    const credited = await root.req('POST', `/admin/accounts/${h.accountId}/credit`, { csrf: root.csrf, amount_usd: '1.25', idempotency_key: idem }, { form: true });
    expect(credited.status).toBe(303);
    expect(credited.res.headers.get('location')).toBe(`/admin/accounts/${h.accountId}?done=credited`);
    expect((await root.req('GET', credited.res.headers.get('location') ?? '')).text).toContain('Credit applied');
    const ticket = (await tdb.db.query<{ id: string }>('SELECT id FROM refund_tickets WHERE request_id = $1', [served.requestId])).rows[0]?.id ?? '';
    const decided = await root.req('POST', `/admin/refund-tickets/${ticket}/decline`, { csrf: root.csrf, note: 'no' }, { form: true });
    expect(decided.status).toBe(303);
    expect((await root.req('GET', decided.res.headers.get('location') ?? '')).text).toContain(`Declined the refund of ${served.requestId}.`);
  });
});
