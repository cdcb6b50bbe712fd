// A small CLI over the admin API: `npm run admin -- <command> [args]`.
// Reads TOLLGATE_ADMIN_URL (default http://127.0.0.1:8081) and TOLLGATE_ADMIN_TOKEN.
// Changing a key or an account's defaults sends only the options given (a PATCH): what is not given is
// kept, and `none` as an option's value clears it (`--monthly-cap none`, `--rpm none`, `max-cost … none`).
import { readFileSync } from 'node:fs';

const USAGE = `usage: npm run admin -- <command>
  accounts                                  list accounts
  create-account <name>
  account <accountId>                       balance and details
  create-key <accountId> [name] [--lifetime-cap USD] [--monthly-cap USD] [--max-cost-per-request USD] [--rpm N] [--tpm N] [--concurrency N] [--team ID]
  keys <accountId>
  revoke <accountId> <keyId>
  caps <accountId> <keyId> [--lifetime-cap USD|none] [--monthly-cap USD|none] [--max-cost-per-request USD|none]
  max-cost <accountId> <keyId> <USD|none>   a key's default cost ceiling per request
  rate-limits <accountId> <keyId> [--rpm N|none] [--tpm N|none] [--concurrency N|none]   a key's own limits
  default-rate-limits <accountId> [--rpm N|none] [--tpm N|none] [--concurrency N|none]   the account's default for its keys
                                            caps, rate-limits, default-rate-limits change only the
                                            options given (at least one); none clears one
  credit <accountId> <USD> <idempotencyKey>
  refund <accountId> <requestId>
  usage <accountId> [keyId] [--key ID] [--model M] [--status S] [--from T] [--to T] [--cursor C] [--limit N] [--all]
                                            newest first, a page at a time (next_cursor); --all follows
                                            every page and prints one JSON list. T: ISO 8601 or unix ms
  statement <accountId> [--cursor C] [--limit N]   ledger entries with the running balance
  spend <accountId> [--key ID] [--days N]   each key's spend per day
  audit <accountId>
  members <accountId>                       who signs in to the account (an organization's members), with roles
  teams <accountId>                         teams with their budgets, members and spend
  create-team <accountId> <name> [--monthly-budget USD] [--lifetime-budget USD]
  team <accountId> <teamId> [--name N] [--monthly-budget USD|none] [--lifetime-budget USD|none]
  delete-team <accountId> <teamId>          its keys leave it; what they spent stays charged to it
  team-member <accountId> <teamId> <userId> add|remove
  budgets <accountId>                       members' budgets that are set, with their spend
  member-budget <accountId> <userId> [--monthly-budget USD|none] [--lifetime-budget USD|none]
  key-team <accountId> <keyId> <teamId|none>   put a key in a team (or in none)
                                            team and member-budget change only the options given
  audit-log list [--account ID] [--who W] [--action PREFIX] [--from T] [--to T] [--cursor C] [--limit N]
                                            who changed what, newest first (the record's audit log)
  audit-log verify [--expect-seq N --expect-hash H]   recomputes the log's chain; exits 1 naming the
                                            first entry that does not match (N, H: a head exported before)
  audit-log head                            the newest entry's number and hash: keep it somewhere you trust`;

/** An option's value that clears the setting rather than sets it. */
const CLEAR = 'none';

/** Commands that change only what their options name: at least one is needed. */
const CHANGES = new Set(['caps', 'rate-limits', 'default-rate-limits', 'team', 'member-budget']);

/** Positional arguments each command needs. */
const NEEDS: Record<string, number> = {
  account: 1, 'create-key': 1, keys: 1, revoke: 2, caps: 2, 'max-cost': 3, 'rate-limits': 2, 'default-rate-limits': 1, credit: 3, refund: 2, usage: 1, statement: 1, spend: 1, audit: 1, members: 1,
  teams: 1, 'create-team': 2, team: 2, 'delete-team': 2, 'team-member': 4, budgets: 1, 'member-budget': 2, 'key-team': 3, 'audit-log': 1,
};

/** Query-string flags of the listing commands: --key is key_id, the others keep their names (dashes as underscores). */
const QUERY_FLAGS: Record<string, string> = {
  '--key': 'key_id', '--model': 'model', '--status': 'status', '--from': 'from', '--to': 'to', '--cursor': 'cursor', '--limit': 'limit', '--days': 'days',
  '--account': 'account_id', '--who': 'who', '--action': 'action', '--expect-seq': 'expect_seq', '--expect-hash': 'expect_hash',
};

/** The CLI names itself to the admin API (which tells the audit log its changes are the CLI's): tollgate-cli/<version>. */
function userAgent(): string {
  // From source (src/admin) or the compiled tree (dist/src/admin): package.json is two or three folders up.
  for (const up of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'tollgate' && typeof pkg.version === 'string') return `tollgate-cli/${pkg.version}`;
    } catch {
      // not there: the next place
    }
  }
  return 'tollgate-cli/unknown';
}

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
}

interface Parsed {
  cmd: string | undefined;
  rest: string[];
  /** --lifetime-cap and --monthly-cap as the admin API's body fields (null: none, cleared). */
  caps: { lifetime_cap_usd?: string | null; monthly_cap_usd?: string | null };
  /** --max-cost-per-request as the admin API's body field (null: none, cleared). */
  maxCost: { max_cost_per_request_usd?: string | null };
  /** --rpm, --tpm and --concurrency as the admin API's body fields (numbers, null for none; the API refuses bad ones). */
  limits: Record<string, number | string | null>;
  /** --monthly-budget, --lifetime-budget (null: none, cleared) and --name of a team, as the admin API's body fields. */
  team: { monthly_budget_usd?: string | null; lifetime_budget_usd?: string | null; name?: string };
  /** --team of create-key: the key's team. */
  keyTeam: { team_id?: string };
  /** The listing commands' flags as a query string. */
  query: URLSearchParams;
  /** --all: every page of the usage listing. */
  all: boolean;
}

/** The command, its positional arguments and its flags. */
function parseArgs(argv: string[]): Parsed {
  const args = [...argv];
  const caps: Parsed['caps'] = {};
  for (const [name, field] of [['--lifetime-cap', 'lifetime_cap_usd'], ['--monthly-cap', 'monthly_cap_usd']] as const) {
    const v = flag(args, name);
    if (v !== undefined) caps[field] = v === CLEAR ? null : v;
  }
  const maxCostFlag = flag(args, '--max-cost-per-request');
  const maxCost: Parsed['maxCost'] = maxCostFlag === undefined ? {} : { max_cost_per_request_usd: maxCostFlag === CLEAR ? null : maxCostFlag };
  const limits: Parsed['limits'] = {};
  for (const [name, field] of [['--rpm', 'requests_per_minute'], ['--tpm', 'tokens_per_minute'], ['--concurrency', 'concurrent_requests']] as const) {
    const v = flag(args, name);
    // A number when it reads as one, else as typed, so the API's own message says what is wrong with it.
    if (v !== undefined) limits[field] = v === CLEAR ? null : /^\d+$/.test(v) ? Number(v) : v;
  }
  const team: Parsed['team'] = {};
  for (const [name, field] of [['--monthly-budget', 'monthly_budget_usd'], ['--lifetime-budget', 'lifetime_budget_usd']] as const) {
    const v = flag(args, name);
    if (v !== undefined) team[field] = v === CLEAR ? null : v;
  }
  const teamName = flag(args, '--name');
  if (teamName !== undefined) team.name = teamName;
  const keyTeamFlag = flag(args, '--team');
  const keyTeam: Parsed['keyTeam'] = keyTeamFlag === undefined ? {} : { team_id: keyTeamFlag };
  const query = new URLSearchParams();
  for (const [name, param] of Object.entries(QUERY_FLAGS)) {
    const v = flag(args, name);
    if (v !== undefined) query.set(param, v);
  }
  const all = args.includes('--all');
  if (all) args.splice(args.indexOf('--all'), 1);
  const [cmd, ...rest] = args;
  return { cmd, rest, caps, maxCost, limits, team, keyTeam, query, all };
}

/** A response body as it came, pretty-printed when it is JSON. */
function print(text: string): void {
  let shown = text;
  try {
    shown = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    // not JSON (a proxy's error page, say): shown as it came
  }
  process.stdout.write(`${shown}\n`);
}

interface AdminCalls {
  /** One call, its answer printed; the exit code. */
  call(method: string, path: string, body?: unknown): Promise<number>;
  /** A check (the audit log's verify): its answer printed; exit code 1 unless the call worked and its `ok` is true. */
  check(path: string): Promise<number>;
  /** Every page of the usage listing, printed as one JSON list. */
  callAll(path: string, query: URLSearchParams): Promise<number>;
}

function adminCalls(base: string, token: string): AdminCalls {
  const request = (method: string, path: string, body?: unknown): Promise<Response> =>
    fetch(`${base}/admin${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'user-agent': userAgent() },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  return {
    async call(method, path, body) {
      const res = await request(method, path, body);
      print(await res.text());
      return res.ok ? 0 : 1;
    },
    async check(path) {
      const res = await request('GET', path);
      const text = await res.text();
      print(text);
      if (!res.ok) return 1;
      return (JSON.parse(text) as { ok?: unknown }).ok === true ? 0 : 1;
    },
    async callAll(path, query) {
      const usage: unknown[] = [];
      for (;;) {
        const res = await request('GET', `${path}?${query.toString()}`);
        const text = await res.text();
        if (!res.ok) {
          print(text);
          return 1;
        }
        const page = JSON.parse(text) as { usage: unknown[]; next_cursor?: string | null };
        usage.push(...page.usage);
        if (page.next_cursor === undefined || page.next_cursor === null) break;
        query.set('cursor', page.next_cursor);
      }
      print(JSON.stringify({ usage }));
      return 0;
    },
  };
}

/** Runs one command; undefined for a command that does not exist. */
function run(p: Parsed, api: AdminCalls): Promise<number> | undefined {
  const { call } = api;
  const [a = '', b = '', c = '', d = ''] = p.rest;
  const id = encodeURIComponent;
  const withQuery = (path: string): string => (p.query.size === 0 ? path : `${path}?${p.query.toString()}`);
  switch (p.cmd) {
    case 'accounts':
      return call('GET', '/accounts');
    case 'create-account':
      return call('POST', '/accounts', { name: a || 'account' });
    case 'account':
      return call('GET', `/accounts/${id(a)}`);
    case 'create-key':
      return call('POST', `/accounts/${id(a)}/keys`, { name: b || 'key', ...p.caps, ...p.maxCost, ...p.limits, ...p.keyTeam });
    case 'keys':
      return call('GET', `/accounts/${id(a)}/keys`);
    case 'revoke':
      return call('POST', `/accounts/${id(a)}/keys/${id(b)}/revoke`);
    case 'caps':
    case 'rate-limits':
      return call('PATCH', `/accounts/${id(a)}/keys/${id(b)}`, { ...p.caps, ...p.maxCost, ...p.limits });
    case 'max-cost':
      return call('PATCH', `/accounts/${id(a)}/keys/${id(b)}`, { max_cost_per_request_usd: c === CLEAR ? null : c });
    case 'default-rate-limits':
      return call('PATCH', `/accounts/${id(a)}/rate-limits`, p.limits);
    case 'credit':
      return call('POST', `/accounts/${id(a)}/credit`, { amount_usd: b, idempotency_key: c });
    case 'refund':
      return call('POST', `/accounts/${id(a)}/refund`, { request_id: b });
    case 'usage':
      if (b) p.query.set('key_id', b);
      return p.all ? api.callAll(`/accounts/${id(a)}/usage`, p.query) : call('GET', withQuery(`/accounts/${id(a)}/usage`));
    case 'statement':
      return call('GET', withQuery(`/accounts/${id(a)}/statement`));
    case 'spend':
      return call('GET', withQuery(`/accounts/${id(a)}/spend`));
    case 'audit':
      return call('GET', `/accounts/${id(a)}/audit`);
    case 'members':
      return call('GET', `/accounts/${id(a)}/members`);
    case 'teams':
      return call('GET', `/accounts/${id(a)}/teams`);
    case 'create-team':
      return call('POST', `/accounts/${id(a)}/teams`, { name: b, ...p.team });
    case 'team':
      return call('PATCH', `/accounts/${id(a)}/teams/${id(b)}`, p.team);
    case 'delete-team':
      return call('DELETE', `/accounts/${id(a)}/teams/${id(b)}`);
    case 'team-member':
      if (d !== 'add' && d !== 'remove') return undefined;
      return call(d === 'add' ? 'PUT' : 'DELETE', `/accounts/${id(a)}/teams/${id(b)}/members/${id(c)}`);
    case 'budgets':
      return call('GET', `/accounts/${id(a)}/budgets`);
    case 'member-budget':
      return call('PATCH', `/accounts/${id(a)}/members/${id(b)}/budgets`, { monthly_budget_usd: p.team.monthly_budget_usd, lifetime_budget_usd: p.team.lifetime_budget_usd });
    case 'audit-log':
      if (a === 'list') return call('GET', withQuery('/audit-log'));
      if (a === 'verify') return api.check(withQuery('/audit-log/verify'));
      if (a === 'head') return call('GET', '/audit-log/head');
      return undefined;
    case 'key-team':
      return call('PATCH', `/accounts/${id(a)}/keys/${id(b)}`, { team_id: c === CLEAR ? null : c });
    default:
      return undefined;
  }
}

async function main(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv);
  // Ids go into the path: required (a missing one is a usage error, not a call to ".../undefined") and encoded.
  const needs = NEEDS[parsed.cmd ?? ''] ?? 0;
  const nothingToChange = CHANGES.has(parsed.cmd ?? '') && Object.keys(parsed.caps).length + Object.keys(parsed.maxCost).length + Object.keys(parsed.limits).length + Object.keys(parsed.team).length === 0;
  const ran =
    parsed.rest.slice(0, needs).filter((v) => v !== '').length < needs || nothingToChange
      ? undefined
      : run(parsed, adminCalls(process.env.TOLLGATE_ADMIN_URL ?? 'http://127.0.0.1:8081', process.env.TOLLGATE_ADMIN_TOKEN ?? ''));
  if (ran !== undefined) return ran;
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

main(process.argv.slice(2)).then(
  // Exit once stdout has taken everything: on a pipe a write is asynchronous, and exiting at once cut
  // a long listing short. Write callbacks run in order, so this one runs after the listing's.
  (code) => process.stdout.write('', () => process.exit(code)),
  (err: unknown) => {
    process.stderr.write(`admin: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
