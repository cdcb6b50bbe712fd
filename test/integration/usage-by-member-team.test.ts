// Who spent what, over real HTTP against a gateway journaling to a real PostgreSQL: the dashboard's
// JSON API, CSV and Usage page filter by member and by team and give totals per member and per team
// (requests, cost, refunds, tokens, and the spend per day), with exact figures from usage records of a
// fixed month; a request is charged to the team its key was in when it was reserved (a key moved
// between two requests splits them between the teams); a member sees only their own keys' usage and
// cannot filter to another member's (403); a filter that cannot be used is a 400 in words, never a 500.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccountService } from '../../src/account-service/account-service.js';
import { formatUsdAmount } from '../../src/billing/money.js';
import { until } from '../e2e/e2e-support.js';
import { DashboardClient } from '../helpers/dashboard-client.js';
import type { Harness } from '../helpers/gateway-harness.js';
import { startGatewayDashboard, type GatewayDashboard } from '../helpers/gateway-dashboard.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('usagegroups');
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

interface Person {
  c: DashboardClient;
  id: string;
}

/** An organization with two members (alice, bob), two teams (search, ads), and money. */
async function organization(prefix: string) {
  const owner = new DashboardClient(base);
  await owner.signUpConfirmed(tdb.db, `${prefix}-owner@example.com`, PASSWORD);
  const created = await owner.api('POST', '/api/organizations', { name: `${prefix} Co` });
  expect(created.status).toBe(201);
  const accountId = (created.json() as { account: { id: string } }).account.id;
  await accounts.credit(accountId, 50_000_000, `seed-${accountId}`);
  const ownerId = ((await owner.api('GET', '/api/session')).json() as { user: { id: string } }).user.id;
  const join = async (who: string): Promise<Person> => {
    const email = `${prefix}-${who}@example.com`;
    expect((await owner.api('POST', '/api/invitations', { email, role: 'member' })).status).toBe(201);
    const mail = await tdb.db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'You are invited%' ORDER BY id DESC LIMIT 1", [email]);
    const token = /\/invitations\/([A-Za-z0-9_-]{40,})/.exec(mail.rows[0]?.body ?? '')?.[1] ?? '';
    const c = new DashboardClient(base);
    const r = await c.req('POST', '/api/sign-up', { email, password: PASSWORD, invitation: token });
    expect(r.status).toBe(201);
    c.csrf = (r.json() as { csrf_token: string }).csrf_token;
    return { c, id: ((await c.api('GET', '/api/session')).json() as { user: { id: string } }).user.id };
  };
  const alice = await join('alice');
  const bob = await join('bob');
  const team = async (name: string, members: Person[]): Promise<string> => {
    const r = await owner.api('POST', '/api/teams', { name });
    expect(r.status).toBe(201);
    const id = (r.json() as { team: { id: string } }).team.id;
    for (const m of members) expect((await owner.api('PUT', `/api/teams/${id}/members/${m.id}`)).status).toBe(200);
    return id;
  };
  const search = await team('search', [alice]);
  const ads = await team('ads', [alice, bob]);
  return { owner: { c: owner, id: ownerId }, accountId, alice, bob, search, ads };
}

async function createKey(c: DashboardClient, name: string, teamId?: string): Promise<{ id: string; secret: string }> {
  const r = await c.api('POST', '/api/keys', { name, ...(teamId === undefined ? {} : { team_id: teamId }) });
  expect(r.status).toBe(201);
  const body = r.json() as { key: { id: string }; secret: string };
  return { id: body.key.id, secret: body.secret };
}

interface Row {
  id: string;
  key: string;
  team: string | null;
  /** finished_at, UTC. */
  at: string;
  cost: number;
  input: number;
  output: number;
  status?: string;
  refunded?: boolean;
}

/** Usage records of record as the journal writes them (one statement), with the figures the test expects back. */
async function insertRecords(accountId: string, rows: readonly Row[]): Promise<void> {
  for (const r of rows) {
    await tdb.db.query(
      `INSERT INTO usage_records (request_id, account_id, key_id, team_id, model, input_tokens, output_tokens, cost, reserved, status, billing_month, started_at, finished_at, refunded_at)
       VALUES ($1, $2, $3, $4, 'm-test', $5, $6, $7, $7, $8, to_char($9::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM'), $9::timestamptz - interval '1 second', $9::timestamptz, $10)`,
      [r.id, accountId, r.key, r.team, r.input, r.output, r.cost, r.status ?? 'completed', r.at, r.refunded === true ? r.at : null],
    );
  }
}

interface ApiTotals {
  requests: number;
  cost_micro_usd: number;
  refunded_micro_usd: number;
  input_tokens: number;
  output_tokens: number;
}
interface TotalsBody {
  group: string;
  from: string;
  to: string;
  groups: Array<ApiTotals & { id: string | null; name: string }>;
  total: ApiTotals;
  days: Array<{ day: string; id: string | null; spent_micro_usd: number }>;
}

const totals = async (c: DashboardClient, query: string): Promise<TotalsBody> => {
  const r = await c.api('GET', `/api/usage/totals?${query}`);
  expect(r.status, r.text).toBe(200);
  return r.json() as TotalsBody;
};
/** Each group as [id, name, requests, cost, refunded, input tokens, output tokens]. */
const figures = (t: TotalsBody): Array<[string | null, string, number, number, number, number, number]> =>
  t.groups.map((g) => [g.id, g.name, g.requests, g.cost_micro_usd, g.refunded_micro_usd, g.input_tokens, g.output_tokens]);
const usageIds = async (c: DashboardClient, query: string): Promise<string[]> => {
  const r = await c.api('GET', `/api/usage?${query}`);
  expect(r.status, r.text).toBe(200);
  return (r.json() as { usage: Array<{ request_id: string }> }).usage.map((u) => u.request_id).sort();
};
const errorOf = async (c: DashboardClient, path: string): Promise<{ status: number; message: string }> => {
  const r = await c.api('GET', path);
  return { status: r.status, message: (r.json() as { error: { message: string } }).error.message };
};

const MARCH = 'from=2026-03-01&to=2026-03-31';

describe('usage per member and per team', () => {
  it('totals per member and per team, each filter, the CSV of requests and of totals, with exact figures; a member sees and filters only their own', async () => {
    const org = await organization('figures');
    const { owner, alice, bob, search, ads } = org;
    const aliceKey = await createKey(alice.c, 'alice key', search);
    const bobKey = await createKey(bob.c, 'bob key', ads);
    const bobSpare = await createKey(bob.c, 'bob spare');
    const ownerKey = await createKey(owner.c, 'owner key');
    // The operator's key: made by no member.
    const operatorKey = (await accounts.createKey(org.accountId, { name: 'operator key' })).record.id;
    await insertRecords(org.accountId, [
      { id: 'req_f1', key: aliceKey.id, team: search, at: '2026-03-02T10:00:00Z', cost: 1_000_000, input: 100, output: 10 },
      { id: 'req_f2', key: aliceKey.id, team: search, at: '2026-03-03T10:00:00Z', cost: 2_500_000, input: 200, output: 20 },
      // The same key charged to ads (it was moved there before this request).
      { id: 'req_f3', key: aliceKey.id, team: ads, at: '2026-03-03T11:00:00Z', cost: 700_000, input: 50, output: 5 },
      { id: 'req_f4', key: bobKey.id, team: ads, at: '2026-03-02T12:00:00Z', cost: 300_000, input: 30, output: 3 },
      { id: 'req_f5', key: bobSpare.id, team: null, at: '2026-03-04T09:00:00Z', cost: 150_000, input: 15, output: 1, refunded: true },
      { id: 'req_f6', key: ownerKey.id, team: null, at: '2026-03-04T10:00:00Z', cost: 50_000, input: 5, output: 1 },
      { id: 'req_f7', key: operatorKey, team: null, at: '2026-03-05T10:00:00Z', cost: 20_000, input: 2, output: 1 },
      { id: 'req_f8', key: aliceKey.id, team: search, at: '2026-03-05T11:00:00Z', cost: 0, input: 0, output: 0, status: 'refused' },
      // Outside March: in no total of March.
      { id: 'req_f9', key: aliceKey.id, team: search, at: '2026-04-01T00:00:00Z', cost: 9_000_000, input: 900, output: 90 },
    ]);

    // Per member: alice's key in both teams, bob's two keys, the owner's, the operator's (no member).
    const byMember = await totals(owner.c, `group=member&${MARCH}`);
    expect(byMember).toMatchObject({ group: 'member', from: '2026-03-01', to: '2026-03-31' });
    expect(figures(byMember)).toEqual([
      [alice.id, 'figures-alice@example.com', 4, 4_200_000, 0, 350, 35],
      [bob.id, 'figures-bob@example.com', 2, 450_000, 150_000, 45, 4],
      [owner.id, 'figures-owner@example.com', 1, 50_000, 0, 5, 1],
      [null, 'No member (operator keys)', 1, 20_000, 0, 2, 1],
    ]);
    expect(byMember.total).toMatchObject({ requests: 8, cost_micro_usd: 4_720_000, refunded_micro_usd: 150_000, input_tokens: 402, output_tokens: 41 });
    // The spend per day per member (refusals spend nothing and have no bar).
    expect(byMember.days).toEqual([
      { day: '2026-03-02', id: alice.id, spent_micro_usd: 1_000_000 },
      { day: '2026-03-02', id: bob.id, spent_micro_usd: 300_000 },
      { day: '2026-03-03', id: alice.id, spent_micro_usd: 3_200_000 },
      { day: '2026-03-04', id: bob.id, spent_micro_usd: 150_000 },
      { day: '2026-03-04', id: owner.id, spent_micro_usd: 50_000 },
      { day: '2026-03-05', id: null, spent_micro_usd: 20_000 },
    ].sort((a, b) => a.day.localeCompare(b.day) || (a.id ?? '').localeCompare(b.id ?? '')));

    // Per team: the team each request was charged to, not the key's team now.
    expect(figures(await totals(owner.c, `group=team&${MARCH}`))).toEqual([
      [search, 'search', 3, 3_500_000, 0, 300, 30],
      [ads, 'ads', 2, 1_000_000, 0, 80, 8],
      [null, 'No team', 3, 220_000, 150_000, 22, 3],
    ]);
    // Filters, with the grouping: alice's usage per team; the ads team's per member.
    expect(figures(await totals(owner.c, `group=team&member=${alice.id}&${MARCH}`))).toEqual([
      [search, 'search', 3, 3_500_000, 0, 300, 30],
      [ads, 'ads', 1, 700_000, 0, 50, 5],
    ]);
    expect(figures(await totals(owner.c, `group=member&team=${ads}&${MARCH}`))).toEqual([
      [alice.id, 'figures-alice@example.com', 1, 700_000, 0, 50, 5],
      [bob.id, 'figures-bob@example.com', 1, 300_000, 0, 30, 3],
    ]);
    expect((await totals(owner.c, `group=member&team=${ads}&member=${bob.id}&${MARCH}`)).total).toMatchObject({ requests: 1, cost_micro_usd: 300_000 });
    // The list of requests, filtered the same way.
    expect(await usageIds(owner.c, `member=${bob.id}`)).toEqual(['req_f4', 'req_f5']);
    expect(await usageIds(owner.c, `team=${search}`)).toEqual(['req_f1', 'req_f2', 'req_f8', 'req_f9']);
    expect(await usageIds(owner.c, `team=${search}&${MARCH}`)).toEqual(['req_f1', 'req_f2', 'req_f8']);
    const listed = (await owner.c.api('GET', `/api/usage?request_id=req_f3`)).json() as { usage: Array<{ team_id: string | null }> };
    expect(listed.usage.map((u) => u.team_id)).toEqual([ads]);

    // The CSV of requests: the filter, the member and team of each line, and a total that adds up.
    const csv = await owner.c.req('GET', `/api/usage.csv?team=${ads}&${MARCH}`);
    expect(csv.status).toBe(200);
    const [header, ...lines] = csv.text.trimEnd().split('\r\n');
    const cols = (header ?? '').split(',');
    const cell = (line: string | undefined, name: string): string | undefined => (line ?? '').split(',')[cols.indexOf(name)];
    expect(lines.map((l) => cell(l, 'request_id'))).toEqual(['req_f3', 'req_f4', '']);
    expect(lines.map((l) => cell(l, 'member_email'))).toEqual(['figures-alice@example.com', 'figures-bob@example.com', '']);
    expect(lines.map((l) => cell(l, 'team_name'))).toEqual(['ads', 'ads', '']);
    expect(cell(lines[2], 'cost_micro_usd')).toBe('1000000');
    // The CSV of totals per member: one line each, then the total.
    const grouped = await owner.c.req('GET', `/api/usage.csv?group=member&${MARCH}`);
    expect(grouped.status).toBe(200);
    expect(grouped.res.headers.get('content-disposition')).toContain('tollgate-usage-by-member-2026-03-01-2026-03-31.csv');
    expect(grouped.text.split('\r\n')).toEqual([
      'member_id,member_email,requests,cost_micro_usd,cost_usd,refunded_micro_usd,input_tokens,output_tokens,cached_input_tokens,cache_write_5m_tokens,cache_write_1h_tokens,reasoning_tokens,from,to',
      `${alice.id},figures-alice@example.com,4,4200000,4.200000,0,350,35,0,0,0,0,2026-03-01,2026-03-31`,
      `${bob.id},figures-bob@example.com,2,450000,0.450000,150000,45,4,0,0,0,0,2026-03-01,2026-03-31`,
      `${owner.id},figures-owner@example.com,1,50000,0.050000,0,5,1,0,0,0,0,2026-03-01,2026-03-31`,
      ',No member (operator keys),1,20000,0.020000,0,2,1,0,0,0,0,2026-03-01,2026-03-31',
      'total,,8,4720000,4.720000,150000,402,41,0,0,0,0,2026-03-01,2026-03-31',
      '',
    ]);
    const byTeamCsv = await owner.c.req('GET', `/usage.csv?group=team&member=${bob.id}&${MARCH}`);
    expect(byTeamCsv.text.split('\r\n').slice(1, 4)).toEqual([
      `${ads},ads,1,300000,0.300000,0,30,3,0,0,0,0,2026-03-01,2026-03-31`,
      ',No team,1,150000,0.150000,150000,15,1,0,0,0,0,2026-03-01,2026-03-31',
      'total,,2,450000,0.450000,150000,45,4,0,0,0,0,2026-03-01,2026-03-31',
    ]);

    // A member: their own usage only, whatever they ask; another member's is a 403, in words.
    expect(figures(await totals(bob.c, `group=member&${MARCH}`))).toEqual([[bob.id, 'figures-bob@example.com', 2, 450_000, 150_000, 45, 4]]);
    expect(figures(await totals(bob.c, `group=team&${MARCH}`))).toEqual([
      [ads, 'ads', 1, 300_000, 0, 30, 3],
      [null, 'No team', 1, 150_000, 150_000, 15, 1],
    ]);
    expect(await usageIds(bob.c, `member=${bob.id}&${MARCH}`)).toEqual(['req_f4', 'req_f5']);
    // ads is bob's team: filtering by it still shows only his own requests in it.
    expect(await usageIds(bob.c, `team=${ads}`)).toEqual(['req_f4']);
    for (const path of [`/api/usage?member=${alice.id}`, `/api/usage/totals?group=team&member=${alice.id}`, `/api/usage.csv?member=${alice.id}`, `/api/usage.csv?group=member&member=${alice.id}`]) {
      expect(await errorOf(bob.c, path), path).toEqual({ status: 403, message: "You can see only the usage of your own keys; an owner, admin or billing member sees every member's." });
    }
    // search is not bob's team: it answers as no team of the account.
    expect((await errorOf(bob.c, `/api/usage?team=${search}`)).status).toBe(400);
    const bobPage = await bob.c.req('GET', `/usage?member=${alice.id}`);
    expect(bobPage.status).toBe(403);
    expect(bobPage.text).toContain('You can see only the usage of your own keys');
    expect(bobPage.text).not.toContain('req_f1');
    expect(bobPage.text).not.toContain('figures-alice@example.com');
  });

  it('a filter or grouping that cannot be used is a 400 that says why, on the API, the CSV and the page', async () => {
    const { owner } = await organization('bad');
    const cases: Array<[string, string]> = [
      ['group=everyone', 'group must be one of member, team.'],
      ['member=usr_nobody', 'member must be the user id of a member of this account (see /api/members).'],
      ['team=team_nowhere', 'team must be the id of a team of this account (see /api/teams).'],
      ['from=2026-02-30', 'from must be a date like 2026-11-01.'],
      ['to=2026-13-01', 'to must be a date like 2026-11-01.'],
      ['from=2026-03-10&to=2026-03-01', 'from must be on or before to.'],
    ];
    for (const [query, message] of cases) {
      for (const path of [`/api/usage?${query}`, `/api/usage/totals?${query}`, `/api/usage.csv?${query}`]) expect(await errorOf(owner.c, path), path).toEqual({ status: 400, message });
      const page = await owner.c.req('GET', `/usage?${query}`);
      expect(page.status, query).toBe(400);
      expect(page.text).toContain(message.replace(/'/g, '&#39;'));
    }
  });

  it('a request is charged to the team its key was in when it was reserved: a key moved between two requests splits them; the Usage page shows both groupings with the chart', async () => {
    const { owner, alice, search, ads } = await organization('moved');
    const key = await createKey(alice.c, 'moving key', search);
    const openai = new OpenAI({ apiKey: key.secret, baseURL: `${harness.baseUrl}/v1`, maxRetries: 0 });
    const call = async (): Promise<{ id: string; cost: number }> => {
      const res = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 10 }).withResponse();
      const id = res.response.headers.get('x-request-id') ?? '';
      return until('the request in the record', async () => {
        const u = ((await owner.c.api('GET', `/api/usage?request_id=${id}`)).json() as { usage: Array<{ cost_micro_usd: number; team_id: string | null }> }).usage[0];
        return u === undefined ? undefined : { id, cost: u.cost_micro_usd };
      });
    };
    const first = await call();
    expect((await alice.c.api('PATCH', `/api/keys/${key.id}`, { team_id: ads })).status).toBe(200);
    // The gateway holds a key's record for a short TTL; dropped here so the next request sees the move now.
    harness.gateway.authenticator.forget();
    const second = await call();
    expect(first.cost).toBeGreaterThan(0);
    // This month so far, the default period.
    const byTeam = await totals(owner.c, 'group=team');
    const today = new Date().toISOString().slice(0, 10);
    expect(byTeam.from).toBe(`${today.slice(0, 7)}-01`);
    expect(byTeam.to).toBe(today);
    expect(byTeam.groups.map((g) => [g.id, g.requests, g.cost_micro_usd]).sort()).toEqual([[ads, 1, second.cost], [search, 1, first.cost]].sort());
    expect(figures(await totals(owner.c, 'group=member'))).toEqual([[alice.id, 'moved-alice@example.com', 2, first.cost + second.cost, 0, expect.any(Number), expect.any(Number)]]);

    // The page: the grouped table (a row per team, linked to its requests) and the chart, its bars titled.
    const page = await owner.c.req('GET', '/usage?group=team');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Spend per team,');
    expect(page.text).toContain('id="spend-by-team"');
    expect(page.text).toContain(`href="/usage?team=${ads}&amp;from=`);
    expect(page.text).toContain(`${today} · search: $${formatUsdAmount(first.cost)}</title>`);
    const memberPage = await owner.c.req('GET', `/usage?group=member&team=${search}`);
    expect(memberPage.text).toContain('id="spend-by-member"');
    expect(memberPage.text).toMatch(new RegExp(`moved-alice@example.com</a></td>\\s*<td data-label="Requests" class="num">1</td>`));
  });
});
