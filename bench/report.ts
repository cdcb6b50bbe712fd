// Renders the benchmark results as Markdown: each target's ratio to the floor and to the peer, the
// streaming, Redis, ledger, memory and tracing figures, and the targets with pass or miss.
import { cpus } from 'node:os';
import type { LedgerResult, RedisPerRequest } from './ledger.js';
import type { BenchFormat, LatencyResult, StreamResult, ThroughputResult } from './load.js';
import type { MemoryResult } from './memory.js';
import type { JournalCost } from './journal-slices.js';

export const TARGET_NAMES = {
  direct: 'direct (simulator)',
  floor: 'floor proxy',
  tollgate: 'tollgate',
  /** With its journal to PostgreSQL, as production runs it. */
  tollgateRecorded: 'tollgate + PostgreSQL',
  portkey: 'portkey',
  litellm: 'litellm',
  litellmRecorded: 'litellm + PostgreSQL',
  bifrost: 'bifrost',
  bifrostGoverned: 'bifrost + governance',
} as const;

/** The best round's figures; `rounds` lists every round's requests/s; CPU per request is the median of the rounds'. */
export type MeasuredThroughput = ThroughputResult & {
  rounds: number[];
  cpuUsPerRequest: number;
  /** Each round's CPU µs per request, in round order (absent in results from before they were kept). */
  cpuUsRounds?: number[];
  /** CPU of its stores' processes (Redis, PostgreSQL backends), per request: the median of the rounds. */
  serverCpuUsPerRequest?: number;
  /** Resident memory of all its processes, the highest seen after a round, MB. */
  rssMb?: number;
};

export interface TargetRow {
  format: BenchFormat;
  target: string;
  throughput: MeasuredThroughput;
  sequential: LatencyResult;
}

export interface TargetCheck {
  target: string;
  measured: string;
  /** `info`: a comparison reported whatever it shows (Bifrost's rows). */
  status: 'pass' | 'miss' | 'n/a' | 'info';
}

export interface BenchResults {
  mode: string;
  date: string;
  node: string;
  wallSeconds: number;
  plan: Record<string, unknown>;
  /** Each peer gateway: measured (with how it was configured) or why not. */
  peers: { name: string; measured: boolean; status: string }[];
  /** Per peer and format: why it was not measured in that format. */
  peerNotes: Record<string, string>;
  rows: TargetRow[];
  /** Agent-shaped bodies, floor and Tollgate (absent in results from before they were measured). */
  agentShaped?: (MeasuredThroughput & { format: BenchFormat; target: string; bodyBytes: number })[];
  streaming: (StreamResult & { format: BenchFormat; target: string })[];
  tracing: (MeasuredThroughput & { mode: string })[];
  /** Journal to PostgreSQL off and on (absent in results from before the journal). */
  journal?: JournalCost;
  /** The same with the gateway on a core of its own and the rest on the others (absent on one core). */
  journalOwnCore?: JournalCost;
  /** The common path with the journal on. */
  redisPerRequestJournal?: Record<string, RedisPerRequest>;
  /** The common path under the throughput load (absent in results from before it was counted). */
  redisUnderLoad?: Record<string, RedisPerRequest>;
  /** Common path: the key already in the gateway's cache. */
  redisPerRequest: Record<string, RedisPerRequest>;
  /** With the default 1 s key cache, whose refreshes add a share per request. */
  redisWithKeyRefresh: Record<string, RedisPerRequest>;
  ledger: LedgerResult;
  memory: MemoryResult;
  targets: TargetCheck[];
}

const f = (n: number | undefined, digits = 2): string => (n !== undefined && Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
const ratio = (a: number | undefined, b: number | undefined): number | undefined => (a !== undefined && b ? a / b : undefined);

function find<T extends { format: string; target: string }>(list: T[], format: string, target: string): T | undefined {
  return list.find((x) => x.format === format && x.target === target);
}

const FORMATS: BenchFormat[] = ['openai', 'anthropic'];

/** The median over rounds of `t`'s requests/s over `base`'s in the same round (adjacent in time). */
function pairedRatio(t: MeasuredThroughput, base: MeasuredThroughput): number | undefined {
  return median(t.rounds.map((v, i) => ratio(v, base.rounds[i])).filter((x): x is number => x !== undefined));
}

export function median(xs: number[]): number | undefined {
  return quantile(xs, 0.5);
}

/** The `q` quantile of `xs` (0 ≤ q ≤ 1), between the two nearest values. */
export function quantile(xs: number[], q: number): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const at = q * (s.length - 1);
  const lo = s[Math.floor(at)] as number;
  const hi = s[Math.ceil(at)] as number;
  return lo + (hi - lo) * (at - Math.floor(at));
}

/** The targets (issue 13's for the request path, issue 12's for the journal), each with its measured figure; computed once and kept in the JSON too. */
export function targetChecks(r: Omit<BenchResults, 'targets' | 'wallSeconds'>): TargetCheck[] {
  const out: TargetCheck[] = [];
  const check = (target: string, value: number | undefined, pass: (v: number) => boolean, show: (v: number) => string, na = 'not measured'): void => {
    if (value === undefined || !Number.isFinite(value)) out.push({ target, measured: na, status: 'n/a' });
    else out.push({ target, measured: show(value), status: pass(value) ? 'pass' : 'miss' });
  };
  for (const format of FORMATS) {
    const tg = find(r.rows, format, TARGET_NAMES.tollgate);
    const floor = find(r.rows, format, TARGET_NAMES.floor);
    const peer = find(r.rows, format, TARGET_NAMES.portkey);
    check(`${format}: req/s at 50 connections ≥ 0.5 × floor (issue 13)`, ratio(tg?.throughput.requestsPerSec, floor?.throughput.requestsPerSec), (v) => v >= 0.5, (v) => `${f(v)} × floor`);
    check(
      `${format}: req/s at 50 connections ≥ 8 × Portkey (issue 13)`,
      ratio(tg?.throughput.requestsPerSec, peer?.throughput.requestsPerSec),
      (v) => v >= 8,
      (v) => `${f(v)} × Portkey`,
      r.peerNotes[`${TARGET_NAMES.portkey}, ${format}`] ?? r.peers.find((p) => p.name === TARGET_NAMES.portkey)?.status ?? 'not measured',
    );
    check(
      `${format}: CPU per request, small bodies, ≤ 2.0 × floor (issue 13)`,
      ratio(tg?.throughput.cpuUsPerRequest, floor?.throughput.cpuUsPerRequest),
      (v) => v <= 2,
      (v) => `${f(v)} × floor (${f(tg?.throughput.cpuUsPerRequest, 0)} µs against ${f(floor?.throughput.cpuUsPerRequest, 0)} µs)`,
    );
  }
  for (const format of FORMATS) {
    const tg = find(r.rows, format, TARGET_NAMES.tollgate);
    const direct = find(r.rows, format, TARGET_NAMES.direct);
    const added = (p: 'p50' | 'p99'): number | undefined => (tg && direct ? tg.sequential[p] - direct.sequential[p] : undefined);
    check(`${format}: added p50 at 1 connection ≤ 0.35 ms (issue 13)`, added('p50'), (v) => v <= 0.35, (v) => `${f(v, 3)} ms`);
    check(`${format}: added p99 at 1 connection ≤ 1.5 ms (issue 13)`, added('p99'), (v) => v <= 1.5, (v) => `${f(v, 3)} ms`);
  }
  for (const format of FORMATS) {
    const tg = find(r.streaming, format, TARGET_NAMES.tollgate);
    const floor = find(r.streaming, format, TARGET_NAMES.floor);
    const direct = find(r.streaming, format, TARGET_NAMES.direct);
    const added = (t: StreamResult | undefined): number | undefined => (t && direct ? t.ttftP50 - direct.ttftP50 : undefined);
    const [tgAdded, floorAdded] = [added(tg), added(floor)];
    check(
      `${format}: streaming TTFT added at p50 ≤ the floor's + 0.5 ms (issue 13)`,
      tgAdded !== undefined && floorAdded !== undefined ? tgAdded - floorAdded : undefined,
      (v) => v <= 0.5,
      (v) => `${f(tgAdded, 3)} ms added, the floor ${f(floorAdded, 3)} ms: ${f(v, 3)} ms more`,
    );
  }
  const m = r.memory;
  const at10k = m.opened >= 10_000;
  check('baseline RSS ≤ 100 MB, tracing off (issue 13)', m.opened > 0 ? m.baseline.rssMb : undefined, (v) => v <= 100, (v) => `${f(v, 1)} MB (heap ${f(m.baseline.heapUsedMb, 1)} MB; after warm-up streams; compiled, as shipped)`);
  check(
    '10,000 open streams ≤ 500 MB RSS (issue 13)',
    at10k ? m.loaded.rssMb : m.opened > 0 ? m.projectedRssMbAt10k : undefined,
    (v) => v <= 500,
    (v) =>
      at10k
        ? `${f(v, 1)} MB measured`
        : `${f(v, 1)} MB projected (baseline ${m.baseline.rssMb} MB + 10,000 × ${m.rssPerStreamKb} KB measured at ${m.opened} streams${m.limitedBy ? '; ' + m.limitedBy : ''})`,
  );
  for (const format of FORMATS) {
    const c = r.redisPerRequest[format];
    check(`${format}: ≤ 2 Redis round trips per request (common path, key cached)`, c?.roundTrips, (v) => v <= 2, (v) => `${f(v)} round trips (${f(c?.sent)} commands sent)`);
    check(`${format}: ≤ 2 Redis commands sent per request (issue 33)`, c?.sent, (v) => v <= 2, (v) => `${f(v)} commands (${f(c?.roundTrips)} round trips)`);
    const load = r.redisUnderLoad?.[format];
    check(
      `${format}: fewer than 2 Redis round trips per request at ${r.plan.connections} connections (issue 33: group commit)`,
      load?.roundTrips,
      (v) => v < 2,
      (v) => `${f(v)} round trips, ${f(load?.sent)} commands sent per request`,
    );
  }
  // The median of paired rounds: on this shared machine one lucky round decided best-of ratios.
  const off = r.tracing.find((t) => t.mode === 'off');
  for (const [mode, floorRatio, cost] of [
    ['sampled-0', 0.98, '2%'],
    ['sampled-100', 0.85, '15%'],
  ] as const) {
    const t = r.tracing.find((x) => x.mode === mode);
    check(
      `tracing ${mode} costs ≤ ${cost} of req/s`,
      t && off ? pairedRatio(t, off) : undefined,
      (v) => v >= floorRatio,
      (v) =>
        `${f(v)} × tracing off (median of paired rounds; best of each ${f(ratio(t?.requestsPerSec, off?.requestsPerSec))}, ` +
        `by CPU per request ${f(ratio(off?.cpuUsPerRequest, t?.cpuUsPerRequest))})`,
    );
  }
  for (const format of FORMATS) {
    const floorAgent = r.agentShaped?.find((x) => x.format === format && x.target === TARGET_NAMES.floor);
    const gwAgent = r.agentShaped?.find((x) => x.format === format && x.target === TARGET_NAMES.tollgate);
    check(
      `${format}: CPU per request, ${format === 'anthropic' ? '300' : '100'} KB agent-shaped bodies, ≤ 2.0 × floor (issue 13)`,
      ratio(gwAgent?.cpuUsPerRequest, floorAgent?.cpuUsPerRequest),
      (v) => v <= 2,
      (v) => `${f(v)} × floor (${f(gwAgent?.cpuUsPerRequest, 0)} µs against ${f(floorAgent?.cpuUsPerRequest, 0)} µs)`,
    );
  }
  // The target reads the gateway on a core of its own where the machine allows it (production's shape);
  // the figure with everything sharing every core is given beside it.
  const shared = r.journal;
  const ownCore = r.journalOwnCore;
  const measured = ownCore ?? shared;
  const modeOf = (c: JournalCost | undefined, mode: 'off' | 'on') => c?.modes.find((m) => m.mode === mode);
  check(
    'the journal to PostgreSQL costs ≤ 5% of req/s (issue 12)',
    measured?.ratio,
    (v) => v >= 0.95,
    (v) =>
      `${f(v)} × journal off (median of ${measured?.pairs ?? 0} pairs of ${measured?.sliceMs ?? 0} ms slices${ownCore ? ', the gateway on a core of its own' : ''}; ` +
      `quartiles ${measured?.quartiles.map((q) => f(q)).join('–') ?? '–'}; of the totals ${f(measured?.totalsRatio)}; ` +
      `by the gateway's CPU per request ${f(ratio(modeOf(measured, 'off')?.gatewayCpuUsPerRequest, modeOf(measured, 'on')?.gatewayCpuUsPerRequest))}; ` +
      `PostgreSQL spent ${f(modeOf(measured, 'on')?.pgCpuUsPerRequest, 0)} µs of CPU per request on this machine${ownCore && shared ? `; with every process sharing every core ${f(shared.ratio)} ×` : ''})`,
  );
  for (const format of FORMATS) {
    // The settle script appends the journal entry; what remains is the writer's batched deletion of
    // committed entries, off the request path (catch-up scripts per account every 100 ms).
    const on = r.redisPerRequestJournal?.[format];
    const off = r.redisPerRequest[format];
    check(
      `${format}: the journal adds no Redis round trip per request (issue 12)`,
      on && off ? on.roundTrips - off.roundTrips : undefined,
      (v) => v < 0.1,
      // The deletions are inside the catch-up script, so a trim shows as a script call, not as XDEL.
      (v) => `${f(v, 3)} round trips added (${f(on?.roundTrips)} with, ${f(off?.roundTrips)} without; a trim inside the count's window adds a share)`,
    );
  }
  out.push(...peerComparisons(r));
  return out;
}

/** CPU per request of a row: its own processes and its stores'. */
const totalCpu = (t: MeasuredThroughput | undefined): number | undefined => (t ? t.cpuUsPerRequest + (t.serverCpuUsPerRequest ?? 0) : undefined);

/**
 * Issue 33's peer targets: Tollgate ahead of LiteLLM on every row (each configuration against its like:
 * no database against none, PostgreSQL against PostgreSQL), and Bifrost's rows beside ours with the gap
 * in CPU µs per request, reported whatever they show.
 */
function peerComparisons(r: Omit<BenchResults, 'targets' | 'wallSeconds'>): TargetCheck[] {
  const out: TargetCheck[] = [];
  const added = (rows: TargetRow[], format: string, target: string, p: 'p50' | 'p99'): number | undefined => {
    const t = find(rows, format, target);
    const d = find(rows, format, TARGET_NAMES.direct);
    return t && d ? t.sequential[p] - d.sequential[p] : undefined;
  };
  const ttft = (format: string, target: string): number | undefined => {
    const t = find(r.streaming, format, target);
    const d = find(r.streaming, format, TARGET_NAMES.direct);
    return t && d ? t.ttftP50 - d.ttftP50 : undefined;
  };
  const versus = (label: string, ours: number | undefined, theirs: number | undefined, higherIsBetter: boolean, unit: string, digits: number, why: string): void => {
    if (ours === undefined || theirs === undefined || !Number.isFinite(ours) || !Number.isFinite(theirs)) {
      out.push({ target: label, measured: why, status: 'n/a' });
      return;
    }
    const ahead = higherIsBetter ? ours > theirs : ours < theirs;
    out.push({ target: label, measured: `Tollgate ${f(ours, digits)}${unit}, LiteLLM ${f(theirs, digits)}${unit}`, status: ahead ? 'pass' : 'miss' });
  };
  // The peer's own line above says why; the rows only point there.
  const statusOf = (name: string): string => (r.peers.find((p) => p.name === name)?.measured === true ? 'not measured' : `${name} not measured (see Peers)`);
  for (const format of FORMATS) {
    for (const [ours, theirs] of [
      [TARGET_NAMES.tollgate, TARGET_NAMES.litellm],
      [TARGET_NAMES.tollgateRecorded, TARGET_NAMES.litellmRecorded],
    ] as const) {
      const [a, b] = [find(r.rows, format, ours), find(r.rows, format, theirs)];
      const why = r.peerNotes[`${theirs}, ${format}`] ?? statusOf(theirs);
      const pre = `${format}: ${ours} ahead of ${theirs}`;
      versus(`${pre}, req/s at 50 connections (issue 33)`, a?.throughput.requestsPerSec, b?.throughput.requestsPerSec, true, ' req/s', 0, why);
      versus(`${pre}, CPU µs per request with its stores (issue 33)`, totalCpu(a?.throughput), totalCpu(b?.throughput), false, ' µs', 0, why);
      versus(`${pre}, added p50 at 1 connection (issue 33)`, added(r.rows, format, ours, 'p50'), added(r.rows, format, theirs, 'p50'), false, ' ms', 3, why);
      versus(`${pre}, added p99 at 1 connection (issue 33)`, added(r.rows, format, ours, 'p99'), added(r.rows, format, theirs, 'p99'), false, ' ms', 3, why);
      versus(`${pre}, RSS (issue 33)`, a?.throughput.rssMb, b?.throughput.rssMb, false, ' MB', 1, why);
    }
    versus(
      `${format}: tollgate ahead of litellm, added time to first token (issue 33)`,
      ttft(format, TARGET_NAMES.tollgate),
      ttft(format, TARGET_NAMES.litellm),
      false,
      ' ms',
      3,
      r.peerNotes[`${TARGET_NAMES.litellm}, ${format}`] ?? statusOf(TARGET_NAMES.litellm),
    );
    for (const [ours, theirs] of [
      [TARGET_NAMES.tollgate, TARGET_NAMES.bifrost],
      [TARGET_NAMES.tollgateRecorded, TARGET_NAMES.bifrostGoverned],
    ] as const) {
      const [a, b] = [totalCpu(find(r.rows, format, ours)?.throughput), totalCpu(find(r.rows, format, theirs)?.throughput)];
      const label = `${format}: CPU µs per request, ${ours} beside ${theirs} (issue 33, reported)`;
      if (a === undefined || b === undefined) out.push({ target: label, measured: r.peerNotes[`${theirs}, ${format}`] ?? statusOf(theirs), status: 'n/a' });
      else out.push({ target: label, measured: `${f(a, 0)} µs against ${f(b, 0)} µs: ${a >= b ? `${f(a - b, 0)} µs more` : `${f(b - a, 0)} µs less`}`, status: 'info' });
    }
  }
  return out;
}

const spread = (t: MeasuredThroughput): string => (t.cpuUsRounds && t.cpuUsRounds.length > 1 ? `${Math.min(...t.cpuUsRounds)}–${Math.max(...t.cpuUsRounds)}` : '–');

/** The README's table: Tollgate and every peer side by side on the figures users compare. */
export function peerTable(r: Omit<BenchResults, 'targets' | 'wallSeconds'>): string[] {
  const names = [TARGET_NAMES.floor, TARGET_NAMES.tollgate, TARGET_NAMES.tollgateRecorded, ...r.peers.map((p) => p.name)];
  const out = [
    `### Side by side (small bodies; ${r.plan.connections} connections for req/s and CPU; 1 connection for added latency; paced streams for time to first token)`,
    '',
    '| format | gateway | req/s | CPU µs/request (spread) | store CPU µs/request | added p50 ms | added p99 ms | added TTFT p50 ms | RSS MB |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const format of FORMATS) {
    const direct = find(r.rows, format, TARGET_NAMES.direct);
    const directStream = find(r.streaming, format, TARGET_NAMES.direct);
    for (const name of names) {
      const row = find(r.rows, format, name);
      if (!row) continue;
      const t = row.throughput;
      const stream = find(r.streaming, format, name);
      out.push(
        `| ${format} | ${name} | ${t.requestsPerSec} | ${f(t.cpuUsPerRequest, 0)} (${spread(t)}) | ${f(t.serverCpuUsPerRequest, 0)} | ` +
          `${direct ? f(row.sequential.p50 - direct.sequential.p50, 3) : 'n/a'} | ${direct ? f(row.sequential.p99 - direct.sequential.p99, 3) : 'n/a'} | ` +
          `${stream && directStream ? f(stream.ttftP50 - directStream.ttftP50, 3) : 'n/a'} | ${f(t.rssMb, 1)} |`,
      );
    }
  }
  out.push('');
  return out;
}

export function renderMarkdown(r: BenchResults): string {
  const cpu = cpus();
  const out: string[] = [
    `# Tollgate benchmark (${r.mode})`,
    '',
    `${r.date}; Node ${r.node}; ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}; wall time ${r.wallSeconds} s; ` +
      `command: \`npm run bench${r.mode === 'smoke' ? ' -- --smoke' : ''}\`.`,
    '',
    'Peers:',
    '',
    ...r.peers.map((p) => `- **${p.name}**: ${p.measured ? '' : 'not measured, '}${p.status}.`),
    ...Object.entries(r.peerNotes).map(([which, note]) => `- ${which}: ${note}.`),
    '',
    ...peerTable(r),
    `## Non-streaming (${r.plan.connections} connections with autocannon, best of ${r.plan.rounds} interleaved rounds of ${r.plan.durationSec} s; 1 connection: ${r.plan.sequential} sequential requests)`,
    '',
    'Added latency is over the direct upstream at the same percentile. Latency percentiles at 50 connections are those of the best round. ' +
      'CPU µs/request: user+system CPU time of all the target\'s processes per request, the median of the rounds (spread: lowest–highest round); store CPU: its Redis and PostgreSQL backends likewise; other load on the machine hardly moves either.',
    '',
    '| format | target | req/s | × floor | × Portkey | p50 ms | p90 ms | p99 ms | added p50 ms (1 conn) | added p99 ms (1 conn) | 1-conn p50 ms | 1-conn p99 ms | CPU µs/request | spread | store CPU µs/request | RSS MB | rounds req/s | non-2xx |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|',
  ];
  for (const row of r.rows) {
    const floor = find(r.rows, row.format, TARGET_NAMES.floor);
    const peer = find(r.rows, row.format, TARGET_NAMES.portkey);
    const direct = find(r.rows, row.format, TARGET_NAMES.direct);
    const t = row.throughput;
    const s = row.sequential;
    const noAdded = row === direct || !direct;
    out.push(
      `| ${row.format} | ${row.target} | ${t.requestsPerSec} | ${f(ratio(t.requestsPerSec, floor?.throughput.requestsPerSec))} | ` +
        `${f(ratio(t.requestsPerSec, peer?.throughput.requestsPerSec))} | ${t.p50} | ${t.p90} | ${t.p99} | ` +
        `${noAdded ? '–' : f(s.p50 - direct.sequential.p50, 3)} | ${noAdded ? '–' : f(s.p99 - direct.sequential.p99, 3)} | ` +
        `${f(s.p50, 3)} | ${f(s.p99, 3)} | ${f(t.cpuUsPerRequest, 0)} | ${spread(t)} | ${f(t.serverCpuUsPerRequest, 0)} | ${f(t.rssMb, 1)} | ${t.rounds.join(', ')} | ${t.non2xx + t.errors + s.non2xx} |`,
    );
  }
  out.push(
    '',
    `## Streaming (paced simulator: first token after 5 ms, then one every 2 ms, ${r.plan.streamTokens} tokens; ${r.plan.streams} sequential streams)`,
    '',
    '| format | target | TTFT p50 ms | TTFT p99 ms | added TTFT p50 ms | mean inter-chunk ms | added inter-chunk ms |',
    '|---|---|---:|---:|---:|---:|---:|',
  );
  for (const s of r.streaming) {
    const direct = find(r.streaming, s.format, TARGET_NAMES.direct);
    const noAdded = s === direct || !direct;
    out.push(
      `| ${s.format} | ${s.target} | ${f(s.ttftP50, 3)} | ${f(s.ttftP99, 3)} | ${noAdded ? '–' : f(s.ttftP50 - direct.ttftP50, 3)} | ` +
        `${f(s.interChunkMean, 3)} | ${noAdded ? '–' : f(s.interChunkMean - direct.interChunkMean, 3)} |`,
    );
  }
  out.push(
    '',
    '## Redis per gateway request (sequential requests, counted by Redis)',
    '',
    'Round trips: socket reads Redis processed (INFO stats). Sent: commands the gateway sent (MONITOR, without what scripts run). ' +
      'Executed: every command Redis ran, script-internal ones included (INFO commandstats).',
    '',
    '| format | key cache | round trips | commands sent | sent by command | commands executed |',
    '|---|---|---:|---:|---|---:|',
  );
  for (const format of FORMATS) {
    for (const [cache, c] of [
      ['key cached (common path)', r.redisPerRequest[format]],
      ['1 s key cache (default)', r.redisWithKeyRefresh[format]],
      ['key cached, journal to PostgreSQL on', r.redisPerRequestJournal?.[format]],
      [`key cached, ${r.plan.connections} connections`, r.redisUnderLoad?.[format]],
    ] as const) {
      if (!c) continue;
      const by = Object.entries(c.sentByCommand)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
      out.push(`| ${format} | ${cache} | ${f(c.roundTrips)} | ${f(c.sent)} | ${by} | ${f(c.total)} |`);
    }
  }
  out.push('', '## Ledger micro-benchmark', '', `${r.ledger.pairsPerSec} reserve+settle pairs/s straight against Redis (${r.ledger.pairs} pairs, ${r.ledger.concurrency} in flight).`);
  const m = r.memory;
  out.push(
    '',
    '## Memory: concurrent open streams through the gateway',
    '',
    'RSS is VmRSS of the gateway process (/proc), heap is its V8 heap in use; both read after a full GC, before opening streams (baseline) and with them open.',
    '',
    '| streams asked | open | failed | baseline RSS MB | baseline heap MB | loaded RSS MB | loaded heap MB | RSS per stream KB | heap per stream KB | RSS at 10,000 MB | opening s |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    `| ${m.requested} | ${m.opened} | ${m.failed} | ${m.baseline.rssMb} | ${m.baseline.heapUsedMb} | ${m.loaded.rssMb} | ${m.loaded.heapUsedMb} | ` +
      `${m.rssPerStreamKb} | ${m.heapPerStreamKb} | ${m.opened >= 10_000 ? m.loaded.rssMb : `${m.projectedRssMbAt10k} (projected)`} | ${m.openSeconds} |`,
    '',
    `Streams spread over ${m.origins} simulator port(s), one upstream pool each.` +
      (m.limitedBy ? ` Fewer streams than asked: ${m.limitedBy}.` : ''),
  );
  const off = r.tracing.find((t) => t.mode === 'off');
  out.push(
    '',
    `## Tracing cost (OpenAI format, ${r.plan.connections} connections, a fresh gateway per mode; ${r.plan.tracingRounds} interleaved rounds of ${r.plan.tracingSec} s)`,
    '',
    'The median ratio pairs each round with the same round of tracing off, adjacent in time, which cancels drift in the machine\'s load; it is the target\'s figure. ' +
      'CPU µs/request is the gateway process\'s CPU time per request over all rounds: the steadiest figure on a shared machine.',
    '',
    '| tracing | req/s (best) | × tracing off (best of each) | × tracing off (median of rounds) | CPU µs/request | × tracing off (CPU) | rounds req/s | p99 ms |',
    '|---|---:|---:|---:|---:|---:|---|---:|',
  );
  for (const t of r.tracing) {
    out.push(
      `| ${t.mode} | ${t.requestsPerSec} | ${f(ratio(t.requestsPerSec, off?.requestsPerSec))} | ${f(off ? pairedRatio(t, off) : undefined)} | ${f(t.cpuUsPerRequest, 0)} | ` +
        `${f(ratio(off?.cpuUsPerRequest, t.cpuUsPerRequest))} | ${t.rounds.join(', ')} | ${t.p99} |`,
    );
  }
  if (r.agentShaped !== undefined && r.agentShaped.length > 0) {
    out.push(
      '',
      `## Agent-shaped bodies (${r.plan.connections} connections, non-streaming)`,
      '',
      'What a coding agent sends every turn, generated by the bench: Anthropic, a Claude-Code-like /v1/messages (long system prompt, 18 tools, 24 tool calls with file contents); OpenAI, a tool-calling chat completion.',
      '',
      '| format | target | body KB | req/s (best) | CPU µs/request | × floor (CPU) | p99 ms |',
      '|---|---|---:|---:|---:|---:|---:|',
    );
    for (const t of r.agentShaped) {
      const floorRow = r.agentShaped.find((x) => x.format === t.format && x.target === TARGET_NAMES.floor);
      out.push(`| ${t.format} | ${t.target} | ${f(t.bodyBytes / 1024, 0)} | ${t.requestsPerSec} | ${f(t.cpuUsPerRequest, 0)} | ${f(ratio(t.cpuUsPerRequest, floorRow?.cpuUsPerRequest))} | ${t.p99} |`);
    }
  }
  if (r.journal !== undefined) {
    out.push(
      '',
      `## Journal cost (OpenAI format, ${r.plan.connections} connections, one gateway process with its journal switched every ${r.journal.sliceMs} ms of one continuous load)`,
      '',
      'On: every settlement is committed to PostgreSQL by the journal writer (batched, off the response path); off: Redis alone. The writer commits and trims only in "on" slices, so none of their work falls in an "off" slice. One process runs both modes because fresh processes of the same code differ by up to 15% in CPU per request, and short slices in pairs whose order alternates follow this machine\'s drift in speed, which rounds of seconds with fresh connections did not. "Shared": every process (load generator, simulator, Redis, PostgreSQL, gateway) on every core, so PostgreSQL\'s CPU and its commit bursts come out of the gateway\'s throughput. "Own core": the gateway alone on core 0 and the rest on the others, as a gateway pod has its own CPU and PostgreSQL its own machine in production; the issue 12 target reads this one where the machine has two cores or more.',
      '',
      '| cores | journal | req/s | × off (median of pairs) | pairs | pairs\' quartiles | × off (totals) | gateway CPU µs/request | gateway busy | PostgreSQL CPU µs/request |',
      '|---|---|---:|---:|---:|---|---:|---:|---:|---:|',
    );
    for (const [cores, cost] of [['shared', r.journal], ['own core', r.journalOwnCore]] as const) {
      for (const t of cost?.modes ?? []) {
        const on = t.mode === 'on' && cost !== undefined;
        out.push(
          `| ${cores} | ${t.mode} | ${t.requestsPerSec} | ${on ? f(cost.ratio) : ''} | ${on ? cost.pairs : ''} | ${on ? cost.quartiles.map((q) => f(q)).join(', ') : ''} | ${on ? f(cost.totalsRatio) : ''} | ${t.gatewayCpuUsPerRequest} | ${f(t.gatewayBusy)} | ${t.pgCpuUsPerRequest} |`,
        );
      }
    }
  }
  out.push('', '## Targets (issue 13 for the request path, issue 12 for the journal, the rest from earlier issues)', '', '| target | measured | status |', '|---|---|---|');
  for (const t of r.targets) out.push(`| ${t.target} | ${t.measured} | ${t.status} |`);
  out.push('');
  return out.join('\n');
}
