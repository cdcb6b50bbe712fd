// A small CLI over the admin API: `npm run admin -- <command> [args]`.
// Reads TOLLGATE_ADMIN_URL (default http://127.0.0.1:8081) and TOLLGATE_ADMIN_TOKEN.
const USAGE = `usage: npm run admin -- <command>
  accounts                                  list accounts
  create-account <name>
  account <accountId>                       balance and details
  create-key <accountId> [name] [--lifetime-cap USD] [--monthly-cap USD] [--max-cost-per-request USD]
  keys <accountId>
  revoke <accountId> <keyId>
  caps <accountId> <keyId> [--lifetime-cap USD] [--monthly-cap USD]   (omit both to clear)
  max-cost <accountId> <keyId> [USD]         a key's default cost ceiling per request (omitted: cleared)
  rate-limits <accountId> <keyId> [--rpm N] [--tpm N] [--concurrency N]   a key's own limits (omitted: cleared)
  default-rate-limits <accountId> [--rpm N] [--tpm N] [--concurrency N]   the account's default for its keys
  credit <accountId> <USD> <idempotencyKey>
  refund <accountId> <requestId>
  usage <accountId> [keyId] [--key ID] [--model M] [--status S] [--from T] [--to T] [--cursor C] [--limit N] [--all]
                                            newest first, a page at a time (next_cursor); --all follows
                                            every page and prints one JSON list. T: ISO 8601 or unix ms
  statement <accountId> [--cursor C] [--limit N]   ledger entries with the running balance
  spend <accountId> [--key ID] [--days N]   each key's spend per day
  audit <accountId>`;

/** Positional arguments each command needs. */
const NEEDS: Record<string, number> = { account: 1, 'create-key': 1, keys: 1, revoke: 2, caps: 2, 'max-cost': 2, 'rate-limits': 2, 'default-rate-limits': 1, credit: 3, refund: 2, usage: 1, statement: 1, spend: 1, audit: 1 };

/** Query-string flags of the listing commands: --key is key_id, the others keep their names. */
const QUERY_FLAGS: Record<string, string> = { '--key': 'key_id', '--model': 'model', '--status': 'status', '--from': 'from', '--to': 'to', '--cursor': 'cursor', '--limit': 'limit', '--days': 'days' };

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
  /** --lifetime-cap and --monthly-cap as the admin API's body fields. */
  caps: { lifetime_cap_usd?: string; monthly_cap_usd?: string };
  /** --max-cost-per-request as the admin API's body field. */
  maxCost: { max_cost_per_request_usd?: string };
  /** --rpm, --tpm and --concurrency as the admin API's body fields (numbers; the API refuses bad ones). */
  limits: Record<string, number | string>;
  /** The listing commands' flags as a query string. */
  query: URLSearchParams;
  /** --all: every page of the usage listing. */
  all: boolean;
}

/** The command, its positional arguments and its flags. */
function parseArgs(argv: string[]): Parsed {
  const args = [...argv];
  const lifetime = flag(args, '--lifetime-cap');
  const monthly = flag(args, '--monthly-cap');
  const caps = { ...(lifetime ? { lifetime_cap_usd: lifetime } : {}), ...(monthly ? { monthly_cap_usd: monthly } : {}) };
  const maxCostFlag = flag(args, '--max-cost-per-request');
  const maxCost = maxCostFlag ? { max_cost_per_request_usd: maxCostFlag } : {};
  const limits: Record<string, number | string> = {};
  for (const [name, field] of [['--rpm', 'requests_per_minute'], ['--tpm', 'tokens_per_minute'], ['--concurrency', 'concurrent_requests']] as const) {
    const v = flag(args, name);
    // A number when it reads as one, else as typed, so the API's own message says what is wrong with it.
    if (v !== undefined) limits[field] = /^\d+$/.test(v) ? Number(v) : v;
  }
  const query = new URLSearchParams();
  for (const [name, param] of Object.entries(QUERY_FLAGS)) {
    const v = flag(args, name);
    if (v !== undefined) query.set(param, v);
  }
  const all = args.includes('--all');
  if (all) args.splice(args.indexOf('--all'), 1);
  const [cmd, ...rest] = args;
  return { cmd, rest, caps, maxCost, limits, query, all };
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
  /** Every page of the usage listing, printed as one JSON list. */
  callAll(path: string, query: URLSearchParams): Promise<number>;
}

function adminCalls(base: string, token: string): AdminCalls {
  const request = (method: string, path: string, body?: unknown): Promise<Response> =>
    fetch(`${base}/admin${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  return {
    async call(method, path, body) {
      const res = await request(method, path, body);
      print(await res.text());
      return res.ok ? 0 : 1;
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
  const [a = '', b = '', c = ''] = p.rest;
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
      return call('POST', `/accounts/${id(a)}/keys`, { name: b || 'key', ...p.caps, ...p.maxCost });
    case 'keys':
      return call('GET', `/accounts/${id(a)}/keys`);
    case 'revoke':
      return call('POST', `/accounts/${id(a)}/keys/${id(b)}/revoke`);
    case 'caps':
      return call('PUT', `/accounts/${id(a)}/keys/${id(b)}/caps`, p.caps);
    case 'max-cost':
      return call('PUT', `/accounts/${id(a)}/keys/${id(b)}/max-cost-per-request`, c ? { max_cost_per_request_usd: c } : {});
    case 'rate-limits':
      return call('PUT', `/accounts/${id(a)}/keys/${id(b)}/rate-limits`, p.limits);
    case 'default-rate-limits':
      return call('PUT', `/accounts/${id(a)}/rate-limits`, p.limits);
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
    default:
      return undefined;
  }
}

async function main(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv);
  // Ids go into the path: required (a missing one is a usage error, not a call to ".../undefined") and encoded.
  const needs = NEEDS[parsed.cmd ?? ''] ?? 0;
  const ran =
    parsed.rest.slice(0, needs).filter((v) => v !== '').length < needs
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
