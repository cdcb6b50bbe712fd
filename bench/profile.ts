// CPU profile of the gateway under load:
// `npm run bench:profile [-- --format anthropic --seconds 10 --tracing off|sampled-0|sampled-100 --journal on --agent]`.
// Starts Redis, the instant simulator and Tollgate (with --cpu-prof) as in the benchmark, drives it with
// autocannon at 50 connections, and prints the functions with the most self time. The .cpuprofile file
// is left in bench/results/ for a flame graph (Chrome DevTools or speedscope can open it).
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { agentShape, requestShape, throughput, type BenchFormat } from './load.js';
import { createBenchDatabase } from './record-db.js';
import { builtEntry, SOURCE_ENTRY, startTarget } from './targets.js';
import { siteOf, type CpuProfile } from './cpu-profile.js';


const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? (args[i + 1] as string) : fallback;
};
const format = flag('format', 'openai') as BenchFormat;
const seconds = Number(flag('seconds', '10'));
const tracing = flag('tracing', 'off') as 'off' | 'sampled-0' | 'sampled-100';
// `--journal on`: every settlement journaled to a fresh database of the test PostgreSQL.
const record = flag('journal', 'off') === 'on' ? await createBenchDatabase() : undefined;
// `--build <checkout>`: the gateway from that checkout's .bench-build/ (bench/build.ts), as the bench runs
// it, instead of the sources under tsx (whose loader shows in the profile).
const built = flag('build', '');
// `--agent`: the agent-shaped body of the format (bench/load.ts: 100 KB OpenAI, 300 KB Anthropic) instead of a small one.
const agent = args.includes('--agent');
const entry = built === '' ? SOURCE_ENTRY : builtEntry(`${built}/.bench-build/bench/serve.js`);
const dir = new URL('./results/', import.meta.url).pathname;
mkdirSync(dir, { recursive: true });
const before = new Set(readdirSync(dir));

const redis = await startRedisServer();
const sim = await startTarget({ role: 'simulator' }, [], entry);
const startedAt = Date.now();
const gw = await startTarget({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'profile', tracing, ...(record === undefined ? {} : { databaseUrl: record.url }) }, [
  '--cpu-prof',
  `--cpu-prof-dir=${dir}`,
], entry);
// A short warm-up so JIT tiers settle before the profiled window dominates.
const shape = agent ? agentShape(format, gw.key) : requestShape(format, gw.key);
await throughput(gw.url, shape, 50, 2);
// Samples before this point are start-up and warm-up (module loading, the tokenizer table), not requests.
const loadFromMs = Date.now() - startedAt;
const result = await throughput(gw.url, shape, 50, seconds);
await gw.stop();
await sim.stop();
await redis.stop();
await record?.drop();
process.stderr.write(`profile: ${format} ${result.requestsPerSec} req/s, p50 ${result.p50} ms, non-2xx ${result.non2xx}\n`);

const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile') && !before.has(f));
if (file === undefined) throw new Error('the gateway wrote no .cpuprofile');
const profile = JSON.parse(readFileSync(dir + file, 'utf8')) as CpuProfile;
const hits = new Map<number, number>();
let elapsedUs = 0;
let total = 0;
profile.samples.forEach((s, i) => {
  elapsedUs += profile.timeDeltas[i] ?? 0;
  if (elapsedUs < loadFromMs * 1000) return;
  total += 1;
  hits.set(s, (hits.get(s) ?? 0) + 1);
});
const bySite = new Map<string, number>();
for (const n of profile.nodes) {
  const site = siteOf(n);
  bySite.set(site, (bySite.get(site) ?? 0) + (hits.get(n.id) ?? 0));
}
const top = [...bySite.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(flag('top', '40')));
process.stdout.write(`self time, ${total} samples, ${dir}${file}\n`);
for (const [site, n] of top) process.stdout.write(`${((n / total) * 100).toFixed(1).padStart(5)}%  ${site}\n`);
