// Reading the audit log, and the events that change no row: sign-ins (with the way in, and why one was
// refused) and sign-outs, never a password or a code; the dashboard's Audit log page and CSV for an
// organization's owners and admins (their own account only) and the deployment's admin (all), with the
// filters; the admin API's list, verify and head; the entry count as a metric; retention keeping the
// chain verifiable. Real PostgreSQL, real HTTP, a real gateway's metrics endpoint.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountService } from '../../src/account-service/account-service.js';
import { chainHead, verifyChain } from '../../src/audit/chain.js';
import { startAuditRetention } from '../../src/audit/retention.js';
import { startAdminServer } from '../../src/admin/server.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { totpCode } from '../../src/dashboard/totp.js';
import type { Listening } from '../../src/http/listen.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('audit_reads');
const PASSWORD = 'correct horse battery';
const ADMIN_TOKEN = 'audit-reads-admin-token';
const SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
let harness: Harness;
let service: DashboardService;
let dash: { url: string; close(): Promise<void> };
let admin: Listening;

const client = (): DashboardClient => new DashboardClient(() => dash.url, { 'user-agent': 'audit-reads/1.0' });

interface Entry {
  seq: string;
  account_id: string | null;
  actor_kind: string;
  actor_id: string | null;
  actor_label: string | null;
  address: string | null;
  action: string;
  target: string | null;
  after: Record<string, unknown> | null;
}

async function entriesSince(seq: number): Promise<Entry[]> {
  return (await tdb.db.query<Entry>('SELECT * FROM audit_log WHERE seq > $1 ORDER BY seq', [seq])).rows;
}

const head = async (): Promise<number> => (await chainHead(tdb.db)).seq;

async function adminGet(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${admin.url}/admin${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  harness = await startHarness({ record: tdb.db });
  const ledger = harness.backend.ledger as RecordedLedger;
  const accounts = new AccountService({ accounts: harness.backend.accounts, ledger, applyCommitted: (m, r) => ledger.applyCommitted(m, r) });
  service = new DashboardService({ db: tdb.db, accounts, signUp: true, sessionTtlMs: 3_600_000 });
  dash = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
  admin = await startAdminServer({ accounts, ledger, token: ADMIN_TOKEN, record: tdb.db }, 0, '127.0.0.1');
  const operators = await accounts.createAccount('operators');
  await service.provisioning.upsertUser('root@example.com', 'an admin password', operators.id, 'admin');
}, 60_000);

afterAll(async () => {
  await admin?.close();
  await dash?.close();
  await harness?.close();
});

describe('sign-ins on record', () => {
  it('a sign-in succeeded or failed is an entry with the way in and why it failed; never the password or a code', async () => {
    const holder = client();
    await holder.signUpConfirmed(tdb.db, 'signs-in@example.com', PASSWORD);
    const userId = (await tdb.db.query<{ id: string; account_id: string }>("SELECT id, account_id FROM dashboard_users WHERE email = 'signs-in@example.com'")).rows[0];
    const from = await head();
    const anon = client();
    expect((await anon.req('POST', '/api/sign-in', { email: 'signs-in@example.com', password: 'the wrong password' })).status).toBe(401);
    expect((await anon.req('POST', '/api/sign-in', { email: 'nobody-here@example.com', password: 'a typed secret!' })).status).toBe(401);
    expect((await anon.req('POST', '/api/sign-in', { email: 'signs-in@example.com', password: PASSWORD })).status).toBe(200);
    // Two-factor on: missing, wrong, then a TOTP code, then a recovery code.
    const enabled = await holder.req('POST', '/account/two-factor', { csrf: holder.csrf, password: PASSWORD, secret: SECRET, code: totpCode(SECRET) }, { form: true });
    expect(enabled.status).toBe(200);
    const recovery = enabled.text.match(/[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}/g) ?? [];
    const afterEnable = await head();
    expect((await anon.req('POST', '/api/sign-in', { email: 'signs-in@example.com', password: PASSWORD })).status).toBe(401);
    expect((await anon.req('POST', '/api/sign-in', { email: 'signs-in@example.com', password: PASSWORD, code: '000000' })).status).toBe(401);
    expect((await anon.req('POST', '/api/sign-in', { email: 'signs-in@example.com', password: PASSWORD, code: recovery[0] })).status).toBe(200);
    const signIns = (await entriesSince(from)).filter((e) => e.action.startsWith('sign_in.'));
    expect(signIns.map((e) => [e.action, e.after, e.target, e.actor_id])).toEqual([
      ['sign_in.failed', { method: 'password', reason: 'wrong_password' }, userId?.id, null],
      ['sign_in.failed', { method: 'password', reason: 'unknown_address' }, null, null],
      ['sign_in.succeeded', { method: 'password' }, userId?.id, userId?.id],
      ['sign_in.failed', { method: 'password', reason: 'second_factor_missing' }, userId?.id, null],
      ['sign_in.failed', { method: 'password', reason: 'second_factor_wrong' }, userId?.id, null],
      ['sign_in.succeeded', { method: 'password', second_factor: 'recovery_code' }, userId?.id, userId?.id],
    ]);
    expect(signIns.every((e) => e.account_id === (e.target === null ? null : userId?.account_id) && e.address !== null)).toBe(true);
    expect(signIns.find((e) => e.action === 'sign_in.succeeded')?.actor_label).toBe('signs-in@example.com');
    // A TOTP code signs in too (a later time step than the one the enrolment used).
    const later = totpCode(SECRET, Date.now() + 30_000);
    const withCode = await anon.req('POST', '/api/sign-in', { email: 'signs-in@example.com', password: PASSWORD, code: later });
    expect(withCode.status).toBe(200);
    anon.csrf = (withCode.json() as { csrf_token: string }).csrf_token;
    const withTotp = (await entriesSince(afterEnable)).filter((e) => e.action === 'sign_in.succeeded').at(-1);
    expect(withTotp?.after).toEqual({ method: 'password', second_factor: 'totp' });
    // Nothing typed is in the log: no password, no code, not the unknown address.
    const text = JSON.stringify(await entriesSince(from));
    for (const secret of [PASSWORD, 'the wrong password', 'a typed secret!', 'nobody-here@example.com', '000000', later, SECRET, ...recovery]) expect(text).not.toContain(secret);
    // Signing out, and asking for a reset link, are on record too.
    const out = await head();
    expect((await anon.api('POST', '/api/sign-out')).status).toBe(204);
    expect((await anon.req('POST', '/api/password-reset', { email: 'signs-in@example.com' })).status).toBe(202);
    expect((await entriesSince(out)).map((e) => [e.action, e.target])).toEqual([
      ['sign_out', userId?.id],
      ['password_reset.requested', userId?.id],
    ]);
  });
});

describe('the Audit log page and its CSV', () => {
  /** An organization with an owner, an admin and a member, each signed in. */
  async function organization(tag: string): Promise<{ accountId: string; owner: DashboardClient; admin: DashboardClient; member: DashboardClient; memberId: string }> {
    const owner = client();
    await owner.signUpConfirmed(tdb.db, `${tag}-owner@example.com`, PASSWORD);
    const accountId = ((await owner.api('POST', '/api/organizations', { name: `Org ${tag}` })).json() as { account: { id: string } }).account.id;
    const join = async (email: string, role: string): Promise<DashboardClient> => {
      expect((await owner.api('POST', '/api/invitations', { email, role })).status).toBe(201);
      const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", [email]);
      const token = /\/invitations\/([A-Za-z0-9_-]{20,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? '';
      const c = client();
      expect((await c.req('POST', '/api/sign-up', { email, password: PASSWORD, invitation: token })).status).toBe(201);
      c.csrf = ((await c.req('GET', '/api/session')).json() as { csrf_token: string }).csrf_token;
      return c;
    };
    const adminC = await join(`${tag}-admin@example.com`, 'admin');
    const member = await join(`${tag}-member@example.com`, 'member');
    const memberId = (await tdb.db.query<{ id: string }>('SELECT id FROM dashboard_users WHERE email = $1', [`${tag}-member@example.com`])).rows[0]?.id ?? '';
    return { accountId, owner, admin: adminC, member, memberId };
  }

  it("owners and admins read their organization's entries only, with who, what and when; members and billing may not; the CSV has the same", async () => {
    const a = await organization('alpha');
    const b = await organization('beta');
    expect((await a.owner.api('POST', '/api/teams', { name: 'alpha-team' })).status).toBe(201);
    expect((await b.owner.api('POST', '/api/teams', { name: 'beta-team' })).status).toBe(201);
    expect((await a.admin.api('PATCH', `/api/members/${a.memberId}/budgets`, { monthly_budget_usd: '12.50' })).status).toBe(200);

    for (const c of [a.owner, a.admin]) {
      const page = await c.req('GET', '/audit-log');
      expect(page.status).toBe(200);
      expect(page.text).toContain('<h1>Audit log</h1>');
      expect(page.text).toContain('alpha-team');
      expect(page.text).toContain('alpha-admin@example.com');
      expect(page.text).not.toContain('beta-team');
    }
    expect((await a.member.req('GET', '/audit-log')).status).toBe(403);
    // The owner's navigation offers it; the member's does not.
    expect((await a.owner.req('GET', '/members')).text).toContain('href="/audit-log"');
    expect((await a.member.req('GET', '/members')).text).not.toContain('href="/audit-log"');

    // Filters: who (an e-mail), what (an action's start), when.
    const byAdmin = await a.owner.req('GET', '/audit-log?who=alpha-admin%40example.com');
    expect(byAdmin.text).toContain('member_budgets.insert');
    expect(byAdmin.text).not.toContain('teams.insert');
    const teamsOnly = await a.owner.req('GET', '/audit-log?action=teams');
    expect(teamsOnly.text).toContain('teams.insert');
    expect(teamsOnly.text).not.toContain('member_budgets.insert');
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    expect((await a.owner.req('GET', `/audit-log?from=${tomorrow}`)).text).toContain('No entries match.');
    const bad = await a.owner.req('GET', '/audit-log?from=yesterday');
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('from must be a date');

    const csv = await a.admin.req('GET', '/audit-log.csv?action=member_budgets');
    expect(csv.status).toBe(200);
    expect(csv.res.headers.get('content-type')).toContain('text/csv');
    const lines = csv.text.trim().split('\r\n');
    expect(lines[0]).toBe('seq,at,account_id,actor_kind,actor_id,actor_label,address,user_agent,action,target,before,after,request_id,hash');
    expect(lines.slice(1).map((l) => l.split(',')[8])).toEqual(['member_budgets.insert']);
    expect(lines[1]).toContain(a.accountId);
    expect(lines[1]).toContain('alpha-admin@example.com');
    expect((await a.member.req('GET', '/audit-log.csv')).status).toBe(403);
  });

  it("the deployment's admin reads every account's entries, one account's when asked, a page at a time", async () => {
    const c = client();
    c.csrf = ((await c.req('POST', '/api/sign-in', { email: 'root@example.com', password: 'an admin password' })).json() as { csrf_token: string }).csrf_token;
    const all = await c.req('GET', '/admin/audit-log');
    expect(all.status).toBe(200);
    expect(all.text).toContain('alpha-team');
    expect(all.text).toContain('beta-team');
    const betaAccount = (await tdb.db.query<{ account_id: string }>("SELECT account_id FROM organizations WHERE name = 'Org beta'")).rows[0]?.account_id ?? '';
    const beta = await c.req('GET', `/admin/audit-log?account=${betaAccount}`);
    expect(beta.text).toContain('beta-team');
    expect(beta.text).not.toContain('alpha-team');
    // 50 a page; the next page starts where the link says, with nothing repeated.
    const older = /href="\/admin\/audit-log\?cursor=(\d+)"/.exec(all.text)?.[1];
    expect(older).toBeDefined();
    const seqs = (text: string): string[] => [...text.matchAll(/<tr id="entry-(\d+)">/g)].map((m) => m[1] ?? '');
    expect(seqs(all.text)).toHaveLength(50);
    const second = await c.req('GET', `/admin/audit-log?cursor=${older}`);
    expect(second.status).toBe(200);
    const firstIds = new Set(seqs(all.text));
    expect(seqs(second.text).some((id) => firstIds.has(id))).toBe(false);
    const csv = await c.req('GET', '/admin/audit-log.csv');
    expect(csv.text.trim().split('\r\n').length - 1).toBe(await head());
    // A holder is refused the deployment's page.
    const alphaOwner = client();
    alphaOwner.csrf = ((await alphaOwner.req('POST', '/api/sign-in', { email: 'alpha-owner@example.com', password: PASSWORD })).json() as { csrf_token: string }).csrf_token;
    expect((await alphaOwner.req('GET', '/admin/audit-log')).status).toBe(403);
  });
});

describe('the admin API and the metric', () => {
  it('lists entries with the same filters, verifies the chain (with an exported head) and answers the head', async () => {
    const betaAccount = (await tdb.db.query<{ account_id: string }>("SELECT account_id FROM organizations WHERE name = 'Org beta'")).rows[0]?.account_id ?? '';
    const listed = await adminGet(`/audit-log?account_id=${betaAccount}&action=teams&limit=5`);
    expect(listed.status).toBe(200);
    const entries = listed.body.entries as Array<{ action: string; account_id: string; actor_label: string; hash: string }>;
    expect(entries.map((e) => [e.action, e.account_id, e.actor_label])).toEqual([['teams.insert', betaAccount, 'beta-owner@example.com']]);
    expect(entries[0]?.hash).toMatch(/^[0-9a-f]{64}$/);
    expect((await adminGet('/audit-log?limit=2')).body.next_cursor).toMatch(/^\d+$/);
    expect((await adminGet('/audit-log?account_id=acct_nope')).status).toBe(404);
    expect((await adminGet('/audit-log?to=soon')).status).toBe(400);

    const h = await adminGet('/audit-log/head');
    expect(h.body).toMatchObject({ seq: await head(), pruned_through: 0 });
    const ok = await adminGet(`/audit-log/verify?expect_seq=${String(h.body.seq)}&expect_hash=${String(h.body.hash)}`);
    expect(ok.body).toMatchObject({ ok: true, first_break: null });
    expect(Number(ok.body.checked)).toBe(h.body.seq);
    // A head that is not this log's (a rewrite of the whole table would leave one): named.
    const other = await adminGet(`/audit-log/verify?expect_seq=${String(h.body.seq)}&expect_hash=${'0'.repeat(64)}`);
    expect(other.body).toMatchObject({ ok: false, first_break: { seq: h.body.seq, reason: 'edited' } });
    expect((await adminGet('/audit-log/verify?expect_seq=3')).status).toBe(400);
    expect((await adminGet('/audit-log/verify?expect_seq=3&expect_hash=xyz')).status).toBe(400);
  });

  it("the gateway's metrics export the entry count (the head's number) as a gauge with no labels", async () => {
    const port = harness.gateway.metricsServer?.port;
    const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = (text: string): string | undefined => text.split('\n').find((l) => l.startsWith('tollgate_audit_log_entries'));
    expect(line(await scrape())).toBe(`tollgate_audit_log_entries ${await head()}`);
    await harness.backend.accounts.createAccount('one more change');
    expect(line(await scrape())).toBe(`tollgate_audit_log_entries ${await head()}`);
  });
});

describe('retention', () => {
  it('prunes entries past the period once a pass runs, keeping the anchor: the rest verifies and the head still counts every entry', async () => {
    const before = await chainHead(tdb.db);
    expect(before.seq).toBeGreaterThan(10);
    // A clock a year and a half ahead: every entry is past a 400-day period.
    const pruned: number[] = [];
    const retention = startAuditRetention(tdb.db, { retentionDays: 400, intervalMs: 50, now: () => Date.now() + 550 * 86_400_000, onPruned: (n) => pruned.push(n), onError: () => void pruned.push(-1) });
    await until('a prune', () => (pruned.length > 0 ? true : undefined), 5_000);
    retention.stop();
    expect(pruned[0]).toBe(before.seq);
    const after = await chainHead(tdb.db);
    expect(after).toMatchObject({ seq: before.seq, hash: before.hash, prunedThrough: before.seq, prunedHash: before.hash });
    // The next change hangs from the anchor, and the whole still verifies.
    await harness.backend.accounts.createAccount('after the prune');
    expect(await verifyChain(tdb.db)).toMatchObject({ ok: true, checked: 1 });
    // No period, no pruning.
    const none = startAuditRetention(tdb.db, { retentionDays: 0, intervalMs: 10, now: () => Date.now() + 10_000 * 86_400_000, onError: () => undefined });
    await new Promise((r) => setTimeout(r, 100));
    none.stop();
    expect((await chainHead(tdb.db)).prunedThrough).toBe(before.seq);
  });
});
