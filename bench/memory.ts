// Memory benchmark: N concurrent slow streams held open through the gateway (in its own process),
// reporting its RSS (from /proc) and heap (from inside, after a GC) before and with the streams open.
// Also runnable alone: `tsx bench/memory.ts --streams 10000`.
import { Agent, request } from 'undici';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { requestShape } from './load.js';
import { memoryModel } from './models.js';
import { procStats, startTarget, type Target, type TargetEntry } from './targets.js';

export interface MemoryOptions {
  streams: number;
  /** Streams opened at once; the next batch starts when each of these has its first byte. */
  batch?: number;
  /** Longest a stream may take to deliver its first byte before it counts as failed. */
  perStreamTimeoutMs?: number;
  /** Longest the opening phase may take in all; what is open by then is measured. */
  totalTimeoutMs?: number;
  log?: (m: string) => void;
  /** What the gateway and simulator processes run (default: the sources under tsx). */
  entry?: TargetEntry;
}

export interface MemorySample {
  rssMb: number;
  heapUsedMb: number;
  externalMb: number;
}

export interface MemoryResult {
  /** Streams asked for (`--streams`). */
  requested: number;
  /** Streams attempted: the request, or less when file descriptor limits allow fewer (see limitedBy). */
  streams: number;
  opened: number;
  failed: number;
  limitedBy: string | undefined;
  /** Simulator ports the streams were spread over (see below for why). */
  origins: number;
  openSeconds: number;
  baseline: MemorySample;
  loaded: MemorySample;
  peakRssMb: number;
  rssPerStreamKb: number;
  heapPerStreamKb: number;
  /** baseline RSS + N × RSS per stream, at N = 10,000 (equal to the measurement when 10,000 opened). */
  projectedRssMbAt10k: number;
}

const mb = (b: number): number => Math.round((b / 1048576) * 10) / 10;
const kb = (b: number): number => Math.round((b / 1024) * 10) / 10;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The simulator listens on one port per this many streams, each port a model of its own. The gateway's
 * upstream pools are unbounded by default (TOLLGATE_UPSTREAM_MAX_CONNECTIONS); when they were capped at
 * 512 per origin, this spread was what let the step pass 512 streams, and it is kept so the memory step
 * also exercises several pools.
 */
const STREAMS_PER_ORIGIN = 500;
/** File descriptors kept free in each process for everything that is not a stream socket. */
const FD_HEADROOM = 64;

/**
 * A GC frees V8 pages a little later, on a background task, so RSS is read until two readings agree
 * (within 1 MB) after a GC each; reading right after one GC showed garbage as resident memory.
 */
async function sample(gw: Target): Promise<MemorySample & { peak: number; heapUsed: number; rss: number }> {
  let inside = await gw.memory();
  let rss = procStats(gw.pid).rss;
  for (let i = 0; i < 8; i++) {
    await sleep(400);
    inside = await gw.memory();
    await sleep(400);
    const next = procStats(gw.pid).rss;
    const settled = Math.abs(next - rss) < 1048576;
    rss = next;
    if (settled) break;
  }
  return {
    rss,
    peak: procStats(gw.pid).rssPeak,
    heapUsed: inside.heapUsed,
    rssMb: mb(rss),
    heapUsedMb: mb(inside.heapUsed),
    externalMb: mb(inside.external),
  };
}

export async function memoryBench(redisUrl: string, opts: MemoryOptions): Promise<MemoryResult> {
  const log = opts.log ?? (() => undefined);
  const batch = opts.batch ?? 200;
  const perStreamTimeoutMs = opts.perStreamTimeoutMs ?? 20_000;
  const totalTimeoutMs = opts.totalTimeoutMs ?? 120_000;
  const origins = Math.max(1, Math.ceil(opts.streams / STREAMS_PER_ORIGIN));
  // The first token comes at once (the stream is live end to end), the next ones every 30 s: slow
  // streams that stay open for the whole measurement and cost the simulator one timer each. 30 s is
  // well inside the gateway's 120 s idle timeout for upstreams.
  const sim = await startTarget({ role: 'simulator', firstTokenDelayMs: 0, tokenDelayMs: 30_000, replyTokens: 64, listeners: origins }, [], opts.entry);
  let gw: Target | undefined;
  const agent = new Agent({ connections: null, pipelining: 1, connectTimeout: perStreamTimeoutMs, headersTimeout: 0, bodyTimeout: 0 });
  const open: AbortController[] = [];
  try {
    gw = await startTarget({
      role: 'gateway',
      redisUrl,
      upstream: sim.url,
      namespace: `benchmem${Date.now()}`,
      tracing: 'off',
      spread: sim.urls,
    }, [], opts.entry);
    const target = gw;
    const base = requestShape('openai', target.key, true);
    const bodies = sim.urls.map((_, i) => {
      const body = JSON.parse(base.body) as { model: string };
      body.model = memoryModel(i);
      return JSON.stringify(body);
    });

    /** Resolves true once the stream's first byte is in, false if it failed or timed out. */
    const openStream = async (i: number): Promise<boolean> => {
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(new Error('no first byte in time')), perStreamTimeoutMs);
      try {
        const res = await request(target.url + base.path, {
          method: 'POST',
          headers: base.headers,
          body: bodies[i % bodies.length],
          dispatcher: agent,
          signal: ac.signal,
        });
        res.body.on('error', () => undefined);
        if (res.statusCode !== 200) {
          res.body.destroy();
          return false;
        }
        await new Promise<void>((resolve, reject) => {
          res.body.once('data', () => resolve());
          res.body.once('end', () => reject(new Error('stream ended early')));
          res.body.once('error', reject);
        });
        res.body.resume();
        open.push(ac);
        return true;
      } catch {
        ac.abort();
        return false;
      } finally {
        clearTimeout(timer);
      }
    };

    // Warm up (streams opened and cancelled) so the baseline includes loaded code and pools.
    const warm = await Promise.all(Array.from({ length: Math.min(20, opts.streams) }, (_, i) => openStream(i)));
    if (!warm.every(Boolean)) throw new Error('the gateway refused the warm-up streams');
    for (const ac of open.splice(0)) ac.abort();
    await sleep(1000);
    const baseline = await sample(target);

    // Each open stream holds two descriptors in the gateway (client and upstream sockets) and one in
    // this process and the simulator; a process cannot raise its hard limit without privileges.
    const gwProc = procStats(target.pid);
    const self = procStats('self');
    const simProc = procStats(sim.pid);
    const fits = {
      gateway: Math.floor((gwProc.fdLimit - gwProc.openFds - FD_HEADROOM) / 2),
      'load generator': self.fdLimit - self.openFds - FD_HEADROOM,
      simulator: simProc.fdLimit - simProc.openFds - FD_HEADROOM,
    };
    let streams = opts.streams;
    let limitedBy: string | undefined;
    for (const [who, n] of Object.entries(fits)) {
      if (n < streams) {
        streams = n;
        const limit = who === 'gateway' ? gwProc.fdLimit : who === 'simulator' ? simProc.fdLimit : self.fdLimit;
        limitedBy = `the ${who} process's open-file limit (${limit}${who === 'gateway' ? ', 2 per stream' : ''}) fits ${n} streams`;
      }
    }
    if (limitedBy) log(`memory: ${limitedBy}; opening ${streams} of ${opts.streams}`);

    const started = performance.now();
    let opened = 0;
    let failed = 0;
    for (let i = 0; i < streams; i += batch) {
      if (performance.now() - started > totalTimeoutMs) {
        log(`memory: time bound of ${totalTimeoutMs / 1000} s reached with ${opened} streams open`);
        break;
      }
      const results = await Promise.all(Array.from({ length: Math.min(batch, streams - i) }, (_, j) => openStream(i + j)));
      const ok = results.filter(Boolean).length;
      opened += ok;
      failed += results.length - ok;
      // A batch that mostly fails means something is broken; waiting out the rest would only stall.
      if (ok < results.length / 2) {
        log(`memory: ${results.length - ok} of a batch of ${results.length} streams failed; stopping`);
        break;
      }
    }
    const openSeconds = (performance.now() - started) / 1000;
    await sleep(1500);
    const loaded = await sample(target);
    const rssPerStream = opened > 0 ? (loaded.rss - baseline.rss) / opened : NaN;
    const heapPerStream = opened > 0 ? (loaded.heapUsed - baseline.heapUsed) / opened : NaN;
    return {
      requested: opts.streams,
      streams,
      opened,
      failed,
      limitedBy,
      origins,
      openSeconds: Math.round(openSeconds * 10) / 10,
      baseline: { rssMb: baseline.rssMb, heapUsedMb: baseline.heapUsedMb, externalMb: baseline.externalMb },
      loaded: { rssMb: loaded.rssMb, heapUsedMb: loaded.heapUsedMb, externalMb: loaded.externalMb },
      peakRssMb: mb(loaded.peak),
      rssPerStreamKb: kb(rssPerStream),
      heapPerStreamKb: kb(heapPerStream),
      projectedRssMbAt10k: mb(baseline.rss + rssPerStream * 10_000),
    };
  } finally {
    for (const ac of open) ac.abort();
    await agent.destroy().catch(() => undefined);
    await gw?.stop();
    await sim.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf('--streams');
  const streams = i > 0 ? Number(process.argv[i + 1]) : 1000;
  const redis = await startRedisServer();
  try {
    const log = (m: string): void => void process.stderr.write(`${m}\n`);
    console.log(JSON.stringify(await memoryBench(redis.url, { streams, totalTimeoutMs: 240_000, log }), null, 2));
  } finally {
    await redis.stop();
  }
  process.exit(0);
}
