// A small CLI over the admin API: `npm run admin -- <command> [args]`.
// Reads TOLLGATE_ADMIN_URL (default http://127.0.0.1:8081) and TOLLGATE_ADMIN_TOKEN.
const USAGE = `usage: npm run admin -- <command>
  accounts                                  list accounts
  create-account <name>
  account <accountId>                       balance and details
  create-key <accountId> [name] [--lifetime-cap USD] [--monthly-cap USD]
  keys <accountId>
  revoke <accountId> <keyId>
  caps <accountId> <keyId> [--lifetime-cap USD] [--monthly-cap USD]   (omit both to clear)
  credit <accountId> <USD> <idempotencyKey>
  refund <accountId> <requestId>
  usage <accountId> [keyId]
  audit <accountId>`;

/** Positional arguments each command needs. */
const NEEDS: Record<string, number> = { account: 1, 'create-key': 1, keys: 1, revoke: 2, caps: 2, credit: 3, refund: 2, usage: 1, audit: 1 };

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
}

async function main(argv: string[]): Promise<number> {
  const base = process.env.TOLLGATE_ADMIN_URL ?? 'http://127.0.0.1:8081';
  const token = process.env.TOLLGATE_ADMIN_TOKEN ?? '';
  const args = [...argv];
  const lifetime = flag(args, '--lifetime-cap');
  const monthly = flag(args, '--monthly-cap');
  const caps = { ...(lifetime ? { lifetime_cap_usd: lifetime } : {}), ...(monthly ? { monthly_cap_usd: monthly } : {}) };
  const [cmd, ...rest] = args;
  const call = async (method: string, path: string, body?: unknown): Promise<number> => {
    const res = await fetch(`${base}/admin${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    let shown = text;
    try {
      shown = JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      // not JSON (a proxy's error page, say): shown as it came
    }
    process.stdout.write(`${shown}\n`);
    return res.ok ? 0 : 1;
  };
  // Ids go into the path: required (a missing one is a usage error, not a call to ".../undefined") and encoded.
  const needs = NEEDS[cmd ?? ''] ?? 0;
  if (rest.slice(0, needs).filter((v) => v !== '').length < needs) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const [a = '', b = '', c = ''] = rest;
  const id = encodeURIComponent;
  switch (cmd) {
    case 'accounts':
      return call('GET', '/accounts');
    case 'create-account':
      return call('POST', '/accounts', { name: a || 'account' });
    case 'account':
      return call('GET', `/accounts/${id(a)}`);
    case 'create-key':
      return call('POST', `/accounts/${id(a)}/keys`, { name: b || 'key', ...caps });
    case 'keys':
      return call('GET', `/accounts/${id(a)}/keys`);
    case 'revoke':
      return call('POST', `/accounts/${id(a)}/keys/${id(b)}/revoke`);
    case 'caps':
      return call('PUT', `/accounts/${id(a)}/keys/${id(b)}/caps`, caps);
    case 'credit':
      return call('POST', `/accounts/${id(a)}/credit`, { amount_usd: b, idempotency_key: c });
    case 'refund':
      return call('POST', `/accounts/${id(a)}/refund`, { request_id: b });
    case 'usage':
      return call('GET', `/accounts/${id(a)}/usage${b ? `?key_id=${id(b)}` : ''}`);
    case 'audit':
      return call('GET', `/accounts/${id(a)}/audit`);
    default:
  }
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`admin: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
