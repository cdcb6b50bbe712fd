// The journal's cost as alternating slices of one continuous load: the gateway's journal is switched
// off and on every `sliceMs` while the same clients keep sending, and each slice's responses, elapsed
// time and CPU are read at its edges. This machine's speed drifts by 10–15% over seconds (other tenants
// of the host), which is more than the journal costs; rounds of 2 s each with fresh connections put
// single rounds from 0.72 to 1.18 × one another. Slices a fraction of a second long, in pairs whose order
// alternates, follow the drift closely enough that the median of many pairs is steady to a per cent or
// two. The gateway only runs the writer (commits and trims) while the journal is on (SwitchedJournal in
// bench/serve.ts), so none of an "on" slice's work is done in the "off" slice after it.
import { performance } from 'node:perf_hooks';
import { median, quantile } from './report.js';
import { startLoad } from './load.js';
import type { RequestShape } from './load.js';
import { cpuSeconds, cpuTimes, type Target } from './targets.js';

export type JournalMode = 'off' | 'on';

export interface SliceOptions {
  connections: number;
  /** Measured seconds in all (both modes); the warm-up comes first. */
  seconds: number;
  sliceMs: number;
  /** Unmeasured seconds of load before the first slice, each mode in turn. */
  warmupSec?: number;
  /** Other processes whose CPU is reported per request, by name (read at every slice's edges). */
  processes?: () => Record<string, readonly number[]>;
  /**
   * An A/A check of the method itself: the journal stays off in both modes, so the ratio reads what the
   * slicing alone gives (1 with no bias).
   */
  bothOff?: boolean;
  /** Called before every tenth pair (re-pinning a backend the pool opened since, say). */
  arrange?: () => void;
}

export interface ModeTotals {
  seconds: number;
  requests: number;
  failed: number;
  /** The gateway's user and system CPU seconds. */
  gatewayCpu: number;
  /** Of which user. */
  gatewayUser: number;
  /** The gateway's garbage collection, ms: scavenges and the rest. */
  gcMs: { minor: number; major: number };
  /** CPU seconds of each named process group. */
  cpu: Record<string, number>;
}

export interface SlicedJournal {
  /** Each slice's mode and bounds on the gateway's monotonic clock (µs), to split a CPU profile by. */
  timeline: { mode: JournalMode; fromUs: number; toUs: number }[];
  /** on ÷ off of each pair of adjacent slices. */
  ratios: number[];
  /** The median of `ratios`: the figure the target reads. */
  ratio: number;
  off: ModeTotals;
  on: ModeTotals;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** CPU seconds by process; one that is gone reads as absent. */
function cpuByPid(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, cpuSeconds(pid));
    } catch {
      // gone meanwhile (a backend the pool closed)
    }
  }
  return out;
}

/** The CPU the processes of `before` used since, counting only those still there at both readings. */
function cpuSince(before: Map<number, number>): number {
  let sum = 0;
  for (const [pid, cpu] of cpuByPid([...before.keys()])) sum += cpu - (before.get(pid) ?? cpu);
  return sum;
}

const totals = (): ModeTotals => ({ seconds: 0, requests: 0, failed: 0, gatewayCpu: 0, gatewayUser: 0, gcMs: { minor: 0, major: 0 }, cpu: {} });

export async function measureJournalSlices(gateway: Target, shape: RequestShape, opts: SliceOptions): Promise<SlicedJournal> {
  const warmupSec = opts.warmupSec ?? 2;
  const pairs = Math.max(1, Math.round((opts.seconds * 1000) / (2 * opts.sliceMs)));
  // autocannon's own bound is a backstop: the run is stopped once the last slice is read.
  const load = startLoad(gateway.url, shape, opts.connections, warmupSec + (pairs * 2 * opts.sliceMs) / 1000 + 60);
  const byMode: Record<JournalMode, ModeTotals> = { off: totals(), on: totals() };
  const ratios: number[] = [];
  const timeline: SlicedJournal['timeline'] = [];
  try {
    const journalOn = (mode: JournalMode): boolean => mode === 'on' && opts.bothOff !== true;
    for (const mode of ['off', 'on'] as const) {
      await gateway.switchJournal(journalOn(mode));
      await sleep((warmupSec * 1000) / 2);
    }
    for (let pair = 0; pair < pairs; pair++) {
      if (pair % 10 === 0) opts.arrange?.();
      // The order alternates, so a steady drift favours neither mode.
      const order: JournalMode[] = pair % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
      const rate: Partial<Record<JournalMode, number>> = {};
      for (const mode of order) {
        const start = await gateway.switchJournal(journalOn(mode));
        const groups = Object.entries(opts.processes?.() ?? {}).map(([name, pids]) => ({ name, before: cpuByPid(pids) }));
        const gw0 = cpuTimes(gateway.pid);
        const n0 = load.responses();
        const f0 = load.failures();
        const t0 = performance.now();
        await sleep(opts.sliceMs);
        const seconds = (performance.now() - t0) / 1000;
        // The next switch reports the GC time up to its own moment: a same-mode switch is a no-op.
        const end = await gateway.switchJournal(journalOn(mode));
        timeline.push({ mode, fromUs: start.atUs, toUs: end.atUs });
        const requests = load.responses() - n0;
        const m = byMode[mode];
        m.seconds += seconds;
        m.requests += requests;
        m.failed += load.failures() - f0;
        const gw1 = cpuTimes(gateway.pid);
        m.gatewayCpu += gw1.user + gw1.system - gw0.user - gw0.system;
        m.gatewayUser += gw1.user - gw0.user;
        m.gcMs.minor += end.gcMs.minor - start.gcMs.minor;
        m.gcMs.major += end.gcMs.major - start.gcMs.major;
        for (const g of groups) m.cpu[g.name] = (m.cpu[g.name] ?? 0) + cpuSince(g.before);
        rate[mode] = requests / seconds;
      }
      if (rate.off !== undefined && rate.on !== undefined && rate.off > 0) ratios.push(rate.on / rate.off);
    }
  } finally {
    await load.stop();
  }
  return { timeline, ratios, ratio: median(ratios) ?? NaN, off: byMode.off, on: byMode.on };
}

/** What the bench keeps of a sliced measurement (results JSON and report). */
export interface JournalCost {
  sliceMs: number;
  /** on ÷ off, the median of the pairs of slices. */
  ratio: number;
  /** on ÷ off of the req/s over every slice of each mode. */
  totalsRatio: number;
  /** The pairs' ratios at their quartiles (25%, 50%, 75%). */
  quartiles: number[];
  pairs: number;
  modes: {
    mode: JournalMode;
    requestsPerSec: number;
    requests: number;
    failed: number;
    gatewayCpuUsPerRequest: number;
    /** PostgreSQL's backends. */
    pgCpuUsPerRequest: number;
    /** The gateway's CPU seconds per second: below 1 it waited on others. */
    gatewayBusy: number;
  }[];
}

export function summarize(r: SlicedJournal, sliceMs: number): JournalCost {
  const rps = (m: ModeTotals): number => m.requests / m.seconds;
  const perRequest = (s: number, m: ModeTotals): number => Math.round((s * 1e6) / Math.max(1, m.requests));
  return {
    sliceMs,
    ratio: r.ratio,
    totalsRatio: rps(r.on) / rps(r.off),
    quartiles: [0.25, 0.5, 0.75].map((q) => quantile(r.ratios, q) ?? NaN),
    pairs: r.ratios.length,
    modes: (['off', 'on'] as const).map((mode) => {
      const m = r[mode];
      return {
        mode,
        requestsPerSec: Math.round(rps(m)),
        requests: m.requests,
        failed: m.failed,
        gatewayCpuUsPerRequest: perRequest(m.gatewayCpu, m),
        pgCpuUsPerRequest: perRequest(m.cpu.pg ?? 0, m),
        gatewayBusy: m.gatewayCpu / m.seconds,
      };
    }),
  };
}
