// Redis's CPU and commands per reserve+settle pair (issue 41), for two builds of the ledger in one Redis:
// OLD_SRC names a copy of an older tree (e.g. `git archive main src`), compared with this tree's.
// Rounds are interleaved (old, new, old, new, ...) so load from elsewhere on the machine falls on both;
// Redis's own CPU (INFO used_cpu_user + used_cpu_sys) is counted, not wall time.
// Usage: OLD_SRC=/tmp/tollgate-old REDIS_URL=redis://127.0.0.1:PORT tsx bench/redis-cpu.ts [pairs] [rounds]
import { Redis } from 'ioredis';
import type { HotBackend } from '../src/billing/backends.js';

type Create = (opts: { redis: Redis; namespace: string }) => HotBackend;
interface Variant {
  name: string;
  create: Create;
}
interface Case {
  name: string;
  team: boolean;
}

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const pairs = Number(process.argv[2] ?? 3000);
const rounds = Number(process.argv[3] ?? 5);
const concurrency = 16;

async function cpuAndCalls(r: Redis): Promise<{ cpu: number; user: number; calls: number }> {
  const info = await r.info('all');
  const user = Number(/^used_cpu_user:([\d.]+)/m.exec(info)?.[1]);
  const cpu = user + Number(/^used_cpu_sys:([\d.]+)/m.exec(info)?.[1]);
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (m[1] !== 'info') calls += Number(m[2]);
  return { cpu, user, calls };
}

async function setUp(v: Variant, c: Case, redis: Redis, tag: string) {
  const ns = `cpu${tag}`;
  const backend = v.create({ redis, namespace: ns });
  const account = await backend.accounts.createAccount(`cpu-${tag}`);
  await backend.ledger.credit(account.id, 1_000_000_000_000, `cpu-${tag}`);
  const { record } = await backend.accounts.createKey(account.id, { name: 'cpu' });
  const scope = c.team ? { teamId: 'T1', memberId: 'U1' } : {};
  if (c.team) {
    // Budgets far above what the run spends: the common path, admitted every time.
    await redis.hset(`${ns}:{${account.id}}:team:T1`, 'name', 'team one', 'monthlyBudget', '900000000000');
    await redis.hset(`${ns}:{${account.id}}:member:U1`, 'monthlyBudget', '900000000000');
  }
  let seq = 0;
  const pair = async (): Promise<void> => {
    const requestId = `cpu-${tag}-${seq++}`;
    const admitted = await backend.ledger.reserve({ requestId, accountId: account.id, keyId: record.id, amount: 1_000, holdTtlMs: 60_000, rateLimitTokens: 500, ...scope });
    if (!admitted.admitted) throw new Error(`refused: ${admitted.reason}`);
    const settled = await backend.ledger.settle({
      requestId, accountId: account.id, keyId: record.id, model: 'bench',
      usage: { input: 10, output: 20, cachedInput: 0, reasoning: 0 }, cost: 700, status: 'completed', latencyMs: 1, ...scope,
    });
    if (settled.charged !== 700) throw new Error(`charged ${settled.charged}`);
  };
  return { pair };
}

async function run(pair: () => Promise<void>, n: number): Promise<void> {
  let left = n;
  const worker = async (): Promise<void> => {
    while (left-- > 0) await pair();
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? (s[(s.length - 1) / 2] as number) : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
};

async function main(): Promise<void> {
  const oldSrc = process.env.OLD_SRC;
  if (!oldSrc) throw new Error('OLD_SRC: a copy of the older tree');
  const oldMod = (await import(`${oldSrc}/src/billing/backends.ts`)) as { createRedisBackend: Create };
  const newMod = (await import('../src/billing/backends.js')) as { createRedisBackend: Create };
  // ONLY=old or ONLY=new runs one of them (to profile it alone).
  const variants: Variant[] = [
    { name: 'old', create: oldMod.createRedisBackend },
    { name: 'new', create: newMod.createRedisBackend },
  ].filter((v) => process.env.ONLY === undefined || v.name === process.env.ONLY);
  const cases: Case[] = [
    { name: 'key, no team', team: false },
    { name: 'key in a team, member budget', team: true },
  ];
  const redis = new Redis(url, { enableAutoPipelining: true });
  const counter = new Redis(url);
  try {
    for (const c of cases) {
      const drivers = await Promise.all(variants.map((v) => setUp(v, c, redis, `${v.name}${c.team ? 't' : 'k'}${Date.now()}`)));
      for (const d of drivers) await run(d.pair, 300); // warm up: scripts cached, hashes made
      const cpu: number[][] = variants.map(() => []);
      const calls: number[][] = variants.map(() => []);
      const user: number[][] = variants.map(() => []);
      for (let r = 0; r < rounds; r++) {
        for (const [i, d] of drivers.entries()) {
          const before = await cpuAndCalls(counter);
          await run(d.pair, pairs);
          const after = await cpuAndCalls(counter);
          // The counter's own INFO is left out of the calls; its CPU is a few µs over thousands of pairs.
          cpu[i]?.push(((after.cpu - before.cpu) * 1e6) / pairs);
          user[i]?.push(((after.user - before.user) * 1e6) / pairs);
          calls[i]?.push((after.calls - before.calls) / pairs);
        }
      }
      for (const [i, v] of variants.entries()) {
        const xs = cpu[i] ?? [];
        console.log(
          `${c.name.padEnd(30)} ${v.name}: ${median(xs).toFixed(1)} µs/pair (min ${Math.min(...xs).toFixed(1)}, max ${Math.max(...xs).toFixed(1)}; user ${median(user[i] ?? []).toFixed(1)}), ${median(calls[i] ?? []).toFixed(2)} commands/pair; rounds ${xs.map((x) => x.toFixed(0)).join(' ')}`,
        );
      }
    }
  } finally {
    await redis.quit();
    await counter.quit();
  }
}

await main();
