// Renders the benchmark results as Markdown tables, with each target's ratio to the floor.
import type { LedgerResult } from './ledger.js';
import type { BenchFormat, LatencyResult, StreamResult, ThroughputResult } from './load.js';
import type { MemoryResult } from './memory.js';

export interface TargetRow {
  format: BenchFormat;
  target: string;
  throughput: ThroughputResult;
  sequential: LatencyResult;
}

export interface BenchResults {
  mode: string;
  date: string;
  node: string;
  plan: Record<string, unknown>;
  peer: string;
  rows: TargetRow[];
  streaming: (StreamResult & { format: BenchFormat; target: string })[];
  tracing: (ThroughputResult & { mode: string })[];
  redisPerRequest: Record<string, { total: number; byCommand: Record<string, number> }>;
  ledger: LedgerResult;
  memory: MemoryResult;
}

const f = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

export function renderMarkdown(r: BenchResults): string {
  const out: string[] = [`# Tollgate benchmark (${r.mode}, ${r.date}, Node ${r.node})`, '', `Peer: ${r.peer}`, ''];
  out.push('## Non-streaming: 50 connections (autocannon) and 1 connection (sequential)', '');
  out.push('| format | target | req/s | × floor | p50 ms | p90 ms | p99 ms | 1-conn p50 ms | 1-conn p99 ms | added p50 ms | added p99 ms |');
  out.push('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const row of r.rows) {
    const floor = r.rows.find((x) => x.format === row.format && x.target === 'floor proxy');
    const direct = r.rows.find((x) => x.format === row.format && x.target.startsWith('direct'));
    const t = row.throughput;
    const s = row.sequential;
    const isDirect = row === direct;
    out.push(
      `| ${row.format} | ${row.target} | ${t.requestsPerSec} | ${floor ? f(t.requestsPerSec / floor.throughput.requestsPerSec) : 'n/a'} | ${t.p50} | ${t.p90} | ${t.p99} | ${f(s.p50, 3)} | ${f(s.p99, 3)} | ${isDirect || !direct ? '–' : f(s.p50 - direct.sequential.p50, 3)} | ${isDirect || !direct ? '–' : f(s.p99 - direct.sequential.p99, 3)} |`,
    );
  }
  out.push('', '## Streaming (paced simulator: first token after 5 ms, then one every 2 ms; sequential streams)', '');
  out.push('| format | target | TTFT p50 ms | TTFT p99 ms | added TTFT p50 ms | mean inter-chunk ms | added inter-chunk ms |');
  out.push('|---|---|---:|---:|---:|---:|---:|');
  for (const s of r.streaming) {
    const direct = r.streaming.find((x) => x.format === s.format && x.target.startsWith('direct'));
    const isDirect = s === direct;
    out.push(
      `| ${s.format} | ${s.target} | ${f(s.ttftP50, 3)} | ${f(s.ttftP99, 3)} | ${isDirect || !direct ? '–' : f(s.ttftP50 - direct.ttftP50, 3)} | ${f(s.interChunkMean, 3)} | ${isDirect || !direct ? '–' : f(s.interChunkMean - direct.interChunkMean, 3)} |`,
    );
  }
  const off = r.tracing.find((t) => t.mode === 'off');
  out.push('', '## Tracing cost (OpenAI format, 50 connections)', '', '| tracing | req/s | × tracing off | p99 ms |', '|---|---:|---:|---:|');
  for (const t of r.tracing) out.push(`| ${t.mode} | ${t.requestsPerSec} | ${off ? f(t.requestsPerSec / off.requestsPerSec) : 'n/a'} | ${t.p99} |`);
  out.push('', '## Redis commands per gateway request (INFO commandstats, sequential requests)', '', '| format | commands/request | by command |', '|---|---:|---|');
  for (const [format, c] of Object.entries(r.redisPerRequest)) {
    out.push(`| ${format} | ${c.total} | ${Object.entries(c.byCommand).map(([k, v]) => `${k} ${v}`).join(', ')} |`);
  }
  out.push('', '## Ledger micro-benchmark', '', `${r.ledger.pairsPerSec} reserve+settle pairs/s (${r.ledger.pairs} pairs, ${r.ledger.concurrency} in flight).`);
  const m = r.memory;
  out.push(
    '',
    '## Memory: concurrent open streams through the gateway (gateway process alone)',
    '',
    '| streams | opened | idle RSS MB | loaded RSS MB | RSS per stream KB | heap per stream KB | loaded heap MB |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    `| ${m.streams} | ${m.opened} | ${m.idleRssMb} | ${m.loadedRssMb} | ${m.rssPerStreamKb} | ${m.heapPerStreamKb} | ${m.loadedHeapMb} |`,
    '',
  );
  return out.join('\n');
}
