// The benchmark: `npm run bench` (full, under 5 minutes) or `npm run bench -- --smoke` (seconds; fails on
// any error, asserts no timings). Starts Redis, the instant simulator, the floor proxy and Tollgate (each
// target in its own process), drives them on loopback and writes bench/results/latest.{md,json}.
import { Redis } from 'ioredis';
import { mkdirSync, writeFileSync } from 'node:fs';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { commandDelta, ledgerPairs, redisCommandCount } from './ledger.js';
import { directShape, requestShape, sequentialLatency, streamLatency, throughput, type BenchFormat } from './load.js';
import { memoryBench } from './memory.js';
import { renderMarkdown, type BenchResults, type TargetRow } from './report.js';
import { startTarget, type Target } from './targets.js';

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');
const streamsFlag = args.indexOf('--streams');
const plan = {
  mode: smoke ? 'smoke' : 'full',
  durationSec: smoke ? 1 : 10,
  connections: 50,
  sequential: smoke ? 100 : 2000,
  streams: smoke ? 10 : 100,
  memoryStreams: streamsFlag > 0 ? Number(args[streamsFlag + 1]) : smoke ? 50 : 1000,
  ledgerMs: smoke ? 500 : 5000,
  countedRequests: smoke ? 50 : 1000,
} as const;
const FORMATS: BenchFormat[] = ['openai', 'anthropic'];

const log = (m: string): void => {
  process.stderr.write(`bench: ${m}\n`);
};

async function main(): Promise<BenchResults> {
  const redis = await startRedisServer();
  const started: Target[] = [];
  const start = async (...a: Parameters<typeof startTarget>): Promise<Target> => {
    const t = await startTarget(...a);
    started.push(t);
    return t;
  };
  try {
    const sim = await start({ role: 'simulator' });
    const floor = await start({ role: 'floor', upstream: sim.url });
    const gw = await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'benchgw', tracing: 'off' });
    if (args.includes('--peer')) log('the Portkey peer is not wired in yet; reporting "peer unavailable"');
    const rows: TargetRow[] = [];
    for (const format of FORMATS) {
      const direct = directShape(requestShape(format, undefined));
      const viaFloor = requestShape(format, undefined);
      const viaGw = requestShape(format, gw.key);
      const targets: [string, string, typeof direct][] = [
        ['direct (simulator)', sim.url, direct],
        ['floor proxy', floor.url, viaFloor],
        ['tollgate', gw.url, viaGw],
      ];
      for (const [name, url, shape] of targets) {
        log(`${format}: ${name}`);
        const tp = await throughput(url, shape, plan.connections, plan.durationSec);
        const seq = await sequentialLatency(url, shape, plan.sequential);
        rows.push({ format, target: name, throughput: tp, sequential: seq });
      }
    }

    log('streaming (paced simulator)');
    const paced = await start({ role: 'simulator', firstTokenDelayMs: 5, tokenDelayMs: 2, replyTokens: 32 });
    const pacedFloor = await start({ role: 'floor', upstream: paced.url });
    const pacedGw = await start({ role: 'gateway', redisUrl: redis.url, upstream: paced.url, namespace: 'benchstream', tracing: 'off' });
    const streaming = [];
    for (const format of FORMATS) {
      for (const [name, url, shape] of [
        ['direct (simulator)', paced.url, directShape(requestShape(format, undefined, true))],
        ['floor proxy', pacedFloor.url, requestShape(format, undefined, true)],
        ['tollgate', pacedGw.url, requestShape(format, pacedGw.key, true)],
      ] as const) {
        streaming.push({ format, target: name, ...(await streamLatency(url, shape, format, plan.streams)) });
      }
    }

    log('tracing cost');
    const tracing = [];
    for (const mode of ['off', 'sampled-0', 'sampled-100'] as const) {
      const t = mode === 'off' ? gw : await start({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: `benchtr${mode}`, tracing: mode });
      const tp = await throughput(t.url, requestShape('openai', t.key), plan.connections, plan.durationSec);
      tracing.push({ mode, ...tp });
      if (t !== gw) await t.stop();
    }

    log('redis commands per request');
    const counter = new Redis(redis.url);
    const perRequest: Record<string, { total: number; byCommand: Record<string, number> }> = {};
    for (const format of FORMATS) {
      const before = await redisCommandCount(counter);
      // A fresh key-cache window is part of the common path, so the count includes its amortized lookups.
      const seq = await sequentialLatency(gw.url, requestShape(format, gw.key), plan.countedRequests);
      if (seq.non2xx > 0) throw new Error(`${seq.non2xx} non-2xx responses while counting Redis commands`);
      const after = await redisCommandCount(counter);
      perRequest[format] = {
        total: Math.round(((after.total - before.total) / plan.countedRequests) * 100) / 100,
        byCommand: commandDelta(before.byCommand, after.byCommand, plan.countedRequests),
      };
    }
    await counter.quit();

    log('ledger micro-benchmark');
    const ledger = await ledgerPairs(redis.url, plan.ledgerMs);

    for (const t of started.splice(0)) await t.stop();
    log(`memory: ${plan.memoryStreams} open streams`);
    const memory = await memoryBench(redis.url, plan.memoryStreams);

    return {
      mode: plan.mode,
      date: new Date().toISOString(),
      node: process.version,
      plan,
      peer: 'peer unavailable (not run; pass --peer)',
      rows,
      streaming,
      tracing,
      redisPerRequest: perRequest,
      ledger,
      memory,
    };
  } finally {
    for (const t of started) await t.stop();
    await redis.stop();
  }
}

const results = await main();
const errors = [
  ...results.rows.flatMap((r) => (r.throughput.non2xx + r.throughput.errors + r.sequential.non2xx > 0 ? [`${r.format} ${r.target}`] : [])),
  ...results.streaming.flatMap((s) => (s.non2xx > 0 ? [`stream ${s.format} ${s.target}`] : [])),
  ...results.tracing.flatMap((t) => (t.non2xx + t.errors > 0 ? [`tracing ${t.mode}`] : [])),
  ...(results.memory.opened === results.memory.streams ? [] : ['memory streams']),
];
const dir = new URL('./results/', import.meta.url).pathname;
mkdirSync(dir, { recursive: true });
writeFileSync(`${dir}latest.json`, JSON.stringify({ ...results, errors }, null, 2));
writeFileSync(`${dir}latest.md`, renderMarkdown(results));
process.stdout.write(renderMarkdown(results));
if (errors.length > 0) {
  process.stderr.write(`bench: errors in ${errors.join(', ')}\n`);
  process.exit(1);
}
process.exit(0);
