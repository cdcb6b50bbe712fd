// A/B of the gateway's CPU per request between two builds of the project (each a checkout whose
// .bench-build/ was compiled by `npx tsx -e "import('./bench/build.ts').then(m => m.buildTargets())"`):
// `npx tsx bench/ab.ts <dirA> <dirB> [rounds] [--format openai|anthropic] [--stream | --agent] [--seconds 4] [--warm 8] [--keep] [--together] [--b-args "<node flags>"]`.
// The gateways share one simulator and are driven at 50 connections in interleaved
// rounds whose order rotates. Each round starts fresh processes: A, B, and A again (A′), so every run
// carries its own A/A. Two processes of one build differ by up to 25% here for their whole life
// (placement, JIT, heap sizing), so one process per side measures which process it got, not the
// change; a new pair per round samples that. `--keep` keeps one process per side for the whole run
// (the method until issue 41, and without A′). Prints the median CPU µs per request and req/s of each,
// the median of the rounds' B/A and A′/A ratios, and their ranges. Each side has a Redis of its own, so
// the CPU its Redis spent per request (the ledger's scripts) is reported beside the gateway's.
import { startRedisServer, type OwnRedisProcess } from '../test/helpers/redis-server.js';
import { agentShape, requestShape, throughput, type BenchFormat } from './load.js';
import { builtEntry, cpuSeconds, procStats, startTarget, type Target } from './targets.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const positional = args.filter((a, i) => !a.startsWith('--') && !['--format', '--seconds', '--warm', '--b-args'].includes(args[i - 1] ?? ''));
const [dirA, dirB, roundsArg] = positional;
if (dirA === undefined || dirB === undefined) throw new Error('usage: tsx bench/ab.ts <dirA> <dirB> [rounds] [--format openai|anthropic] [--stream | --agent] [--seconds 4] [--warm 8] [--keep] [--together] [--b-args "<node flags>"]');
const rounds = Number(roundsArg ?? '7');
const format = (flag('format') ?? 'openai') as BenchFormat;
const stream = args.includes('--stream');
// `--agent`: the format's agent-shaped body (bench/load.ts: 100 KB OpenAI, 300 KB Anthropic) instead of a small one.
const agent = args.includes('--agent');
if (agent && stream) throw new Error('--agent bodies are whole replies; drop --stream');
const seconds = Number(flag('seconds') ?? '4');
const keep = args.includes('--keep');
// Every side's load runs at the same time, each at 50 / sides connections: the machine's drift (other
// work on it) then falls on every side alike instead of on whichever round it hits.
const together = args.includes('--together');
// A fresh process spends its first seconds compiling: 2 s of warm-up left the first 5 s measured 40%
// above the steady state, so each process is warmed for `--warm` seconds (default 8) first.
const warmSeconds = Number(flag('warm') ?? '8');
// `--b-args "<node flags>"`: B runs with these (e.g. a V8 heap flag) on A's or its own build.
const bArgs = (flag('b-args') ?? '').split(' ').filter((a) => a !== '');
const entry = (dir: string) => builtEntry(`${dir}/.bench-build/bench/serve.js`);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const range = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];

type Side = 'A' | 'B' | 'A2';
const sides: Side[] = keep ? ['A', 'B'] : ['A', 'B', 'A2'];
const dirOf: Record<Side, string> = { A: dirA, B: dirB, A2: dirA };

const redisOf: Record<Side, OwnRedisProcess> = { A: await startRedisServer(), B: await startRedisServer(), A2: await startRedisServer() };
const sim = await startTarget({ role: 'simulator' }, [], entry(dirA));
let started = 0;
const start = (side: Side): Promise<Target> =>
  startTarget({ role: 'gateway', redisUrl: redisOf[side].url, upstream: sim.url, namespace: `ab-${side.toLowerCase()}-${started++}`, tracing: 'off' }, side === 'B' ? bArgs : [], entry(dirOf[side]));
const shape = (t: Target) => (agent ? agentShape(format, t.key) : requestShape(format, t.key, stream));
const warm = (t: Target, connections = 50) => throughput(t.url, shape(t), connections, warmSeconds);

const cpu: Record<Side, number[]> = { A: [], B: [], A2: [] };
const rps: Record<Side, number[]> = { A: [], B: [], A2: [] };
/** The CPU of each side's Redis per request, µs. */
const redisCpu: Record<Side, number[]> = { A: [], B: [], A2: [] };
/** Each process's resident memory at the end of its round. */
const rss: Record<Side, number[]> = { A: [], B: [], A2: [] };
const ratio = { BA: [] as number[], A2A: [] as number[], redisBA: [] as number[], redisA2A: [] as number[] };
let kept: Partial<Record<Side, Target>> = {};
for (let i = 0; i < rounds; i++) {
  // The order rotates, so no side is always first after the start or last before the stop.
  const order = sides.map((_, j) => sides[(i + j) % sides.length] as Side);
  const targets: Partial<Record<Side, Target>> = keep ? kept : {};
  const fresh: Target[] = [];
  for (const side of order) {
    if (targets[side] === undefined) {
      const t = await start(side);
      targets[side] = t;
      fresh.push(t);
      if (!together) await warm(t);
    }
  }
  if (together) await Promise.all(fresh.map((t) => warm(t, Math.round(50 / sides.length))));
  if (keep) kept = targets;
  const round: Partial<Record<Side, number>> = {};
  const measure = async (side: Side, connections: number): Promise<void> => {
    const t = targets[side] as Target;
    const before = cpuSeconds(t.pid);
    const redisBefore = cpuSeconds(redisOf[side].pid);
    const r = await throughput(t.url, shape(t), connections, seconds);
    const used = cpuSeconds(t.pid) - before;
    redisCpu[side].push(((cpuSeconds(redisOf[side].pid) - redisBefore) / r.requests) * 1e6);
    if (r.non2xx + r.errors > 0) throw new Error(`${side}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    round[side] = (used / r.requests) * 1e6;
    cpu[side].push(round[side]);
    rps[side].push(r.requestsPerSec);
  };
  if (together) await Promise.all(order.map((side) => measure(side, Math.round(50 / sides.length))));
  else for (const side of order) await measure(side, 50);
  ratio.BA.push((round.B as number) / (round.A as number));
  if (round.A2 !== undefined) ratio.A2A.push(round.A2 / (round.A as number));
  const redisRound = (side: Side): number => redisCpu[side][redisCpu[side].length - 1] as number;
  ratio.redisBA.push(redisRound('B') / redisRound('A'));
  if (round.A2 !== undefined) ratio.redisA2A.push(redisRound('A2') / redisRound('A'));
  for (const side of sides) rss[side].push(procStats((targets[side] as Target).pid).rss / 1048576);
  if (!keep) for (const t of Object.values(targets)) await t.stop();
  process.stderr.write(`round ${i + 1}/${rounds}: ${sides.map((s) => `${s} ${round[s]?.toFixed(0)} (Redis ${redisRound(s).toFixed(0)})`).join(', ')} µs/request\n`);
}
for (const t of Object.values(kept)) await t.stop();
const summary = (side: Side) => ({ dir: dirOf[side], cpuUsPerRequest: median(cpu[side]), redisCpuUsPerRequest: median(redisCpu[side]), redisAll: redisCpu[side].map(Math.round), requestsPerSec: median(rps[side]), rssMbAfter: Math.round(median(rss[side])), all: cpu[side].map(Math.round) });
console.log(
  JSON.stringify(
    {
      rounds,
      format,
      stream,
      agent,
      freshProcessesPerRound: !keep,
      together,
      warmSeconds,
      ...(bArgs.length > 0 ? { bArgs } : {}),
      A: summary('A'),
      B: summary('B'),
      ...(keep ? {} : { A2: summary('A2') }),
      cpuRatioBA: median(ratio.BA),
      cpuRatioBARange: range(ratio.BA),
      ...(keep ? {} : { cpuRatioA2A: median(ratio.A2A), cpuRatioA2ARange: range(ratio.A2A) }),
      rpsRatioBA: median(rps.B) / median(rps.A),
      redisCpuRatioBA: median(ratio.redisBA),
      redisCpuRatioBARange: range(ratio.redisBA),
      ...(keep ? {} : { redisCpuRatioA2A: median(ratio.redisA2A), redisCpuRatioA2ARange: range(ratio.redisA2A) }),
    },
    null,
    1,
  ),
);
await sim.stop();
for (const r of Object.values(redisOf)) await r.stop();
