// A/B of the gateway's CPU per request between two builds of the project (each a checkout whose
// .bench-build/ was compiled by `npx tsx -e "import('./bench/build.ts').then(m => m.buildTargets())"`):
// `npx tsx bench/ab.ts <dirA> <dirB> [rounds]`. Both gateways share one Redis and one simulator and are
// driven in interleaved rounds (alternating which goes first) at 50 connections; prints the median
// CPU µs per request and requests per second of each, and B/A.
import { startRedisServer } from '../test/helpers/redis-server.js';
import { requestShape, throughput } from './load.js';
import { builtEntry, cpuSeconds, startTarget, type Target } from './targets.js';

const [dirA, dirB, roundsArg] = process.argv.slice(2);
if (dirA === undefined || dirB === undefined) throw new Error('usage: tsx bench/ab.ts <dirA> <dirB> [rounds]');
const rounds = Number(roundsArg ?? '7');
const entry = (dir: string) => builtEntry(`${dir}/.bench-build/bench/serve.js`);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

const redis = await startRedisServer();
const sim = await startTarget({ role: 'simulator' }, [], entry(dirA));
const start = (dir: string, ns: string) => startTarget({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: ns, tracing: 'off' }, [], entry(dir));
const targets: Record<'A' | 'B', Target> = { A: await start(dirA, 'ab-a'), B: await start(dirB, 'ab-b') };
const cpu: Record<'A' | 'B', number[]> = { A: [], B: [] };
const rps: Record<'A' | 'B', number[]> = { A: [], B: [] };
for (const name of ['A', 'B'] as const) await throughput(targets[name].url, requestShape('openai', targets[name].key), 50, 2);
for (let i = 0; i < rounds; i++) {
  for (const name of (i % 2 === 0 ? ['A', 'B'] : ['B', 'A']) as Array<'A' | 'B'>) {
    const t = targets[name];
    const before = cpuSeconds(t.pid);
    const r = await throughput(t.url, requestShape('openai', t.key), 50, 4);
    const used = cpuSeconds(t.pid) - before;
    if (r.non2xx + r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    cpu[name].push((used / r.requests) * 1e6);
    rps[name].push(r.requestsPerSec);
  }
}
const a = { cpu: median(cpu.A), rps: median(rps.A) };
const b = { cpu: median(cpu.B), rps: median(rps.B) };
console.log(JSON.stringify({ rounds, A: { dir: dirA, cpuUsPerRequest: a.cpu, requestsPerSec: a.rps, all: cpu.A }, B: { dir: dirB, cpuUsPerRequest: b.cpu, requestsPerSec: b.rps, all: cpu.B }, cpuRatioBA: b.cpu / a.cpu, rpsRatioBA: b.rps / a.rps }, null, 1));
for (const t of [...Object.values(targets), sim]) await t.stop();
await redis.stop();
