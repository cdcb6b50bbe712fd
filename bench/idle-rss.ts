// Idle RSS of the built production entry (issue 41): starts `node <flags> dist/src/gateway-main.js`
// N times, one after another, each with a fresh redis-server (REDIS_URL) and the record (DATABASE_URL),
// reads VmRSS from /proc after the wait, and prints each start and the median/min/max in MiB.
// Builds nothing: run `npm run build` first (or pass --dir to measure another checkout's build).
//   tsx bench/idle-rss.ts [--starts 5] [--wait 12] [--flags "--max-semi-space-size=16"] [--dir <checkout>]
//                         [--database postgres://...] [--env NAME=value]...
// The record is --database, else DATABASE_URL, else a throwaway PostgreSQL started for the run; a first,
// uncounted start migrates it, so every counted start finds the schema current (as a restarted pod does).
// The flags default to the image's (GATEWAY_NODE_FLAGS, which a test keeps equal to the Dockerfile's).
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { startThrowaway } from '../test/helpers/postgres-server.js';
import { freePort, startRedisServer } from '../test/helpers/redis-server.js';
import { GATEWAY_NODE_FLAGS, procStats } from './targets.js';

const args = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
};
const starts = Number(option('--starts') ?? 5);
const waitSeconds = Number(option('--wait') ?? 12);
const flagsOption = option('--flags');
const flags = flagsOption === undefined ? [...GATEWAY_NODE_FLAGS] : flagsOption.split(/\s+/).filter((f) => f !== '');
const dir = resolve(option('--dir') ?? new URL('..', import.meta.url).pathname);
const givenDatabase = option('--database') ?? (process.env.DATABASE_URL || undefined);
const extraEnv = Object.fromEntries(
  args.flatMap((a, i) => (args[i - 1] === '--env' ? [a] : [])).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
/** Also print VmRSS every second of the wait (`--series`), and the gateway's stdout (`--output`, e.g. with --trace-gc). */
const series = args.includes('--series');
const output = args.includes('--output');
const entry = join(dir, 'dist/src/gateway-main.js');
const ROOT = new URL('..', import.meta.url).pathname;

const mib = (bytes: number): number => Math.round((bytes / 1048576) * 10) / 10;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Anonymous and file-backed resident memory, MiB (smaps_rollup), to tell the heap from mapped code. */
function residentKinds(pid: number): { anonymous: number; file: number } {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? NaN) * 1024;
  return { anonymous: mib(kb('Anonymous')), file: mib(kb('Rss') - kb('Anonymous')) };
}

async function oneStart(database: string): Promise<{ rss: number; anonymous: number; file: number }> {
  const redis = await startRedisServer();
  const child = spawn(process.execPath, [...flags, entry], {
    cwd: dir,
    env: {
      ...process.env,
      ...extraEnv,
      REDIS_URL: redis.url,
      DATABASE_URL: database,
      PORT: String(await freePort()),
      METRICS_PORT: String(await freePort()),
      ADMIN_PORT: String(await freePort()),
    },
    stdio: ['ignore', output ? 'inherit' : 'ignore', 'inherit'],
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    if (series) void printSeries(child.pid ?? NaN, exited);
    const early = await Promise.race([exited.then((code) => ({ code })), sleep(waitSeconds * 1000).then(() => undefined)]);
    if (early !== undefined) throw new Error(`the gateway exited during the wait (code ${String(early.code)})`);
    const pid = child.pid ?? NaN;
    return { rss: mib(procStats(pid).rss), ...residentKinds(pid) };
  } finally {
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(10_000).then(() => child.kill('SIGKILL'))]);
    await redis.stop();
  }
}

async function printSeries(pid: number, exited: Promise<unknown>): Promise<void> {
  let done = false;
  void exited.then(() => (done = true));
  for (let second = 1; second < waitSeconds && !done; second++) {
    await sleep(1000);
    if (!done) console.log(`  ${second} s: RSS ${mib(procStats(pid).rss)} MiB`);
  }
}

/** The record the starts use, and how to stop it (a throwaway server, with a database of its own). */
async function openDatabase(): Promise<{ url: string; stop: () => Promise<void> }> {
  if (givenDatabase !== undefined) return { url: givenDatabase, stop: async () => undefined };
  const server = await startThrowaway();
  const admin = new pg.Client({ connectionString: server.adminUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE tgidle');
  await admin.end();
  return { url: server.adminUrl.replace(/\/postgres$/, '/tgidle'), stop: () => server.stop() };
}

const database = await openDatabase();
const samples: { rss: number; anonymous: number; file: number }[] = [];
await oneStart(database.url); // migrates the record; not counted
for (let i = 0; i < starts; i++) {
  const s = await oneStart(database.url);
  samples.push(s);
  console.log(`start ${i + 1}: RSS ${s.rss} MiB (anonymous ${s.anonymous}, file-backed ${s.file})`);
}
await database.stop();
const rss = samples.map((s) => s.rss).sort((a, b) => a - b);
const median = rss[Math.floor(rss.length / 2)];
const summary = `idle RSS, ${waitSeconds} s after start, node ${process.version} ${flags.join(' ')} ${entry}: median ${median} MiB (${rss[0]}–${rss[rss.length - 1]}, ${starts} starts)`;
console.log(summary);
// `make bench` runs this after the main bench; its figure is kept beside the run's other results.
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
writeFileSync(
  join(ROOT, 'bench/results/idle-rss.md'),
  `# Idle RSS of the production entry (issue 41: at most 100 MB)\n\n${summary}\n\n${samples.map((s, i) => `- start ${i + 1}: ${s.rss} MiB (anonymous ${s.anonymous}, file-backed ${s.file})`).join('\n')}\n`,
);
