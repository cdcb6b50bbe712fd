// Memory benchmark: N concurrent slow streams held open through the gateway (in its own process),
// reporting its RSS and heap per open stream. Also runnable alone: `tsx bench/memory.ts --streams 10000`.
import { setMaxListeners } from 'node:events';
import { Agent, request } from 'undici';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { requestShape } from './load.js';
import { startTarget } from './targets.js';

export interface MemoryResult {
  streams: number;
  opened: number;
  idleRssMb: number;
  loadedRssMb: number;
  rssPerStreamKb: number;
  heapPerStreamKb: number;
  loadedHeapMb: number;
}

const mb = (b: number): number => Math.round((b / 1048576) * 10) / 10;

export async function memoryBench(redisUrl: string, streams: number): Promise<MemoryResult> {
  // Tokens every second for far longer than the measurement: every stream stays open until aborted.
  const sim = await startTarget({ role: 'simulator', firstTokenDelayMs: 0, tokenDelayMs: 1000, replyTokens: 100_000 });
  const gw = await startTarget({ role: 'gateway', redisUrl, upstream: sim.url, namespace: `benchmem${Date.now()}`, tracing: 'off' });
  const agent = new Agent({ connections: null, pipelining: 1, connectTimeout: 60_000, headersTimeout: 120_000, bodyTimeout: 0 });
  const abort = new AbortController();
  setMaxListeners(0, abort.signal);
  try {
    const shape = requestShape('openai', gw.key, true);
    let opened = 0;
    const open = async (signal: AbortSignal): Promise<void> => {
      const res = await request(gw.url + shape.path, { method: 'POST', headers: shape.headers, body: shape.body, dispatcher: agent, signal });
      if (res.statusCode !== 200) throw new Error(`stream refused with ${res.statusCode}: ${await res.body.text()}`);
      // Wait for the first chunk: the stream is then live end to end.
      await new Promise<void>((resolve, reject) => {
        res.body.once('data', () => resolve());
        res.body.once('error', reject);
      });
      opened++;
      res.body.on('error', () => undefined);
      res.body.resume();
    };
    // Warm up (streams opened and cancelled) so the idle figure includes loaded code and pools.
    const warm = new AbortController();
    setMaxListeners(0, warm.signal);
    await Promise.all(Array.from({ length: 20 }, () => open(warm.signal)));
    warm.abort();
    opened = 0;
    await new Promise((r) => setTimeout(r, 500));
    const idle = await gw.memory();
    // Open in batches so the listen backlog is never the limit.
    const batch = 500;
    for (let i = 0; i < streams; i += batch) {
      await Promise.all(Array.from({ length: Math.min(batch, streams - i) }, () => open(abort.signal)));
    }
    await new Promise((r) => setTimeout(r, 1500));
    const loaded = await gw.memory();
    return {
      streams,
      opened,
      idleRssMb: mb(idle.rss),
      loadedRssMb: mb(loaded.rss),
      loadedHeapMb: mb(loaded.heapUsed),
      rssPerStreamKb: Math.round(((loaded.rss - idle.rss) / opened / 1024) * 10) / 10,
      heapPerStreamKb: Math.round(((loaded.heapUsed - idle.heapUsed) / opened / 1024) * 10) / 10,
    };
  } finally {
    abort.abort();
    await agent.destroy().catch(() => undefined);
    await gw.stop();
    await sim.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf('--streams');
  const streams = i > 0 ? Number(process.argv[i + 1]) : 1000;
  const redis = await startRedisServer();
  try {
    console.log(JSON.stringify(await memoryBench(redis.url, streams), null, 2));
  } finally {
    await redis.stop();
  }
  process.exit(0);
}
