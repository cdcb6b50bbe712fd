// The gateway on two Node releases side by side (issue 38): the same build of the project run by each
// binary, both gateways over one Redis and one simulator, driven in interleaved rounds (alternating which
// goes first) at 50 connections for CPU per request and throughput, then at one connection for the
// median latency, in both client formats; idle RSS after start. Prints a JSON summary and a Markdown
// table for docs/performance.md.
//   npm run bench:node -- [--other /usr/bin/node] [--rounds 7]
// The first binary is this process's (Node 24 under `make check`'s PATH); the other defaults to the
// machine's /usr/bin/node. `make bench` runs it after the main bench; with no other release at hand it
// says so and stops. The table is also written to bench/results/node-versions.md.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { buildTargets } from './build.js';
import { requestShape, sequentialLatency, throughput, type BenchFormat } from './load.js';
import { builtEntry, cpuSeconds, procStats, startTarget, type Target } from './targets.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const rounds = Number(flag('--rounds') ?? '7');
const binaries = [process.execPath, flag('--other') ?? '/usr/bin/node'];
const version = (bin: string): string => execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
if (!existsSync(binaries[1] ?? '')) {
  console.error(`bench:node: no other Node at ${binaries[1]}; pass --other <path of another node> to compare`);
  process.exit(0);
}
const names = binaries.map(version);
if (names[0] === names[1]) {
  console.error(`bench:node: both binaries are ${names[0]}; pass --other <path of another node> to compare`);
  process.exit(0);
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const spread = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];

const serve = buildTargets();
const redis = await startRedisServer();
const sim = await startTarget({ role: 'simulator' }, [], builtEntry(serve));
const targets: Target[] = [];
for (const [i, bin] of binaries.entries()) {
  targets.push(await startTarget({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: `node-${i}`, tracing: 'off' }, [], { ...builtEntry(serve), execPath: bin }));
}
// Idle RSS, before any request.
await new Promise((r) => setTimeout(r, 2_000));
const idleRssMb = targets.map((t) => Math.round(procStats(t.pid).rss / 1e6));

interface Figures {
  cpu: number[];
  rps: number[];
  p50: number[];
}
const results: Record<BenchFormat, Figures[]> = { openai: [], anthropic: [] };
for (const format of ['openai', 'anthropic'] as const) {
  const figures: Figures[] = targets.map(() => ({ cpu: [], rps: [], p50: [] }));
  for (const t of targets) await throughput(t.url, requestShape(format, t.key), 50, 2);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) {
      const t = targets[i] as Target;
      const f = figures[i] as Figures;
      const before = cpuSeconds(t.pid);
      const r = await throughput(t.url, requestShape(format, t.key), 50, 3);
      const used = cpuSeconds(t.pid) - before;
      if (r.non2xx + r.errors > 0) throw new Error(`${names[i]}: ${r.non2xx} non-2xx, ${r.errors} errors`);
      f.cpu.push((used / r.requests) * 1e6);
      f.rps.push(r.requestsPerSec);
      const seq = await sequentialLatency(t.url, requestShape(format, t.key), 300);
      f.p50.push(seq.p50);
    }
  }
  results[format] = figures;
}
for (const t of [...targets, sim]) await t.stop();
await redis.stop();

const summary = {
  rounds,
  node: names,
  idleRssMb,
  formats: Object.fromEntries(
    (['openai', 'anthropic'] as const).map((format) => [
      format,
      results[format].map((f, i) => ({
        node: names[i],
        cpuUsPerRequest: Math.round(median(f.cpu)),
        cpuSpread: spread(f.cpu).map(Math.round),
        requestsPerSec: Math.round(median(f.rps)),
        p50Ms: Number(median(f.p50).toFixed(3)),
      })),
    ]),
  ),
};
console.log(JSON.stringify(summary, null, 1));
const rows = (['openai', 'anthropic'] as const).flatMap((format) => {
  const [a, b] = results[format];
  if (a === undefined || b === undefined) return [];
  const cpu = [median(a.cpu), median(b.cpu)];
  return [
    `| ${format}: gateway CPU µs/request (spread) | ${Math.round(cpu[0] ?? 0)} (${spread(a.cpu).map(Math.round).join('–')}) | ${Math.round(cpu[1] ?? 0)} (${spread(b.cpu).map(Math.round).join('–')}) | ${((cpu[0] ?? 0) / (cpu[1] ?? 1)).toFixed(2)} |`,
    `| ${format}: requests/s at 50 connections | ${Math.round(median(a.rps))} | ${Math.round(median(b.rps))} | ${(median(a.rps) / median(b.rps)).toFixed(2)} |`,
    `| ${format}: p50 at one connection, ms | ${median(a.p50).toFixed(2)} | ${median(b.p50).toFixed(2)} | ${(median(a.p50) / median(b.p50)).toFixed(2)} |`,
  ];
});
const table = [
    `| figure | ${names[0]} | ${names[1]} | ${names[0]} / ${names[1]} |`,
    '|---|--:|--:|--:|',
    ...rows,
    `| idle RSS, MB | ${idleRssMb[0]} | ${idleRssMb[1]} | ${((idleRssMb[0] ?? 0) / (idleRssMb[1] ?? 1)).toFixed(2)} |`,
  ].join('\n');
console.log(table);
const resultsDir = new URL('./results/', import.meta.url);
mkdirSync(resultsDir, { recursive: true });
writeFileSync(new URL('node-versions.md', resultsDir), `# One build on two Node releases (${new Date().toISOString().slice(0, 10)}, ${rounds} interleaved rounds)\n\n${table}\n`);
