// What a request costs Redis: the reserve script and the settle script, nothing else on the common
// path. The slot announcement for the reaper is sent only when a hold makes its slot's index non-empty.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { slotOfTag } from '../../src/billing/cluster-slots.js';
import { redisKeys } from '../../src/billing/redis-keys.js';

let redis: Redis;
let admin: Redis;
const ns = `t-ledger-cmds-${randomBytes(4).toString('hex')}`;

beforeAll(() => {
  redis = new Redis(inject('redisUrl'));
  admin = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  const keys = await admin.keys(`${ns}*`);
  if (keys.length > 0) await admin.del(...keys);
  await Promise.all([redis.quit(), admin.quit()]);
});

async function calls(): Promise<Record<string, number>> {
  const info = await admin.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

it('runs two commands per request, and names the slot to the reaper once, when its index fills', async () => {
  const backend = createRedisBackend({ redis, namespace: ns });
  const account = await backend.accounts.createAccount('cmds');
  const { record } = await backend.accounts.createKey(account.id, {});
  await backend.ledger.credit(account.id, 1_000_000, 'topup');
  const slots = redisKeys(ns).reapSlots();
  expect(await admin.sismember(slots, String(slotOfTag(account.id)))).toBe(0);

  const before = await calls();
  const N = 20;
  for (let i = 0; i < N; i++) {
    const requestId = `r${i}`;
    expect((await backend.ledger.reserve({ requestId, accountId: account.id, keyId: record.id, amount: 1000, holdTtlMs: 60_000 })).admitted).toBe(true);
    await backend.ledger.settle({
      requestId, accountId: account.id, keyId: record.id, cost: 10, model: 'm',
      usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, status: 'completed', latencyMs: 1,
    });
  }
  const after = await calls();
  const delta = (name: string): number => (after[name] ?? 0) - (before[name] ?? 0);
  // The first hold filled the slot's index: announced once; the other nineteen found it named already.
  expect(delta('sadd')).toBe(1);
  expect(await admin.sismember(slots, String(slotOfTag(account.id)))).toBe(1);
  // Every other command of theirs ran inside the two scripts (INFO counts those calls too, so only the
  // script calls and the one SADD were sent by the ledger).
  expect(delta('evalsha') + delta('eval')).toBe(2 * N);
  expect((await backend.ledger.balance(account.id)).held).toBe(0);
});
