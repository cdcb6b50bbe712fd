// Load generators: autocannon for throughput at many connections; a sequential undici client for
// sub-millisecond latency at one connection (autocannon's histogram has 1 ms resolution); and a
// streaming client that times the first token and the gaps between chunks.
import { createRequire } from 'node:module';
import { Client } from 'undici';
import { BENCH_MODELS } from './models.js';

export type BenchFormat = 'openai' | 'anthropic';

export interface RequestShape {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** The same small chat request in either wire format, addressed to the given key (if any). */
export function requestShape(format: BenchFormat, key: string | undefined, stream = false): RequestShape {
  const messages = [{ role: 'user', content: 'Hello! Tell me something short about benchmarks.' }];
  if (format === 'openai') {
    return {
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ model: BENCH_MODELS.openai, messages, max_tokens: 64, ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) }),
    };
  }
  return {
    path: '/v1/messages',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...(key ? { 'x-api-key': key } : {}) },
    body: JSON.stringify({ model: BENCH_MODELS.anthropic, messages, max_tokens: 64, ...(stream ? { stream: true } : {}) }),
  };
}

/** The simulator takes the upstream model name; the floor and Tollgate take the catalog id. */
export function directShape(shape: RequestShape): RequestShape {
  const body = JSON.parse(shape.body) as { model: string };
  body.model = `sim-${body.model}`;
  return { ...shape, body: JSON.stringify(body) };
}

export interface ThroughputResult {
  requestsPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
}

interface AutocannonResult {
  requests: { total: number };
  duration: number;
  latency: { p50: number; p90: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
/** autocannon's run: an emitter of each response that is also a promise of the whole run's result. */
interface AutocannonRun extends PromiseLike<AutocannonResult> {
  on(event: 'response', listener: (client: unknown, statusCode: number) => void): void;
  on(event: 'reqError', listener: () => void): void;
  stop(): void;
}
type Autocannon = (opts: Record<string, unknown>) => AutocannonRun;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/** As many requests as `connections` can carry for `durationSec`, or at most `rate` per second when given. */
export async function throughput(url: string, shape: RequestShape, connections: number, durationSec: number, rate?: number): Promise<ThroughputResult> {
  const r = await autocannon({
    url: url + shape.path,
    method: 'POST',
    headers: shape.headers,
    body: shape.body,
    connections,
    duration: durationSec,
    ...(rate === undefined ? {} : { overallRate: rate }),
  });
  return {
    requestsPerSec: Math.round(r.requests.total / r.duration),
    p50: r.latency.p50,
    p90: r.latency.p90,
    p99: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  };
}

/** A load that runs until stopped; its responses are counted as they arrive. */
export interface RunningLoad {
  /** Responses so far (any status). */
  responses(): number;
  /** Responses that were not 2xx, and errors, so far. */
  failures(): number;
  stop(): Promise<void>;
}

/** `connections` clients sending `shape` back to back, for at most `maxSec` or until stopped. */
export function startLoad(url: string, shape: RequestShape, connections: number, maxSec: number): RunningLoad {
  let responses = 0;
  let failures = 0;
  const run = autocannon({ url: url + shape.path, method: 'POST', headers: shape.headers, body: shape.body, connections, duration: maxSec });
  run.on('response', (_client, statusCode) => {
    responses++;
    if (statusCode < 200 || statusCode > 299) failures++;
  });
  run.on('reqError', () => failures++);
  return {
    responses: () => responses,
    failures: () => failures,
    stop: async () => {
      run.stop();
      await run;
    },
  };
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx] as number;
}

export interface LatencyResult {
  p50: number;
  p99: number;
  count: number;
  non2xx: number;
}

/** `count` requests one after another on one keep-alive connection; latencies in ms (µs resolution). */
export async function sequentialLatency(url: string, shape: RequestShape, count: number): Promise<LatencyResult> {
  const client = new Client(url, { pipelining: 1 });
  const samples: number[] = [];
  let non2xx = 0;
  try {
    for (let i = 0; i < count; i++) {
      const t0 = process.hrtime.bigint();
      const res = await client.request({ method: 'POST', path: shape.path, headers: shape.headers, body: shape.body });
      await res.body.arrayBuffer();
      samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (res.statusCode < 200 || res.statusCode > 299) non2xx++;
    }
  } finally {
    await client.close();
  }
  // The first tenth warms connections and JIT; it is not reported.
  const kept = samples.slice(Math.floor(count / 10)).sort((a, b) => a - b);
  return { p50: percentile(kept, 50), p99: percentile(kept, 99), count: kept.length, non2xx };
}

export interface StreamResult {
  /** Time to first token (first SSE chunk carrying text), ms. */
  ttftP50: number;
  ttftP99: number;
  /** Mean gap between consecutive chunks after the first, ms. */
  interChunkMean: number;
  streams: number;
  non2xx: number;
}

/**
 * A chunk that carries text. OpenAI's first chunk has the role and an empty content, sent before the
 * first token: matching `"content":"` alone timed the first byte, not the first token.
 */
const TOKEN_MARK: Record<BenchFormat, RegExp> = {
  openai: /"content":"[^"]/,
  anthropic: /"text_delta"/,
};

/** `count` streams one after another; the simulator paces tokens, so gaps show the gateway's overhead. */
export async function streamLatency(url: string, shape: RequestShape, format: BenchFormat, count: number): Promise<StreamResult> {
  const client = new Client(url, { pipelining: 1 });
  const ttfts: number[] = [];
  const gaps: number[] = [];
  let non2xx = 0;
  const mark = TOKEN_MARK[format];
  try {
    for (let i = 0; i < count; i++) {
      const t0 = process.hrtime.bigint();
      const res = await client.request({ method: 'POST', path: shape.path, headers: shape.headers, body: shape.body });
      if (res.statusCode !== 200) non2xx++;
      let first: bigint | undefined;
      let last: bigint | undefined;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        const now = process.hrtime.bigint();
        if (first === undefined) {
          if (mark.test(chunk.toString('latin1'))) {
            first = now;
            ttfts.push(Number(now - t0) / 1e6);
          }
        } else if (last !== undefined) {
          gaps.push(Number(now - last) / 1e6);
        }
        if (first !== undefined) last = now;
      }
    }
  } finally {
    await client.close();
  }
  const kept = ttfts.slice(Math.floor(count / 10)).sort((a, b) => a - b);
  const mean = gaps.length === 0 ? NaN : gaps.reduce((a, b) => a + b, 0) / gaps.length;
  return { ttftP50: percentile(kept, 50), ttftP99: percentile(kept, 99), interChunkMean: mean, streams: count, non2xx };
}

/** Deterministic filler prose of about `bytes` bytes (a file's contents, a long instruction). */
function prose(seed: number, bytes: number): string {
  const words = ['the', 'gateway', 'reserves', 'worst', 'case', 'before', 'upstream', 'call', 'settles', 'exactly', 'once', 'key', 'cap', 'stream', 'token', 'function', 'return', 'const', 'value', 'await'];
  const out: string[] = [];
  let n = seed;
  let size = 0;
  while (size < bytes) {
    n = (n * 1103515245 + 12345) >>> 0;
    const w = words[n % words.length] as string;
    out.push(w);
    size += w.length + 1;
  }
  return out.join(' ');
}

function toolSchemas(count: number): Array<{ name: string; description: string; parameters: Record<string, unknown> }> {
  return Array.from({ length: count }, (_, i) => ({
    name: `tool_${i}`,
    description: prose(i, 600),
    parameters: {
      type: 'object',
      properties: { path: { type: 'string', description: prose(i + 100, 200) }, limit: { type: 'integer' }, mode: { type: 'string', enum: ['read', 'write', 'list'] } },
      required: ['path'],
    },
  }));
}

/**
 * An agent-shaped request, generated here: what a coding agent sends every turn. Anthropic: a
 * Claude-Code-like /v1/messages of about 300 KB (long system prompt, ~18 tools, a history of tool
 * calls whose results are file contents). OpenAI: a ~100 KB tool-calling chat completion.
 */
export function agentShape(format: BenchFormat, key: string | undefined): RequestShape {
  if (format === 'anthropic') {
    const tools = toolSchemas(18).map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
    const messages: unknown[] = [{ role: 'user', content: [{ type: 'text', text: 'Fix the failing test in the billing module.' }] }];
    for (let turn = 0; turn < 24; turn++) {
      messages.push({ role: 'assistant', content: [{ type: 'text', text: prose(turn, 300) }, { type: 'tool_use', id: `toolu_${turn}`, name: `tool_${turn % 18}`, input: { path: `src/file_${turn}.ts` } }] });
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${turn}`, content: prose(turn + 1000, 10_300) }] });
    }
    return {
      path: '/v1/messages',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...(key ? { 'x-api-key': key } : {}) },
      body: JSON.stringify({ model: BENCH_MODELS.anthropic, max_tokens: 64, system: [{ type: 'text', text: prose(7, 24_000) }], tools, messages }),
    };
  }
  const tools = toolSchemas(12).map((t) => ({ type: 'function', function: t }));
  const messages: unknown[] = [{ role: 'system', content: prose(3, 8_000) }, { role: 'user', content: 'Refactor the settlement queue.' }];
  for (let turn = 0; turn < 8; turn++) {
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${turn}`, type: 'function', function: { name: `tool_${turn % 12}`, arguments: JSON.stringify({ path: `src/f${turn}.ts` }) } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${turn}`, content: prose(turn + 500, 9_700) });
  }
  return {
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ model: BENCH_MODELS.openai, max_tokens: 64, tools, messages }),
  };
}
