// The journal's cost alone: `npm run bench:journal [-- --seconds 60 --slice-ms 500 --pin]`. The full
// bench's "journal cost" step without the rest of the run: one built gateway in the production
// composition whose journal is switched off and on in alternating slices of one continuous load
// (bench/journal-slices.ts), the median of the pairs' ratios, and the CPU per request of every process
// (see docs/performance.md, "The journal to PostgreSQL").
import { startRedisServer } from '../test/helpers/redis-server.js';
import { buildTargets } from './build.js';
import { measureJournalSlices, summarize, type JournalMode, type SlicedJournal } from './journal-slices.js';
import { siteOf, type CpuProfile } from './cpu-profile.js';
import { requestShape } from './load.js';
import { createBenchDatabase } from './record-db.js';
import { pinGateway, unpin } from './pinning.js';
import { builtEntry, pidsWhere, startTarget } from './targets.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  const n = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
  return n;
};
/** Measured seconds, both modes together. */
const seconds = flag('seconds', 60);
const sliceMs = flag('slice-ms', 500);
// `--connections`: concurrent clients (50 by default, as in the full bench).
const connections = flag('connections', 50);
// `--pin`: the gateway gets core 0 to itself and everything else shares the other cores, as in
// production, where the gateway's pod has its own CPU (the full bench measures both ways).
const pin = args.includes('--pin');
// `--pg-idle` (with --pin): PostgreSQL's backends at idle priority on the other cores, as if on a machine of their own.
const pgIdle = args.includes('--pg-idle');
// `--profile`: the gateway's own CPU profile over the whole run, its samples split by the slice they
// fell in, and the functions whose self time per request moved most between the modes.
const profile = args.includes('--profile');
// `--aa`: the journal off in both modes, to see what the method reads with no difference (1 with no bias).
const bothOff = args.includes('--aa');
// `--semi-space N`: the gateway's V8 young generation, MB per semi-space (V8 sizes it itself by default).
const semiSpace = args.includes('--semi-space') ? flag('semi-space', 16) : undefined;

/** µs of self time per request by function site, from the samples of `profile` that fell in `mode`'s slices. */
function selfTimesIn(p: CpuProfile, timeline: SlicedJournal['timeline'], mode: JournalMode, requests: number): Map<string, number> {
  const site = new Map(p.nodes.map((n) => [n.id, siteOf(n)]));
  const slices = timeline.filter((t) => t.mode === mode);
  const out = new Map<string, number>();
  let t = p.startTime;
  let i = 0;
  p.samples.forEach((id, n) => {
    const dt = p.timeDeltas[n] ?? 0;
    t += dt;
    // Samples come in time order, as do the slices.
    while (i < slices.length && (slices[i] as { toUs: number }).toUs < t) i++;
    const s = slices[i];
    if (s === undefined || t < s.fromUs) return;
    const k = site.get(id) ?? '?';
    out.set(k, (out.get(k) ?? 0) + dt / requests);
  });
  return out;
}

/** The sites whose self time per request moved most between the modes. */
function profileDiff(off: Map<string, number>, on: Map<string, number>): string[] {
  const sum = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
  const rows = [...new Set([...off.keys(), ...on.keys()])].map((k) => ({ k, a: off.get(k) ?? 0, b: on.get(k) ?? 0 }));
  return [
    `profiled µs/request (idle included): off ${sum(off).toFixed(1)}, on ${sum(on).toFixed(1)}`,
    ...rows
      .sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a))
      .slice(0, 40)
      .map((r) => `${r.b >= r.a ? '+' : ''}${(r.b - r.a).toFixed(2).padStart(6)}  ${r.a.toFixed(2).padStart(6)} -> ${r.b.toFixed(2).padStart(6)}  ${r.k}`),
  ];
}

const entry = builtEntry(buildTargets());
const redis = await startRedisServer();
const record = await createBenchDatabase();
const sim = await startTarget({ role: 'simulator' }, [], entry);
const gw = await startTarget(
  { role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'journal', tracing: 'off', databaseUrl: record.url, journalSwitch: true },
  semiSpace === undefined ? [] : [`--max-semi-space-size=${semiSpace}`, `--min-semi-space-size=${semiSpace}`],
  entry,
);
try {
  const shape = requestShape('openai', gw.key);
  // redis-server titles itself `redis-server 127.0.0.1:<port>`.
  const redisPids = pidsWhere((c) => c.includes(`:${redis.port}`));
  if (profile) gw.startProfile();
  const r = await measureJournalSlices(gw, shape, {
    connections,
    seconds,
    sliceMs,
    bothOff,
    processes: () => ({ pg: record.backendPids(), redis: redisPids, sim: [sim.pid], load: [process.pid] }),
    // The whole PostgreSQL server, not only this database's backends: its autovacuum workers, WAL and
    // background writers and checkpointer are the journal's work too, and could run on the gateway's core.
    ...(pin ? { arrange: () => pinGateway(gw.pid, [...(pgIdle ? [] : record.serverPids()), ...redisPids, sim.pid, process.pid], pgIdle ? record.serverPids() : []) } : {}),
  });
  const profiled = profile ? ((await gw.stopProfile()) as CpuProfile) : undefined;
  const cost = summarize(r, sliceMs);
  const us = (s: number, n: number): number => Math.round((s * 1e6) / n);
  const modes = ['off', 'on'] as const;
  process.stdout.write(
    [
      `journal on / off, median of ${cost.pairs} pairs of ${sliceMs} ms slices: ${cost.ratio.toFixed(3)}; of the totals ${cost.totalsRatio.toFixed(3)}`,
      `pair ratios, quartiles: ${cost.quartiles.map((q) => q.toFixed(3)).join(' ')}`,
      `req/s: ${cost.modes.map((m) => `${m.mode} ${m.requestsPerSec}`).join(', ')}`,
      `gateway CPU µs/request: ${cost.modes.map((m) => `${m.mode} ${m.gatewayCpuUsPerRequest}`).join(', ')}`,
      ...modes.map((m) => `gateway ${m}: user ${us(r[m].gatewayUser, r[m].requests)} µs, system ${us(r[m].gatewayCpu - r[m].gatewayUser, r[m].requests)} µs per request`),
      ...modes.map((m) => `gateway ${m}: GC µs per request, scavenges ${(r[m].gcMs.minor * 1000 / r[m].requests).toFixed(1)}, mark-compact ${(r[m].gcMs.major * 1000 / r[m].requests).toFixed(1)}`),
      `gateway busy share: ${cost.modes.map((m) => `${m.mode} ${m.gatewayBusy.toFixed(2)}`).join(', ')}`,
      ...['pg', 'redis', 'sim', 'load'].map((k) => `${k} CPU µs/request: ${modes.map((m) => `${m} ${us(r[m].cpu[k] ?? 0, r[m].requests)}`).join(', ')}`),
      ...(profiled === undefined ? [] : profileDiff(selfTimesIn(profiled, r.timeline, 'off', r.off.requests), selfTimesIn(profiled, r.timeline, 'on', r.on.requests))),
      `failed requests: off ${r.off.failed}, on ${r.on.failed}`,
      '',
    ].join('\n'),
  );
} finally {
  // The machine's own PostgreSQL, if that was the one, goes back to every core.
  if (pin) unpin(record.serverPids());
  await gw.stop();
  await sim.stop();
  await redis.stop();
  await record.drop();
}
