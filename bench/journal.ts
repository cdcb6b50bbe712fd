// The journal's cost alone: `npm run bench:journal [-- --rounds 10 --seconds 2]`. The full bench's
// "journal cost" step without the rest of the run (about a minute): one built gateway in the production
// composition whose journal is switched off and on between interleaved rounds, the median of the paired
// rounds' ratios, and the CPU per request of every process (see docs/performance.md, "The journal to
// PostgreSQL", for --pin and --profile).
import { readFileSync } from 'node:fs';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { buildTargets } from './build.js';
import { requestShape, throughput } from './load.js';
import { createBenchDatabase } from './record-db.js';
import { siteOf, type CpuProfile } from './cpu-profile.js';
import { pinGateway } from './pinning.js';
import { median } from './report.js';
import { builtEntry, cpuSeconds, cpuTimes, pidsWhere, startTarget } from './targets.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  const n = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
  return n;
};
const rounds = flag('rounds', 10);
const seconds = flag('seconds', 2);
// `--pin`: the gateway gets core 0 to itself and everything else shares the other cores, as in
// production, where the gateway's pod has its own CPU (the full bench measures both ways).
const pin = args.includes('--pin');
// `--profile`: the gateway's own CPU profile of each round, and where the journal's extra time goes.
const profile = args.includes('--profile');

/** µs of self time by function site, added into `into`. */
function selfTimes(p: CpuProfile, into: Map<string, number>): void {
  const site = new Map(p.nodes.map((n) => [n.id, siteOf(n)]));
  p.samples.forEach((id, i) => {
    const k = site.get(id) ?? '?';
    into.set(k, (into.get(k) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
}
const connections = 50;

/** CPU seconds by process; a process gone meanwhile is left out of both readings (see cpuSince). */
const cpuByPid = (pids: readonly number[]): Map<number, number> => {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, cpuSeconds(pid));
    } catch {
      // gone meanwhile
    }
  }
  return out;
};
/** CPU the processes of `before` used since, counting only those still there (a closed backend counts nothing). */
const cpuSince = (before: Map<number, number>): number => {
  let sum = 0;
  for (const [pid, cpu] of cpuByPid([...before.keys()])) sum += cpu - (before.get(pid) ?? cpu);
  return sum;
};

/** The machine's busy CPU seconds (all cores) from /proc/stat. */
const machineBusy = (): number => {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return (f.reduce((a, b) => a + b, 0) - idle) / 100;
};

/** The gateway's user and system CPU seconds, and its context switches (voluntary, involuntary). */
const detail = (pid: number): number[] => {
  const { user, system } = cpuTimes(pid);
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  const n = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(st)?.[1] ?? 0);
  return [user, system, n('voluntary_ctxt_switches'), n('nonvoluntary_ctxt_switches')];
};

/** The functions whose self time per request moved most between the modes. */
function profileDiff(off: { self: Map<string, number>; requests: number }, on: { self: Map<string, number>; requests: number }): string[] {
  const sites = new Set([...off.self.keys(), ...on.self.keys()]);
  const rows = [...sites].map((k) => {
    const a = (off.self.get(k) ?? 0) / off.requests;
    const b = (on.self.get(k) ?? 0) / on.requests;
    return { k, a, b, d: b - a };
  });
  const total = (m: Map<string, number>, n: number): number => [...m.values()].reduce((x, y) => x + y, 0) / n;
  return [
    `profiled µs/request (idle included): off ${total(off.self, off.requests).toFixed(1)}, on ${total(on.self, on.requests).toFixed(1)}`,
    ...rows
      .sort((x, y) => Math.abs(y.d) - Math.abs(x.d))
      .slice(0, 45)
      .map((r) => `${r.d >= 0 ? '+' : ''}${r.d.toFixed(2).padStart(6)}  ${r.a.toFixed(2).padStart(6)} -> ${r.b.toFixed(2).padStart(6)}  ${r.k}`),
  ];
}

const entry = builtEntry(buildTargets());
const redis = await startRedisServer();
const record = await createBenchDatabase();
const sim = await startTarget({ role: 'simulator' }, [], entry);
const gw = await startTarget(
  { role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'journal', tracing: 'off', databaseUrl: record.url, journalSwitch: true },
  [],
  entry,
);
try {
  const shape = requestShape('openai', gw.key);
  for (const on of [false, true]) {
    await gw.switchJournal(on);
    await throughput(gw.url, shape, connections, 2);
  }
  const modes = ['off', 'on'] as const;
  const fresh = () => ({ rps: [] as number[], self: new Map<string, number>(), detail: [0, 0, 0, 0], pg: 0, redis: 0, sim: 0, load: 0, machine: 0, requests: 0, failed: 0 });
  const perMode = { off: fresh(), on: fresh() };
  // redis-server titles itself `redis-server 127.0.0.1:<port>`.
  const redisPids = pidsWhere((c) => c.includes(`:${redis.port}`));
  for (let round = 0; round < rounds; round++) {
    // Alternating which mode goes first, so neither always follows the other.
    for (const mode of round % 2 === 0 ? modes : [...modes].reverse()) {
      await gw.switchJournal(mode === 'on');
      const pids = record.backendPids();
      if (pin) pinGateway(gw.pid, [...pids, ...redisPids, sim.pid, process.pid]);
      const d0 = detail(gw.pid);
      const pg0 = cpuByPid(pids);
      const redis0 = cpuByPid(redisPids);
      const sim0 = cpuSeconds(sim.pid);
      const load0 = process.cpuUsage();
      const machine0 = machineBusy();
      const m = perMode[mode];
      if (profile) gw.startProfile();
      const r = await throughput(gw.url, shape, connections, seconds);
      if (profile) selfTimes((await gw.stopProfile()) as CpuProfile, m.self);
      detail(gw.pid).forEach((v, i) => (m.detail[i] = (m.detail[i] ?? 0) + v - (d0[i] ?? 0)));
      m.pg += cpuSince(pg0);
      m.redis += cpuSince(redis0);
      m.sim += cpuSeconds(sim.pid) - sim0;
      const load = process.cpuUsage(load0);
      m.load += (load.user + load.system) / 1e6;
      m.machine += machineBusy() - machine0;
      m.rps.push(r.requestsPerSec);
      m.requests += r.requests;
      m.failed += r.non2xx + r.errors;
    }
  }
  const ratios = perMode.on.rps.map((on, i) => on / (perMode.off.rps[i] as number));
  const us = (s: number, n: number): number => Math.round((s * 1e6) / n);
  /** User plus system seconds (the first two of `detail`). */
  const gatewayCpu = (m: { detail: number[] }): number => (m.detail[0] ?? 0) + (m.detail[1] ?? 0);
  process.stdout.write(
    [
      `journal on / off, median of ${rounds} paired rounds: ${(median(ratios) ?? NaN).toFixed(3)} (rounds: ${ratios.map((r) => r.toFixed(2)).join(' ')})`,
      `req/s median: off ${median(perMode.off.rps) ?? NaN}, on ${median(perMode.on.rps) ?? NaN}`,
      `gateway CPU µs/request: off ${us(gatewayCpu(perMode.off), perMode.off.requests)}, on ${us(gatewayCpu(perMode.on), perMode.on.requests)}`,
      ...(['pg', 'redis', 'sim', 'load', 'machine'] as const).map(
        (k) => `${k} CPU µs/request: off ${us(perMode.off[k], perMode.off.requests)}, on ${us(perMode.on[k], perMode.on.requests)}`,
      ),
      `machine busy share: off ${(perMode.off.machine / (rounds * seconds * 2)).toFixed(2)}, on ${(perMode.on.machine / (rounds * seconds * 2)).toFixed(2)}`,
      ...(['off', 'on'] as const).map((k) => {
        const d = perMode[k].detail.map((v) => v / perMode[k].requests);
        return `gateway ${k}: user ${((d[0] ?? 0) * 1e6).toFixed(0)} µs, system ${((d[1] ?? 0) * 1e6).toFixed(0)} µs, switches per request voluntary ${(d[2] ?? 0).toFixed(3)} involuntary ${(d[3] ?? 0).toFixed(3)}`;
      }),
      ...(profile ? profileDiff(perMode.off, perMode.on) : []),
      `failed requests: off ${perMode.off.failed}, on ${perMode.on.failed}`,
      '',
    ].join('\n'),
  );
} finally {
  await gw.stop();
  await sim.stop();
  await redis.stop();
  await record.drop();
}
