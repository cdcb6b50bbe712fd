// Ledger micro-benchmark: reserve+settle pairs per second straight against Redis, and the Redis
// commands a gateway request costs, counted from INFO commandstats (not guessed).
import { once } from 'node:events';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { createRedisBackend } from '../src/billing/backends.js';

export interface LedgerResult {
  pairsPerSec: number;
  pairs: number;
  concurrency: number;
}

export async function ledgerPairs(redisUrl: string, durationMs: number, concurrency = 32): Promise<LedgerResult> {
  const redis = new Redis(redisUrl, { enableAutoPipelining: true });
  const backend = createRedisBackend({ redis, namespace: `benchledger${Date.now()}` });
  try {
    const account = await backend.accounts.createAccount('ledger-bench');
    await backend.ledger.credit(account.id, 1_000_000_000_000, 'ledger-bench');
    const { record } = await backend.accounts.createKey(account.id, { name: 'ledger-bench' });
    let seq = 0;
    let pairs = 0;
    const deadline = Date.now() + durationMs;
    const worker = async (): Promise<void> => {
      while (Date.now() < deadline) {
        const requestId = `lb-${seq++}`;
        const admitted = await backend.ledger.reserve({ requestId, accountId: account.id, keyId: record.id, amount: 1_000, holdTtlMs: 60_000 });
        if (!admitted.admitted) throw new Error(`ledger bench refused: ${admitted.reason}`);
        await backend.ledger.settle({
          requestId,
          accountId: account.id,
          keyId: record.id,
          model: 'bench',
          usage: { input: 10, output: 20, cachedInput: 0, reasoning: 0 },
          cost: 700,
          status: 'completed',
          latencyMs: 1,
        });
        pairs++;
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: concurrency }, worker));
    const seconds = (performance.now() - started) / 1000;
    return { pairsPerSec: Math.round(pairs / seconds), pairs, concurrency };
  } finally {
    await redis.quit();
  }
}

export interface RedisPerRequest {
  /** Commands Redis executed per request, including those a Lua script runs (INFO commandstats). */
  total: number;
  byCommand: Record<string, number>;
  /** Commands the gateway sent per request (MONITOR, script-internal calls left out). */
  sent: number;
  sentByCommand: Record<string, number>;
  /**
   * Socket reads Redis processed per request (INFO stats total_reads_processed): each is one batch the
   * gateway sent and then waited on, so on sequential requests it counts the round trips.
   */
  roundTrips: number;
}

const perRequest = (n: number, requests: number): number => Math.round((n / requests) * 100) / 100;

/**
 * Counts what `requests` sequential gateway requests (run by `drive`) cost in Redis. Counted by Redis
 * itself, not guessed: nothing else may use this Redis meanwhile (the other targets are idle).
 */
/** `drive` may return the number of requests it made (a timed load), which then replaces `requests`. */
export async function countRedisPerRequest(redisUrl: string, requests: number, drive: () => Promise<number | void>): Promise<RedisPerRequest> {
  const counter = new Redis(redisUrl);
  const monitor = await watchCommands(redisUrl);
  try {
    await quiet(counter);
    const before = await redisCommandCount(counter);
    monitor.reset();
    const made = await drive();
    if (typeof made === 'number') requests = made;
    // The last answers reach the client before their settlements; let those land before counting.
    await new Promise((r) => setTimeout(r, 100));
    const after = await redisCommandCount(counter);
    // MONITOR lines trail the commands slightly; the last ones arrive within this.
    await new Promise((r) => setTimeout(r, 200));
    const sent = monitor.sent;
    const sentTotal = Object.values(sent).reduce((a, b) => a + b, 0);
    return {
      total: perRequest(after.total - before.total, requests),
      byCommand: commandDelta(before.byCommand, after.byCommand, requests),
      sent: perRequest(sentTotal, requests),
      sentByCommand: Object.fromEntries(Object.entries(sent).map(([k, v]) => [k, perRequest(v, requests)])),
      // The read of the second INFO is counted in its own figure; it is the counter's, not the gateway's.
      roundTrips: perRequest(after.reads - before.reads - 1, requests),
    };
  } finally {
    monitor.close();
    await counter.quit();
  }
}

/**
 * Commands clients send, from MONITOR on a plain socket. Written here rather than with ioredis's
 * monitor(): its monitor connection takes no QUIT, and a line arriving while it disconnects reaches
 * its command queue as a reply to nothing and crashes the run ("Command queue state error").
 */
async function watchCommands(redisUrl: string): Promise<{ sent: Record<string, number>; reset(): void; close(): void }> {
  const url = new URL(redisUrl);
  const socket = connect({ host: url.hostname, port: Number(url.port || 6379) });
  await once(socket, 'connect');
  let sent: Record<string, number> = {};
  let pending = '';
  // One simple-string reply per command: +<time> [<db> <source>] "<command>" "<arg>"...
  const line = /^\+\d+\.\d+ \[\d+ (\S+)\] "([^"]*)"/;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\r\n');
    pending = lines.pop() ?? '';
    for (const l of lines) {
      const m = line.exec(l);
      if (m === null) continue;
      const [, source, command] = m;
      const name = (command ?? '').toLowerCase();
      // The counter's own INFO calls and anything a script runs are not the gateway's commands.
      if (source === 'lua' || name === 'info') continue;
      sent[name] = (sent[name] ?? 0) + 1;
    }
  });
  socket.on('error', () => undefined);
  socket.write('MONITOR\r\n');
  return {
    get sent() {
      return sent;
    },
    reset() {
      sent = {};
    },
    close() {
      socket.destroy();
    },
  };
}

/**
 * Waits until Redis is idle: a gateway loaded by the step before goes on settling the requests the
 * load generator left in flight, and those settles must not count as the measured requests'.
 */
async function quiet(redis: Redis, timeoutMs = 15_000): Promise<void> {
  const processed = async (): Promise<number> => Number(/^total_commands_processed:(\d+)/m.exec(await redis.info('stats'))?.[1] ?? NaN);
  const deadline = Date.now() + timeoutMs;
  let last = await processed();
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 300));
    const now = await processed();
    // The one command between two readings is this loop's own INFO.
    if (now - last <= 1) return;
    last = now;
  }
  throw new Error(`Redis did not go idle within ${timeoutMs / 1000} s; its commands cannot be counted per request`);
}

/** Total commands Redis has executed (INFO itself excluded) and the socket reads it processed. */
export async function redisCommandCount(redis: Redis): Promise<{ total: number; byCommand: Record<string, number>; reads: number }> {
  const info = await redis.info('all');
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = m[1] as string;
    if (name === 'info') continue;
    byCommand[name] = Number(m[2]);
    total += Number(m[2]);
  }
  const reads = Number(/^total_reads_processed:(\d+)/m.exec(info)?.[1] ?? NaN);
  return { total, byCommand, reads };
}

export function commandDelta(before: Record<string, number>, after: Record<string, number>, requests: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, calls] of Object.entries(after)) {
    const d = calls - (before[name] ?? 0);
    if (d > 0) out[name] = perRequest(d, requests);
  }
  return out;
}
