// Ledger micro-benchmark: reserve+settle pairs per second straight against Redis, and the Redis
// commands a gateway request costs, counted from INFO commandstats (not guessed).
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

/** Total commands Redis has executed, INFO itself excluded. */
export async function redisCommandCount(redis: Redis): Promise<{ total: number; byCommand: Record<string, number> }> {
  const info = await redis.info('commandstats');
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = m[1] as string;
    if (name === 'info') continue;
    byCommand[name] = Number(m[2]);
    total += Number(m[2]);
  }
  return { total, byCommand };
}

export function commandDelta(before: Record<string, number>, after: Record<string, number>, requests: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, calls] of Object.entries(after)) {
    const d = calls - (before[name] ?? 0);
    if (d > 0) out[name] = Math.round((d / requests) * 100) / 100;
  }
  return out;
}
