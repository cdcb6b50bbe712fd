// `npm start` twice against one data folder: the demo account, its balance and its usage survive the
// restart (the embedded PostgreSQL is the record; the memory hot path is rebuilt from it at start).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openPglite } from '../../src/record/database.js';

const ROOT = join(import.meta.dirname, '..', '..');
const dataDir = mkdtempSync(join(tmpdir(), 'tg-local-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

interface LocalRun {
  child: ChildProcess;
  url: string;
  account: string;
  balance: number;
  key: string;
  /** The admin API's base URL and its (random, per start) token. */
  adminUrl: string;
  adminToken: string;
  dashboardUrl: string;
  demoEmail: string;
  demoPassword: string;
  banner: string;
}

/** The printed balance `9.998765 USD` as micro-USD, without a float. */
function micros(printed: string): number {
  const [whole = '0', frac = ''] = printed.split('.');
  return Number(whole) * 1_000_000 + Number(frac.padEnd(6, '0').slice(0, 6));
}

async function startLocal(): Promise<LocalRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', METRICS_PORT: '0', ADMIN_PORT: '0', SIM_PORT: '0', DASHBOARD_PORT: '0', TOLLGATE_DATA_DIR: dataDir };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'REDIS_CLUSTER_NODES', 'TOLLGATE_DEMO_KEY', 'TOLLGATE_SIMULATOR_URL']) delete env[name];
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'local-main.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`local run did not start: ${out} ${err}`)), 20_000);
    child.on('exit', (code) => reject(new Error(`local run exited ${String(code)}: ${err}`)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /running at (http:\/\/\S+)\/v1/.exec(out)?.[1];
      const acct = /Demo account (\S+), balance ([0-9.]+) USD/.exec(out);
      const key = /API key: (\S+)/.exec(out)?.[1];
      const admin = /Admin API: (\S+) \(token: (\S+)\)/.exec(out);
      const dash = /Dashboard: (\S+) \(sign in as (\S+), password (\S+)\)/.exec(out);
      if (url !== undefined && acct !== null && key !== undefined && admin !== null && dash !== null && out.includes('Top-ups:')) {
        clearTimeout(timer);
        resolve({
          child,
          url,
          account: acct[1] ?? '',
          balance: micros(acct[2] ?? ''),
          key,
          adminUrl: admin[1] ?? '',
          adminToken: admin[2] ?? '',
          dashboardUrl: dash[1] ?? '',
          demoEmail: dash[2] ?? '',
          demoPassword: dash[3] ?? '',
          banner: out,
        });
      }
    });
  });
}

/** The demo account's usage listing through the admin API, newest first. */
async function listUsage(run: LocalRun): Promise<Array<{ requestId: string; cost: number }>> {
  const res = await fetch(`${run.adminUrl}/accounts/${run.account}/usage`, { headers: { authorization: `Bearer ${run.adminToken}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { usage: Array<{ requestId: string; cost: number }> }).usage;
}

async function stop(run: LocalRun): Promise<void> {
  const exited = new Promise<void>((resolve) => run.child.once('exit', () => resolve()));
  run.child.kill('SIGTERM');
  await exited;
}

describe('npm start twice', () => {
  it('keeps the demo account, its balance and its usage', { timeout: 60_000 }, async () => {
    const first = await startLocal();
    expect(first.balance).toBe(10_000_000);
    const res = await fetch(`${first.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'Hello!' }] }),
    });
    expect(res.status).toBe(200);
    await res.json();
    const firstRequest = res.headers.get('x-request-id');
    await stop(first);

    const db = await openPglite(dataDir);
    let charged: number;
    try {
      const usage = await db.query<{ n: number; cost: number }>('SELECT count(*)::int AS n, COALESCE(sum(cost), 0)::bigint AS cost FROM usage_records WHERE account_id = $1', [first.account]);
      expect(usage.rows[0]?.n).toBe(1);
      charged = usage.rows[0]?.cost ?? 0;
    } finally {
      await db.close();
    }
    expect(charged).toBeGreaterThan(0);

    const second = await startLocal();
    try {
      expect(second.account).toBe(first.account);
      expect(second.balance).toBe(10_000_000 - charged);
      // The new start's key works against the rebuilt balance.
      const again = await fetch(`${second.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${second.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'Hello again!' }] }),
      });
      expect(again.status).toBe(200);
      await again.json();
      // The usage listing comes from the record: the first start's request is still listed (the hot
      // path it was settled in is gone), and the new one joins it once the journal commits it.
      let usage = await listUsage(second);
      expect(usage.map((u) => u.requestId)).toContain(firstRequest);
      for (let i = 0; i < 100 && usage.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 50));
        usage = await listUsage(second);
      }
      expect(usage.map((u) => u.requestId)).toEqual([again.headers.get('x-request-id'), firstRequest]);
      expect(usage[1]?.cost).toBe(charged);

      // A new user can top up in the demo: payments run in a labelled test mode against the fakes.
      expect(second.banner).toMatch(/Top-ups: TEST MODE, no real money/);
      const signIn = await fetch(`${second.dashboardUrl}/api/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: second.demoEmail, password: second.demoPassword }),
      });
      expect(signIn.status).toBe(200);
      const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
      const { csrf_token: csrf } = (await signIn.json()) as { csrf_token: string };
      const api = (path: string, body?: unknown) =>
        fetch(`${second.dashboardUrl}${path}`, {
          method: body === undefined ? 'GET' : 'POST',
          headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const before = ((await (await api('/api/balance')).json()) as { balance_micro_usd: number }).balance_micro_usd;
      const started = await api('/api/top-ups', { amount_usd: '10.00', provider: 'stripe' });
      expect(started.status).toBe(201);
      const { checkout_url: checkoutUrl, top_up: topUp } = (await started.json()) as { checkout_url: string; top_up: { total_cents: number; fee_cents: number } };
      expect(topUp).toMatchObject({ total_cents: 1065, fee_cents: 65 });
      expect(await (await fetch(checkoutUrl)).text()).toMatch(/Test mode: no real money moves/);
      const paid = await fetch(checkoutUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'outcome=paid', redirect: 'manual' });
      expect(paid.status).toBe(303);
      const after = ((await (await api('/api/balance')).json()) as { balance_micro_usd: number }).balance_micro_usd;
      expect(after - before).toBe(10_000_000);
    } finally {
      await stop(second);
    }
  });
});
