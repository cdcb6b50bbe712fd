// What users run against what the bench runs (issue 41): the gateway's CPU per request as the bench
// composes it (bench/serve.ts: startGateway with a Redis ledger, with and without the journal to
// PostgreSQL) beside the built production entry (`node dist/src/gateway-main.js` with REDIS_URL and
// DATABASE_URL, its catalog pointing at the same simulator, its key made through the admin API), all
// from one build and in interleaved rounds at 50 connections, with the production entry's log lines
// going to /dev/null (as the bench's do) and to a pipe that is read (as a container runtime reads them).
// `npx tsx bench/production.ts [rounds] [--format anthropic] [--seconds 4] [--warm 8] [--idle <s>] [--windows <n>] [--profile] [--also <checkout>]… [--also-flags "<node flags>"]… [--also-env "NAME=value"]… [--only <text>]`;
// builds dist/ and .bench-build/ first. `--also <checkout>`: that checkout's built production entry
// (its dist/, built beforehand) runs beside, e.g. the commit before a change. Every round starts every
// target anew (one process of a build can sit 25% off another for its whole life).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { buildTargets } from './build.js';
import { siteOf, type CpuProfile } from './cpu-profile.js';
import { requestShape, throughput, type BenchFormat } from './load.js';
import { BENCH_MODELS } from './models.js';
import { createBenchDatabase } from './record-db.js';
import { builtEntry, cpuSeconds, GATEWAY_NODE_FLAGS, startTarget } from './targets.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const rounds = Number(args.find((a, i) => /^\d+$/.test(a) && !args[i - 1]?.startsWith('--')) ?? '7');
const format = (flag('format') ?? 'openai') as BenchFormat;
const seconds = Number(flag('seconds') ?? '4');
/** Warm-up of each fresh process before its measured load (see bench/ab.ts). */
const warmSeconds = Number(flag('warm') ?? '8');
/**
 * `--idle <s>`: every target of a round is started first and left idle this long before its warm-up
 * and load (a pod that waited before traffic, e.g. after the idle memory reduction); by default each
 * target is loaded as soon as it is ready.
 */
const idleSeconds = Number(flag('idle') ?? '0');
// `--profile`: every gateway runs with --cpu-prof; its self time per request by function is printed
// for the functions that differ most between the bench composition with PostgreSQL and the entry.
const profileDir = args.includes('--profile') ? mkdtempSync(join(tmpdir(), 'tollgate-production-prof-')) : undefined;
const profArgs = (name: string): string[] => (profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}/${name.replace(/[^a-z0-9]+/gi, '-')}`]);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

/** The example catalog's first model as the bench's two models, at the simulator (as bench/serve.ts builds them). */
function catalogFile(simUrl: string): string {
  const doc = parse(readFileSync(join(ROOT, 'examples/catalog.yaml'), 'utf8')) as { spec: { models: Array<Record<string, unknown>> } };
  const example = doc.spec.models[0] as Record<string, unknown>;
  const model = (id: string, f: BenchFormat) => ({ ...example, id, displayName: id, upstreams: [{ name: 'sim', format: f, baseUrl: f === 'openai' ? `${simUrl}/v1` : simUrl, model: `sim-${id}` }] });
  doc.spec.models = [model(BENCH_MODELS.openai, 'openai'), model(BENCH_MODELS.anthropic, 'anthropic')];
  const file = join(mkdtempSync(join(tmpdir(), 'tollgate-production-')), 'catalog.yaml');
  writeFileSync(file, stringify(doc));
  return file;
}

interface Measured {
  name: string;
  url: string;
  key: string;
  pid: number;
  stop(): Promise<void>;
}

async function productionEntry(name: string, logs: 'devnull' | 'pipe', env: Record<string, string>, tree = ROOT, nodeFlags: readonly string[] = []): Promise<Measured> {
  const [port, metricsPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const token = 'bench-admin-token-0123456789abcdef';
  const child: ChildProcess = spawn(process.execPath, [...GATEWAY_NODE_FLAGS, ...nodeFlags, ...profArgs(name), join(tree, 'dist/src/gateway-main.js')], {
    env: { ...process.env, ...env, PORT: String(port), METRICS_PORT: String(metricsPort), ADMIN_PORT: String(adminPort), TOLLGATE_ADMIN_TOKEN: token },
    stdio: ['ignore', logs === 'pipe' ? 'pipe' : 'ignore', 'inherit'],
  });
  let logBytes = 0;
  child.stdout?.on('data', (b: Buffer) => (logBytes += b.length));
  const admin = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
    const r = await fetch(`http://127.0.0.1:${adminPort}/admin${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, unknown>;
  };
  let key: string;
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) break;
      } catch {
        // not listening yet
      }
      if (i > 300) throw new Error(`${name} did not become ready`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const account = (await admin('/accounts', { name: 'bench' })) as { id: string };
    await admin(`/accounts/${account.id}/credit`, { amount_usd: '1000000', idempotency_key: `bench-${name}-${Date.now()}` });
    key = ((await admin(`/accounts/${account.id}/keys`, { name: 'bench' })) as { key: string }).key;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    key,
    pid: child.pid ?? 0,
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      if (logs === 'pipe') process.stderr.write(`${name}: ${(logBytes / 1e6).toFixed(1)} MB of log lines read\n`);
    },
  };
}

buildTargets();
await new Promise<void>((resolve, reject) => spawn(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' }).once('exit', (c) => (c === 0 ? resolve() : reject(new Error(`tsc ${c}`)))));
const entry = builtEntry(join(ROOT, '.bench-build/bench/serve.js'));
const redis = await startRedisServer();
// The production entry has one Redis namespace: each gets a Redis of its own (their journals must not meet).
const prodRedis: Array<Awaited<ReturnType<typeof startRedisServer>>> = [];
const sim = await startTarget({ role: 'simulator' }, [], entry);
const benchDb = await createBenchDatabase();
const catalog = catalogFile(sim.url);
const composed = async (name: string, databaseUrl?: string): Promise<Measured> => {
  const t = await startTarget({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: `${name}-${Date.now()}`, tracing: 'off', ...(databaseUrl === undefined ? {} : { databaseUrl }) }, profArgs(name), entry);
  return { name, url: t.url, key: t.key ?? '', pid: t.pid, stop: () => t.stop() };
};
/** Each target as a way to start it: every round starts fresh processes (see bench/ab.ts for why). */
const starts: Array<{ name: string; start: () => Promise<Measured> }> = [
  { name: 'bench composition (serve.ts), Redis only', start: () => composed('bench composition (serve.ts), Redis only') },
  { name: 'bench composition (serve.ts) + PostgreSQL', start: () => composed('bench composition (serve.ts) + PostgreSQL', benchDb.url) },
];
const entryTarget = async (name: string, logs: 'devnull' | 'pipe', tree = ROOT, nodeFlags: readonly string[] = [], env: Record<string, string> = {}): Promise<void> => {
  const [r, d] = [await startRedisServer(), await benchDb.sibling()];
  prodRedis.push(r);
  starts.push({ name, start: () => productionEntry(name, logs, { ...env, REDIS_URL: r.url, DATABASE_URL: d.url, TOLLGATE_CATALOG_FILE: catalog }, tree, nodeFlags) });
};
await entryTarget('production entry, logs to /dev/null', 'devnull');
await entryTarget('production entry, logs to a pipe', 'pipe');
// `--also <checkout>` (repeatable): that checkout's built production entry too.
for (let i = 0; i < args.length; i++) if (args[i] === '--also' && args[i + 1] !== undefined) await entryTarget(`production entry of ${args[i + 1]}, logs to /dev/null`, 'devnull', args[i + 1]);
// `--also-flags "<node flags>"` (repeatable): this build's production entry with these flags after the
// image's too, e.g. a V8 flag's price; `--also-flags ""` is a second copy of the entry, an A/A.
for (let i = 0; i < args.length; i++) {
  const extra = args[i] === '--also-flags' ? args[i + 1] : undefined;
  if (extra !== undefined) await entryTarget(`production entry with [${extra}], logs to /dev/null`, 'devnull', ROOT, extra.split(/\s+/).filter((f) => f !== ''));
}
// `--also-env "NAME=value ..."` (repeatable): this build's production entry with these variables too,
// e.g. a feature turned off (`TOLLGATE_MEMORY_REDUCER_INTERVAL_MS=0`).
for (let i = 0; i < args.length; i++) {
  const extra = args[i] === '--also-env' ? args[i + 1] : undefined;
  if (extra === undefined) continue;
  const env = Object.fromEntries(extra.split(/\s+/).filter((kv) => kv.includes('=')).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  await entryTarget(`production entry with env [${extra}], logs to /dev/null`, 'devnull', ROOT, [], env);
}
// `--only <text>`: only the targets whose name contains it.
const only = flag('only');
if (only !== undefined) starts.splice(0, starts.length, ...starts.filter((t) => t.name.includes(only)));
const cpu = new Map<string, number[]>(starts.map((t) => [t.name, []]));
const rps = new Map<string, number[]>(starts.map((t) => [t.name, []]));
const requestsOf = new Map<string, number>(starts.map((t) => [t.name, 0]));
// `--windows <n>`: each target's load runs n windows of `seconds` back to back; the table reads the
// last, and the CPU per request of every window (median over rounds) is printed: how long a fresh
// process takes to settle.
const windows = Number(flag('windows') ?? '1');
const series = new Map<string, number[][]>(starts.map((t) => [t.name, Array.from({ length: windows }, () => [])]));
let running: Measured[] = [];
try {
  for (let i = 0; i < rounds; i++) {
    const order = starts.map((_, j) => starts[(i + j) % starts.length] as (typeof starts)[number]);
    running = [];
    for (const s of order) {
      const t = await s.start();
      running.push(t);
      if (idleSeconds === 0) await throughput(t.url, requestShape(format, t.key), 50, warmSeconds);
    }
    if (idleSeconds > 0) await new Promise((r) => setTimeout(r, idleSeconds * 1000));
    for (const t of running) {
      if (idleSeconds > 0 && warmSeconds > 0) await throughput(t.url, requestShape(format, t.key), 50, warmSeconds);
      for (let w = 0; w < windows; w++) {
        const before = cpuSeconds(t.pid);
        const r = await throughput(t.url, requestShape(format, t.key), 50, seconds);
        const used = cpuSeconds(t.pid) - before;
        if (r.non2xx + r.errors > 0) throw new Error(`${t.name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        if (w === windows - 1) {
          cpu.get(t.name)?.push((used / r.requests) * 1e6);
          rps.get(t.name)?.push(r.requestsPerSec);
        }
        series.get(t.name)?.[w]?.push((used / r.requests) * 1e6);
        requestsOf.set(t.name, (requestsOf.get(t.name) ?? 0) + r.requests);
      }
    }
    for (const t of running) await t.stop();
    running = [];
    process.stderr.write(`round ${i + 1}/${rounds}: ${starts.map((t) => (cpu.get(t.name)?.at(-1) ?? NaN).toFixed(0)).join(', ')} µs/request\n`);
  }
  console.log(`\n${format}, ${rounds} interleaved rounds of ${seconds} s at 50 connections, fresh processes each round, Node ${process.versions.node}\n`);
  console.log('| target | req/s | gateway CPU µs/request (spread) |');
  console.log('|---|--:|--:|');
  for (const t of starts) {
    const c = cpu.get(t.name) ?? [];
    console.log(`| ${t.name} | ${median(rps.get(t.name) ?? [])} | ${median(c).toFixed(0)} (${Math.min(...c).toFixed(0)}–${Math.max(...c).toFixed(0)}) |`);
  }
  if (windows > 1) {
    console.log(`\nCPU µs/request by window of ${seconds} s since the warm-up (median of the rounds)`);
    for (const t of starts) console.log(`${t.name}: ${(series.get(t.name) ?? []).map((w) => median(w).toFixed(0)).join(', ')}`);
  }
} finally {
  for (const t of running) await t.stop();
  await sim.stop();
  await redis.stop();
  for (const r of prodRedis) await r.stop();
  await benchDb.drop();
}

if (profileDir !== undefined) {
  // Self µs per request by function, over each process's whole life (start-up and warm-up are small beside the rounds).
  const perRequest = new Map<string, Map<string, number>>();
  for (const t of starts) {
    const dir = `${profileDir}/${t.name.replace(/[^a-z0-9]+/gi, '-')}`;
    const bySite = new Map<string, number>();
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
      const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
      const hits = new Map<number, number>();
      profile.samples.forEach((id, i) => hits.set(id, (hits.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
      for (const n of profile.nodes) bySite.set(siteOf(n), (bySite.get(siteOf(n)) ?? 0) + (hits.get(n.id) ?? 0) / (requestsOf.get(t.name) ?? 1));
    }
    perRequest.set(t.name, bySite);
  }
  const [bench, prod] = [perRequest.get(starts[1]?.name ?? ''), perRequest.get(starts[2]?.name ?? '')];
  if (bench !== undefined && prod !== undefined) {
    const sites = new Set([...bench.keys(), ...prod.keys()]);
    const rows = [...sites].map((s) => ({ s, b: bench.get(s) ?? 0, p: prod.get(s) ?? 0 })).sort((x, y) => Math.abs(y.p - y.b) - Math.abs(x.p - x.b));
    console.log(`\nself µs/request, ${starts[1]?.name} → ${starts[2]?.name} (largest differences; profiles in ${profileDir})`);
    for (const r of rows.slice(0, 30)) console.log(`${r.b.toFixed(2).padStart(8)} → ${r.p.toFixed(2).padStart(8)}  ${r.s}`);
  }
}
