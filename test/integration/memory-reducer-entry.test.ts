// The production entry gives back, once idle, the heap pages its start grew (issue 41: idle RSS), and
// leaves a busy process alone: gateway-main as a process, checking every second instead of every 8 s.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';
import { until } from '../e2e/e2e-support.js';
import { EXAMPLE_MODELS } from '../helpers/gateway-harness.js';
import { startRedisServer, type OwnRedisProcess } from '../helpers/redis-server.js';

interface Reduced {
  rss_before_mib: number;
  rss_after_mib: number;
  pause_ms: number;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startEntry(redis: OwnRedisProcess, sim: Simulator, intervalMs: number): Promise<{ child: ChildProcess; lines: string[]; url: string }> {
  const { DATABASE_URL: _db, TOLLGATE_CATALOG_FILE: _file, ...env } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', new URL('../../src/gateway-main.ts', import.meta.url).pathname], {
    env: { ...env, REDIS_URL: redis.url, PORT: '0', METRICS_PORT: '0', TOLLGATE_SIMULATOR_URL: sim.url, TOLLGATE_MEMORY_REDUCER_INTERVAL_MS: String(intervalMs) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanups.push(() => void child.kill('SIGKILL'));
  const lines: string[] = [];
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (l) => lines.push(l));
  const started = await until('gateway-main to start', () => lines.find((l) => l.includes('tollgate gateway started')), 30_000);
  return { child, lines, url: (JSON.parse(started) as { url: string }).url };
}

const reductions = (lines: string[]): Reduced[] => lines.filter((l) => l.includes('"memory_reduced"')).map((l) => JSON.parse(l) as Reduced);

describe('the production entry’s idle memory reduction', () => {
  it('gives back what the start grew once idle, once, and never while requests keep it busy', async () => {
    const redis = await startRedisServer({});
    cleanups.push(() => redis.stop());
    const sim = await startSimulator({});
    cleanups.push(() => sim.close());
    const { lines, url } = await startEntry(redis, sim, 1000);

    const first = await until('the first reduction', () => reductions(lines)[0], 15_000);
    expect(first.rss_before_mib - first.rss_after_mib).toBeGreaterThan(10);
    // Idle after it, nothing grown: no second one.
    await new Promise((r) => setTimeout(r, 3500));
    expect(reductions(lines)).toHaveLength(1);

    // Busy: 8 clients back to back for four intervals. No reduction while it lasts.
    const conn = new Redis(redis.url);
    cleanups.push(() => void conn.disconnect());
    const backend = createRedisBackend({ redis: conn });
    const account = await backend.accounts.createAccount('memory-reducer');
    await backend.ledger.credit(account.id, 100_000_000, 'start');
    const { secret } = await backend.accounts.createKey(account.id, { name: 'memory-reducer' });
    const body = JSON.stringify({ model: EXAMPLE_MODELS[0]?.id, messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 });
    const before = reductions(lines).length;
    const until4s = Date.now() + 4000;
    let served = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (Date.now() < until4s) {
          const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body });
          expect(r.status).toBe(200);
          await r.arrayBuffer();
          served += 1;
        }
      }),
    );
    expect(served).toBeGreaterThan(100);
    expect(reductions(lines).length).toBe(before);
  }, 60_000);
});
