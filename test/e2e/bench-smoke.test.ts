// Runs the benchmark's smoke mode end to end (real Redis, simulator, floor proxy, gateway processes) and
// checks it wrote every row with no failed responses. Timings are not asserted: CI machines vary.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { JournalCost } from '../../bench/journal-slices.js';

const run = promisify(execFile);

interface SmokeResults {
  mode: string;
  errors: string[];
  rows: { format: string; target: string; throughput: { requests: number; non2xx: number; errors: number }; sequential: { non2xx: number } }[];
  streaming: { format: string; target: string; non2xx: number; ttftP50: number }[];
  tracing: { mode: string; requests: number; non2xx: number; errors: number }[];
  journal: JournalCost;
  journalOwnCore?: JournalCost;
  redisPerRequest: Record<string, { total: number }>;
  ledger: { pairs: number };
  memory: { streams: number; opened: number };
}

describe('bench --smoke', () => {
  it('measures every target in both formats with zero non-2xx responses', async () => {
    const root = new URL('../../', import.meta.url).pathname;
    await run('node', ['--import', 'tsx', 'bench/run.ts', '--smoke'], { cwd: root, timeout: 240_000 });
    const r = JSON.parse(readFileSync(`${root}bench/results/latest.json`, 'utf8')) as SmokeResults;
    expect(r.mode).toBe('smoke');
    expect(r.errors).toEqual([]);
    const targets = ['direct (simulator)', 'floor proxy', 'tollgate'];
    for (const format of ['openai', 'anthropic']) {
      for (const target of targets) {
        const row = r.rows.find((x) => x.format === format && x.target === target);
        expect(row, `${format} ${target}`).toBeDefined();
        expect(row?.throughput.requests).toBeGreaterThan(0);
        expect(row?.throughput.non2xx).toBe(0);
        expect(row?.throughput.errors).toBe(0);
        expect(row?.sequential.non2xx).toBe(0);
        const stream = r.streaming.find((x) => x.format === format && x.target === target);
        expect(stream?.non2xx).toBe(0);
        expect(stream?.ttftP50).toBeGreaterThan(0);
      }
      expect(r.redisPerRequest[format]?.total).toBeGreaterThan(0);
    }
    expect(r.tracing.map((t) => t.mode)).toEqual(['off', 'sampled-0', 'sampled-100']);
    for (const t of r.tracing) expect(t.non2xx + t.errors).toBe(0);
    // The journal's cost both ways: every core shared, and (with two cores or more) the gateway on its own.
    const journalRuns = cpus().length >= 2 ? [r.journal, r.journalOwnCore] : [r.journal];
    for (const cost of journalRuns) {
      expect(cost?.modes.map((t) => t.mode)).toEqual(['off', 'on']);
      expect(cost?.pairs).toBeGreaterThan(0);
      expect(cost?.ratio).toBeGreaterThan(0);
      for (const t of cost?.modes ?? []) {
        expect(t.requests).toBeGreaterThan(0);
        expect(t.failed).toBe(0);
      }
    }
    expect(r.ledger.pairs).toBeGreaterThan(0);
    expect(r.memory.opened).toBe(r.memory.streams);
  }, 250_000);
});
