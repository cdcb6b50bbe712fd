// The benchmark: `npm run bench` (full, about 20 minutes, more the first time it installs the peers) or
// `npm run bench -- --smoke` (seconds; fails on any error, asserts no timings, never installs a peer).
// Starts Redis, the instant simulator, the floor proxy, Tollgate (with and without its journal to
// PostgreSQL) and (full runs, unless --no-peer) the peer gateways of bench/peers (Portkey, LiteLLM,
// Bifrost), each in its own processes, drives them on loopback and writes bench/results/latest.{md,json}.
// `--streams N` sets the memory benchmark's open streams (1,000 by default); `--peers a,b` picks peers.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { countRedisPerRequest, ledgerPairs, type RedisPerRequest } from './ledger.js';
import {
  agentShape,
  directShape,
  requestShape,
  sequentialLatency,
  streamLatency,
  throughput,
  type BenchFormat,
  type RequestShape,
  type StreamResult,
  type ThroughputResult,
} from './load.js';
import { memoryBench } from './memory.js';
import { createBenchDatabase } from './record-db.js';
import { canPin, pinGateway, unpin } from './pinning.js';
import { measureJournalSlices, summarize, type JournalCost } from './journal-slices.js';
import { PEERS } from './peers/index.js';
import type { PeerSetup, StartedPeer } from './peers/peer.js';
import { median, renderMarkdown, targetChecks, TARGET_NAMES, type BenchResults, type MeasuredThroughput, type TargetRow } from './report.js';
import type { ServeSpec, TracingMode } from './serve.js';
import { buildTargets } from './build.js';
import { builtEntry, cpuSeconds, pidsWhere, procStats, startTarget, type Target } from './targets.js';

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const memoryStreams = Number(flag('--streams') ?? (smoke ? 50 : 1000));
if (!Number.isSafeInteger(memoryStreams) || memoryStreams < 1) throw new Error(`--streams must be a positive integer`);
const plan = {
  mode: smoke ? 'smoke' : 'full',
  /** Seconds per throughput round; `rounds` interleaved rounds per target (see roundsOf). */
  durationSec: smoke ? 1 : 3,
  // At least five: CPU per request is reported as the median of the rounds, with their spread.
  rounds: smoke ? 1 : 5,
  warmupSec: smoke ? 0 : 1,
  connections: 50,
  sequential: smoke ? 100 : 2000,
  streams: smoke ? 10 : 100,
  streamTokens: 16,
  tracingSec: smoke ? 1 : 2,
  tracingRounds: smoke ? 2 : 6,
  // The journal's cost is a few per cent, inside one round's noise here: many short pairs of slices
  // of one continuous load steady the median (bench/journal-slices.ts). Seconds per measurement: the
  // target reads the own-core one (300 pairs: a median with a standard error of about a point here;
  // 150 pairs had 1.4 points, more than the margin to the target); the shared one is shown beside it.
  journalSec: smoke ? 2 : 300,
  journalSharedSec: smoke ? 2 : 30,
  journalSliceMs: 500,
  memoryStreams,
  ledgerMs: smoke ? 500 : 4000,
  countedRequests: smoke ? 50 : 1000,
  // The whole run's bound (the targets' build included; the journal step's 300 pairs are five minutes of it); opening streams past the default 1,000 gets a minute per 4,000 more.
  // The peers add about eight minutes (LiteLLM alone takes about a minute to start, twice).
  boundSec: 1800 + Math.ceil(Math.max(0, memoryStreams - 1000) / 4000) * 60,
} as const;
const FORMATS: BenchFormat[] = ['openai', 'anthropic'];
const TRACING_MODES: TracingMode[] = ['off', 'sampled-0', 'sampled-100'];

const log = (m: string): void => {
  process.stderr.write(`bench: ${m}\n`);
};

/** Kills every process the run started; for the watchdog and signals, when an orderly stop may hang. */
const killers = new Set<() => void>();
const startedAt = performance.now();
const watchdog = setTimeout(() => {
  log(`the run exceeded its bound of ${plan.boundSec} s; stopping every target`);
  for (const k of killers) k();
  process.exit(3);
}, plan.boundSec * 1000);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const k of killers) k();
    process.exit(130);
  });
}

interface PeerEntry {
  setup: PeerSetup;
  /** Installed and ready to start, or why it is not measured. */
  ready: boolean;
  status: string;
}

/** Each peer installed or built (cached between runs), or why not; none in smoke mode or with --no-peer. */
async function installPeers(): Promise<PeerEntry[]> {
  const picked = flag('--peers')?.split(',');
  const out: PeerEntry[] = [];
  for (const setup of PEERS) {
    const skip = smoke
      ? 'not run in smoke mode (peers are installed from the network)'
      : args.includes('--no-peer')
        ? 'skipped (--no-peer)'
        : picked && !picked.includes(setup.id)
          ? `not picked (--peers ${picked.join(',')})`
          : undefined;
    if (skip) {
      out.push({ setup, ready: false, status: skip });
      continue;
    }
    const installed = await setup.install(log);
    if (!installed.ok) log(`${setup.name} unavailable: ${installed.reason}`);
    out.push(installed.ok ? { setup, ready: true, status: setup.configuration } : { setup, ready: false, status: `unavailable: ${installed.reason}` });
  }
  return out;
}

type NewDatabase = () => Promise<{ url: string; backendPids(): number[] }>;
type Track = <T extends { stop(): Promise<void>; kill(): void }>(t: T) => T;

/** Starts every ready peer against `upstream`; one that fails to start is marked unavailable with why. */
async function startPeers(peers: PeerEntry[], upstream: string, newDatabase: NewDatabase, track: Track): Promise<Map<string, StartedPeer>> {
  const out = new Map<string, StartedPeer>();
  for (const p of peers) {
    if (!p.ready) continue;
    log(`starting ${p.setup.name}`);
    try {
      out.set(p.setup.name, track(await p.setup.start({ upstream, newDatabase, log })));
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      log(`${p.setup.name} unavailable: ${reason}`);
      p.ready = false;
      p.status = `unavailable: ${reason}`;
    }
  }
  return out;
}

/** Resident memory of a set of processes now, MB. */
function rssMb(pids: readonly number[]): number {
  let bytes = 0;
  for (const pid of pids) {
    try {
      bytes += procStats(pid).rss;
    } catch {
      // gone meanwhile
    }
  }
  return Math.round(bytes / 1e5) / 10;
}

/** What a throughput round drives and measures. */
interface RoundTarget<K extends string> {
  name: K;
  url: string;
  shape: RequestShape;
  /** The target's processes (a peer's whole tree); their CPU is its CPU. */
  pids: () => number[];
  /** Its stores' processes (Redis, PostgreSQL backends), measured in a column of their own. */
  storePids?: () => number[];
  before?: () => Promise<void>;
}

/**
 * Throughput in interleaved rounds, each target's best round kept: on a shared 2-core machine a burst
 * from elsewhere should not decide a ratio. CPU time per request is taken per round (all the target's
 * processes, and apart its stores'), and reported as the median of the rounds with their spread; other
 * load on the machine hardly moves it. Targets get `warmupSec` of unmeasured load first, so none is
 * measured while its code still compiles.
 */
async function roundsOf<K extends string>(targets: RoundTarget<K>[], rounds: number, seconds: number, label: string): Promise<Map<K, MeasuredThroughput>> {
  if (plan.warmupSec > 0) {
    for (const t of targets) {
      await t.before?.();
      await throughput(t.url, t.shape, plan.connections, plan.warmupSec);
    }
  }
  type Acc = { best: ThroughputResult; rounds: number[]; cpuRounds: number[]; storeRounds: number[]; non2xx: number; errors: number; rss: number };
  const acc = new Map<K, Acc>();
  // The same processes read before and after a round: a process that left meanwhile counts nothing.
  const cpuOf = (pids: readonly number[]): number => pids.reduce((sum, pid) => sum + (existsSync(`/proc/${pid}`) ? cpuSeconds(pid) : 0), 0);
  const perRequest = (cpu: number, requests: number): number => (requests > 0 ? (cpu * 1e6) / requests : NaN);
  for (let round = 0; round < rounds; round++) {
    // The order rotates each round, so no target always runs right after the same one.
    const shift = round % targets.length;
    for (const t of [...targets.slice(shift), ...targets.slice(0, shift)]) {
      log(`${label}: ${t.name}${rounds > 1 ? ` (round ${round + 1} of ${rounds})` : ''}`);
      await t.before?.();
      const own = t.pids();
      const stores = t.storePids?.() ?? [];
      const [cpu0, store0] = [cpuOf(own), cpuOf(stores)];
      const tp = await throughput(t.url, t.shape, plan.connections, seconds);
      const cpu = perRequest(Math.max(0, cpuOf(own) - cpu0), tp.requests);
      const store = perRequest(Math.max(0, cpuOf(stores) - store0), tp.requests);
      const rss = rssMb(t.pids());
      const a = acc.get(t.name);
      if (!a) acc.set(t.name, { best: tp, rounds: [tp.requestsPerSec], cpuRounds: [cpu], storeRounds: [store], non2xx: tp.non2xx, errors: tp.errors, rss });
      else {
        if (tp.requestsPerSec > a.best.requestsPerSec) a.best = tp;
        a.rounds.push(tp.requestsPerSec);
        a.cpuRounds.push(cpu);
        a.storeRounds.push(store);
        a.non2xx += tp.non2xx;
        a.errors += tp.errors;
        a.rss = Math.max(a.rss, rss);
      }
    }
  }
  const finite = (xs: number[]): number[] => xs.filter((x) => Number.isFinite(x));
  const out = new Map<K, MeasuredThroughput>();
  for (const t of targets) {
    const a = acc.get(t.name);
    if (!a) continue;
    const cpus = finite(a.cpuRounds);
    // Failures in any round count, not just in the best one; the rounds are listed in target order.
    out.set(t.name, {
      ...a.best,
      non2xx: a.non2xx,
      errors: a.errors,
      rounds: a.rounds,
      cpuUsPerRequest: Math.round(median(cpus) ?? NaN),
      cpuUsRounds: cpus.map((x) => Math.round(x)),
      rssMb: a.rss,
      ...(t.storePids === undefined ? {} : { serverCpuUsPerRequest: Math.round(median(finite(a.storeRounds)) ?? NaN) }),
    });
  }
  return out;
}

/** One request first: a format the peer cannot serve is reported as n/a with its answer, not measured. */
async function probe(url: string, shape: RequestShape): Promise<string | undefined> {
  try {
    const res = await fetch(url + shape.path, { method: 'POST', headers: shape.headers, body: shape.body, signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    return res.ok ? undefined : `HTTP ${res.status}: ${text.slice(0, 200)}`;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

async function main(): Promise<Omit<BenchResults, 'targets' | 'wallSeconds'>> {
  const redis = await startRedisServer();
  killers.add(() => void redis.stop());
  const record = await createBenchDatabase();
  const started: { stop(): Promise<void>; kill(): void }[] = [];
  const track = <T extends { stop(): Promise<void>; kill(): void }>(t: T): T => {
    started.push(t);
    killers.add(t.kill);
    return t;
  };
  log('building the targets (tsc), to run them as shipped');
  const entry = builtEntry(buildTargets());
  const start = async (spec: ServeSpec): Promise<Target> => track(await startTarget(spec, [], entry));
  const stopAll = async (): Promise<void> => {
    for (const t of started.splice(0)) {
      await t.stop();
      killers.delete(t.kill);
    }
  };
  try {
    const sim = await start({ role: 'simulator' });
    const floor = await start({ role: 'floor', upstream: sim.url });
    const gw = await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'benchgw', tracing: 'off' });
    // Tollgate as it runs in production: every settlement journaled to PostgreSQL.
    const gwRecorded = await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'benchgwpg', tracing: 'off', databaseUrl: record.url });
    // redis-server titles itself `redis-server 127.0.0.1:<port>`.
    const redisPids = pidsWhere((c) => c.includes(`:${redis.port}`));
    const peers = await installPeers();
    const newDatabase: NewDatabase = () => record.sibling();
    const running = await startPeers(peers, sim.url, newDatabase, track);
    const peerNotes: Record<string, string> = {};

    const rows: TargetRow[] = [];
    for (const format of FORMATS) {
      const targets: RoundTarget<string>[] = [
        { name: TARGET_NAMES.direct, url: sim.url, shape: directShape(requestShape(format, undefined)), pids: () => [sim.pid] },
        { name: TARGET_NAMES.floor, url: floor.url, shape: requestShape(format, undefined), pids: () => [floor.pid] },
        { name: TARGET_NAMES.tollgate, url: gw.url, shape: requestShape(format, gw.key), pids: () => [gw.pid], storePids: () => redisPids },
        {
          name: TARGET_NAMES.tollgateRecorded,
          url: gwRecorded.url,
          shape: requestShape(format, gwRecorded.key),
          pids: () => [gwRecorded.pid],
          storePids: () => [...redisPids, ...record.backendPids()],
        },
      ];
      for (const [name, peer] of running) {
        const shape = peer.shape(format, false);
        const refused = await probe(peer.url, shape);
        if (refused) peerNotes[`${name}, ${format}`] = `n/a: it answered ${refused}`;
        else targets.push({ name, url: peer.url, shape, pids: peer.pids, ...(peer.storePids ? { storePids: peer.storePids } : {}) });
      }
      const measured = await roundsOf(targets, plan.rounds, plan.durationSec, format);
      for (const t of targets) {
        const seq = await sequentialLatency(t.url, t.shape, plan.sequential);
        rows.push({ format, target: t.name, throughput: measured.get(t.name) as MeasuredThroughput, sequential: seq });
      }
    }
    for (const peer of running.values()) await peer.stop();

    // Agent-shaped bodies (a 300 KB Claude-Code-like /v1/messages, a 100 KB tool-calling chat): what a
    // coding agent sends every turn, where decoding and counting the body dominate.
    const agentShaped: BenchResults['agentShaped'] = [];
    for (const format of FORMATS) {
      const targets: RoundTarget<string>[] = [
        { name: TARGET_NAMES.floor, url: floor.url, shape: agentShape(format, undefined), pids: () => [floor.pid] },
        { name: TARGET_NAMES.tollgate, url: gw.url, shape: agentShape(format, gw.key), pids: () => [gw.pid] },
      ];
      const measuredAgent = await roundsOf(targets, plan.rounds, plan.durationSec, `agent-shaped ${format}`);
      for (const t of targets) agentShaped.push({ format, target: t.name, bodyBytes: Buffer.byteLength(t.shape.body), ...(measuredAgent.get(t.name) as MeasuredThroughput) });
    }

    log('streaming (paced simulator)');
    const paced = await start({ role: 'simulator', firstTokenDelayMs: 5, tokenDelayMs: 2, replyTokens: plan.streamTokens });
    const pacedFloor = await start({ role: 'floor', upstream: paced.url });
    const pacedGw = await start({ role: 'gateway', redisUrl: redis.url, upstream: paced.url, namespace: 'benchstream', tracing: 'off' });
    // The peers again, now in front of the paced simulator.
    const pacedPeers = await startPeers(
      peers.filter((p) => p.ready),
      paced.url,
      newDatabase,
      track,
    );
    const streaming: (StreamResult & { format: BenchFormat; target: string })[] = [];
    for (const format of FORMATS) {
      const targets: [string, string, RequestShape][] = [
        [TARGET_NAMES.direct, paced.url, directShape(requestShape(format, undefined, true))],
        [TARGET_NAMES.floor, pacedFloor.url, requestShape(format, undefined, true)],
        [TARGET_NAMES.tollgate, pacedGw.url, requestShape(format, pacedGw.key, true)],
      ];
      for (const [name, peer] of pacedPeers) {
        if (peerNotes[`${name}, ${format}`] === undefined) targets.push([name, peer.url, peer.shape(format, true)]);
      }
      for (const [name, url, shape] of targets) {
        streaming.push({ format, target: name, ...(await streamLatency(url, shape, format, plan.streams)) });
      }
    }
    for (const peer of pacedPeers.values()) await peer.stop();

    // Each mode in a fresh gateway of its own, all warmed alike, then measured in interleaved rounds.
    log('tracing cost');
    const tracers: RoundTarget<TracingMode>[] = [];
    for (const mode of TRACING_MODES) {
      const t = await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: `benchtr${mode}`, tracing: mode });
      tracers.push({ name: mode, url: t.url, shape: requestShape('openai', t.key), pids: () => [t.pid] });
    }
    const byMode = await roundsOf(tracers, plan.tracingRounds, plan.tracingSec, 'tracing');
    const tracing = TRACING_MODES.map((mode) => ({ mode, ...(byMode.get(mode) as MeasuredThroughput) }));

    // Counted twice per format: on the common path (the key already cached, a gateway whose cache
    // outlives the count) and with the default 1 s key cache, whose refreshes add a share per request.
    // The journal to PostgreSQL against none, in alternating slices of one continuous load through one
    // gateway process whose journal is switched between them (bench/journal-slices.ts, SwitchedJournal in
    // bench/serve.ts): two fresh processes of the same code differ by more than the journal costs.
    // Measured twice: with every process sharing every core, and with the gateway on a core of its own
    // (production's shape: a gateway pod has its own CPU, PostgreSQL its own machine), where the figure
    // is the journal's cost to the gateway rather than to a machine that runs everything.
    log('journal cost');
    const switchable = await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'benchj', tracing: 'off', databaseUrl: record.url, journalSwitch: true });
    // The whole PostgreSQL server (its autovacuum workers and WAL writer too) off the gateway's core.
    const rest = (): number[] => [...record.serverPids(), ...redisPids, sim.pid, process.pid];
    const journalCost = async (pinned: boolean): Promise<JournalCost> => {
      log(pinned ? 'journal cost, gateway on a core of its own' : 'journal cost, every core shared');
      try {
        const sliced = await measureJournalSlices(switchable, requestShape('openai', switchable.key), {
          connections: plan.connections,
          seconds: pinned ? plan.journalSec : plan.journalSharedSec,
          sliceMs: plan.journalSliceMs,
          processes: () => ({ pg: record.backendPids() }),
          // Again every ten pairs: the pool may have opened a PostgreSQL backend since.
          ...(pinned ? { arrange: () => pinGateway(switchable.pid, rest()) } : {}),
        });
        return summarize(sliced, plan.journalSliceMs);
      } finally {
        if (pinned) unpin([switchable.pid, ...rest()]);
      }
    };
    const journal = await journalCost(false);
    const journalOwnCore = canPin() ? await journalCost(true) : undefined;

    log('redis commands per request');
    const cachedGw = await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'benchcount', tracing: 'off', keyCacheTtlMs: 3_600_000 });
    const redisPerRequest: Record<string, RedisPerRequest> = {};
    const redisWithKeyRefresh: Record<string, RedisPerRequest> = {};
    // The same common path with every settlement journaled to PostgreSQL.
    const journalGw = await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'benchcountj', tracing: 'off', keyCacheTtlMs: 3_600_000, databaseUrl: record.url });
    const redisPerRequestJournal: Record<string, RedisPerRequest> = {};
    for (const format of FORMATS) {
      for (const [into, t] of [
        [redisPerRequest, cachedGw],
        [redisWithKeyRefresh, gw],
        [redisPerRequestJournal, journalGw],
      ] as const) {
        const shape = requestShape(format, t.key);
        await sequentialLatency(t.url, shape, 20);
        into[format] = await countRedisPerRequest(redis.url, plan.countedRequests, async () => {
          const seq = await sequentialLatency(t.url, shape, plan.countedRequests);
          if (seq.non2xx > 0) throw new Error(`${seq.non2xx} non-2xx responses while counting Redis commands`);
        });
      }
    }

    // The same common path under the throughput load (50 connections): settlements of one account that
    // finish together share a script call (group commit), so round trips fall below two per request.
    const redisUnderLoad: Record<string, RedisPerRequest> = {};
    for (const format of FORMATS) {
      const shape = requestShape(format, cachedGw.key);
      redisUnderLoad[format] = await countRedisPerRequest(redis.url, 0, async () => {
        const tp = await throughput(cachedGw.url, shape, plan.connections, plan.durationSec);
        if (tp.non2xx + tp.errors > 0) throw new Error(`${tp.non2xx + tp.errors} failed requests while counting Redis commands under load`);
        return tp.requests;
      });
    }

    log('ledger micro-benchmark');
    const ledger = await ledgerPairs(redis.url, plan.ledgerMs);

    await stopAll();
    log(`memory: ${plan.memoryStreams} open streams`);
    const memory = await memoryBench(redis.url, {
      streams: plan.memoryStreams,
      // Leaves the rest of the bound for teardown and the report.
      totalTimeoutMs: Math.max(20_000, plan.boundSec * 1000 - (performance.now() - startedAt) - 20_000),
      log,
      entry,
    });

    return {
      mode: plan.mode,
      date: new Date().toISOString(),
      node: process.version,
      plan,
      peers: peers.map((p) => ({ name: p.setup.name, measured: p.ready, status: p.status })),
      peerNotes,
      rows,
      agentShaped,
      streaming,
      tracing,
      journal,
      ...(journalOwnCore === undefined ? {} : { journalOwnCore }),
      redisPerRequest,
      redisWithKeyRefresh,
      redisPerRequestJournal,
      redisUnderLoad,
      ledger,
      memory,
    };
  } finally {
    for (const t of started) {
      await t.stop();
      killers.delete(t.kill);
    }
    await redis.stop();
    await record.drop();
  }
}

const measured = await main();
clearTimeout(watchdog);
const results: BenchResults = {
  ...measured,
  wallSeconds: Math.round((performance.now() - startedAt) / 1000),
  targets: targetChecks(measured),
};
/** A peer's failures are its own, reported in its row; they do not fail Tollgate's bench. */
const isPeer = (target: string): boolean => results.peers.some((p) => p.name === target);
const errors = [
  ...results.rows.flatMap((r) =>
    !isPeer(r.target) && r.throughput.non2xx + r.throughput.errors + r.sequential.non2xx > 0 ? [`${r.format} ${r.target}`] : [],
  ),
  ...results.streaming.flatMap((s) => (!isPeer(s.target) && s.non2xx > 0 ? [`stream ${s.format} ${s.target}`] : [])),
  ...results.tracing.flatMap((t) => (t.non2xx + t.errors > 0 ? [`tracing ${t.mode}`] : [])),
  ...(results.journal?.modes ?? []).flatMap((t) => (t.failed > 0 ? [`journal ${t.mode}`] : [])),
  ...(results.journalOwnCore?.modes ?? []).flatMap((t) => (t.failed > 0 ? [`journal ${t.mode}, gateway on its own core`] : [])),
  ...(results.agentShaped ?? []).flatMap((t) => (t.non2xx + t.errors > 0 ? [`agent-shaped ${t.format} ${t.target}`] : [])),
  ...(results.memory.opened === results.memory.streams ? [] : ['memory streams']),
];
const dir = new URL('./results/', import.meta.url).pathname;
mkdirSync(dir, { recursive: true });
const markdown = renderMarkdown(results);
writeFileSync(`${dir}latest.json`, JSON.stringify({ ...results, errors }, null, 2));
writeFileSync(`${dir}latest.md`, markdown);
process.stdout.write(markdown);
log(`done in ${results.wallSeconds} s`);
if (errors.length > 0) {
  process.stderr.write(`bench: errors in ${errors.join(', ')}\n`);
  process.exit(1);
}
process.exit(0);
