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
}

/** The printed balance `9.998765 USD` as micro-USD, without a float. */
function micros(printed: string): number {
  const [whole = '0', frac = ''] = printed.split('.');
  return Number(whole) * 1_000_000 + Number(frac.padEnd(6, '0').slice(0, 6));
}

async function startLocal(): Promise<LocalRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', METRICS_PORT: '0', ADMIN_PORT: '0', SIM_PORT: '0', TOLLGATE_DATA_DIR: dataDir };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'REDIS_CLUSTER_NODES', 'TOLLGATE_DEMO_KEY', 'TOLLGATE_SIMULATOR_URL']) delete env[name];
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'main.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
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
      if (url !== undefined && acct !== null && key !== undefined && out.includes('Admin API')) {
        clearTimeout(timer);
        resolve({ child, url, account: acct[1] ?? '', balance: micros(acct[2] ?? ''), key });
      }
    });
  });
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
    } finally {
      await stop(second);
    }
  });
});
