// The Redis ledger on a real three-master Redis Cluster (six redis-server processes on loopback), made
// by backendFromConfig from REDIS_CLUSTER_NODES as the gateway makes it: the conformance checks across
// accounts spread over every master, the reaper on every master, the journal streams, and a failover
// under traffic after which the books are exact and no hold is left.
import { randomBytes } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendFromConfig, type OwnedBackend } from '../../src/backend-from-config.js';
import { createRedisBackend } from '../../src/billing/backends.js';
import { slotOfTag } from '../../src/billing/cluster-slots.js';
import { isJournalingLedger, type Ledger, type SettlementRequest } from '../../src/billing/ledger.js';
import { hashApiKey } from '../../src/accounts/api-key.js';
import { readConfig } from '../../src/config.js';
import { startSimulator } from '../../src/simulator/server.js';
import { until } from '../e2e/e2e-support.js';
import { killGatewayProcesses, startGatewayProcess } from '../helpers/gateway-process.js';
import { startRedisCluster, type RedisClusterProcess } from '../helpers/redis-cluster.js';

let cluster: RedisClusterProcess;
let owned: OwnedBackend;
let redis: Cluster;

beforeAll(async () => {
  cluster = await startRedisCluster();
  owned = backendFromConfig(readConfig({ REDIS_CLUSTER_NODES: cluster.nodes, TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '1000' }));
  // The ledger's own connection, to read the cluster's slot map.
  redis = (owned.backend.ledger as unknown as { redis: Cluster }).redis;
}, 30_000);

afterAll(async () => {
  killGatewayProcesses();
  await owned?.close();
  await cluster?.stop();
});

/** Port of the master serving each slot, from CLUSTER SLOTS. */
async function slotMasters(): Promise<(slot: number) => number> {
  const ranges = await redis.cluster('SLOTS');
  return (slot) => {
    const master = ranges.find(([lo, hi]) => slot >= lo && slot <= hi)?.[2];
    if (master === undefined) throw new Error(`slot ${slot} unserved`);
    return master[1];
  };
}

interface Acct {
  id: string;
  keyId: string;
}

async function openAccounts(n: number, balance: number): Promise<Acct[]> {
  const { accounts, ledger } = owned.backend;
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const a = await accounts.createAccount(`cluster-${i}`);
      const { record } = await accounts.createKey(a.id);
      expect(await ledger.credit(a.id, balance, `initial-${a.id}`)).toBe(true);
      return { id: a.id, keyId: record.id };
    }),
  );
}

const rid = (): string => `req_${randomBytes(6).toString('hex')}`;

function settlement(a: Acct, requestId: string, cost: number): SettlementRequest {
  return {
    requestId, accountId: a.id, keyId: a.keyId, model: 'm1',
    usage: { input: 10, output: 20, cachedInput: 0, reasoning: 0 }, cost, status: 'completed', latencyMs: 5,
  };
}

async function mastersOf(accts: readonly Acct[]): Promise<Set<number>> {
  const masterOf = await slotMasters();
  return new Set(accts.map((a) => masterOf(slotOfTag(a.id))));
}

/**
 * `n` accounts whose slots reach every master between them. Account ids are random, so a small set can
 * miss a master (12 accounts miss one of three about 2% of the time): such a set is drawn again.
 */
async function openAccountsOnEveryMaster(n: number, balance: number): Promise<Acct[]> {
  for (let draw = 0; draw < 20; draw++) {
    const accts = await openAccounts(n, balance);
    if ((await mastersOf(accts)).size === 3) return accts;
  }
  throw new Error(`20 draws of ${n} accounts never reached all three masters`);
}

async function expectBooksExact(ledger: Ledger, accts: readonly Acct[]): Promise<void> {
  for (const a of accts) {
    const audit = await ledger.audit(a.id);
    expect(audit.difference, a.id).toBe(0);
    expect(audit.holdsOutstanding, a.id).toBe(0);
    expect((await ledger.balance(a.id)).held, a.id).toBe(0);
  }
}

describe('ledger on a Redis Cluster', () => {
  it('is the cluster client, and serves reserve, settle, refund, credit, keys and audit on every master', async () => {
    expect(owned.kind).toBe('redis-cluster');
    const { ledger, accounts } = owned.backend;
    const accts = await openAccountsOnEveryMaster(24, 1_000_000);
    expect((await mastersOf(accts)).size).toBe(3);
    for (const a of accts) {
      // A second key (its record and index written in one MULTI of the account's slot), listed by a pipeline.
      const second = await accounts.createKey(a.id, { lifetimeCap: 200_000 });
      expect((await accounts.listKeys(a.id)).map((k) => k.id).sort()).toEqual([a.keyId, second.record.id].sort());
      // The secret's lookup is a global key on whichever master owns its slot.
      expect(await accounts.findKeyByHash(hashApiKey(second.secret))).toMatchObject({ id: second.record.id, accountId: a.id });
      expect(await accounts.setKeyCaps(a.id, second.record.id, { monthlyCap: 100_000 })).toBe(true);
      expect(await accounts.revokeKey(a.id, second.record.id)).toBe(true);
      const refused = await ledger.reserve({ requestId: rid(), accountId: a.id, keyId: second.record.id, amount: 1, holdTtlMs: 60_000 });
      expect(refused).toMatchObject({ admitted: false, reason: 'key_revoked' });

      const r1 = rid();
      const r2 = rid();
      expect(await ledger.reserve({ requestId: r1, accountId: a.id, keyId: a.keyId, amount: 300_000, holdTtlMs: 60_000 })).toEqual({ admitted: true });
      expect(await ledger.reserve({ requestId: r2, accountId: a.id, keyId: a.keyId, amount: 500_000, holdTtlMs: 60_000 })).toEqual({ admitted: true });
      expect(await ledger.reserve({ requestId: rid(), accountId: a.id, keyId: a.keyId, amount: 300_000, holdTtlMs: 60_000 })).toMatchObject({
        admitted: false, reason: 'insufficient_balance', available: 200_000,
      });
      expect(await ledger.balance(a.id)).toEqual({ balance: 1_000_000, held: 800_000 });
      expect(await ledger.settle(settlement(a, r1, 123_456))).toMatchObject({ charged: 123_456, released: 176_544, duplicate: false });
      expect(await ledger.settle(settlement(a, r1, 123_456))).toMatchObject({ duplicate: true });
      expect(await ledger.settle(settlement(a, r2, 7))).toMatchObject({ charged: 7, duplicate: false });
      expect(await ledger.refund(a.id, r2)).toEqual({ refunded: 7, unknown: false, duplicate: false });
      expect(await ledger.refund(a.id, r2)).toMatchObject({ refunded: 0, duplicate: true });
      expect(await ledger.credit(a.id, 50_000, `top-up-${a.id}`)).toBe(true);
      expect(await ledger.credit(a.id, 50_000, `top-up-${a.id}`)).toBe(false);
      expect(await ledger.balance(a.id)).toEqual({ balance: 1_000_000 - 123_456 + 50_000, held: 0 });
      expect((await ledger.listUsage(a.id)).map((u) => [u.requestId, u.cost, u.refunded === true])).toEqual([
        [r2, 7, true],
        [r1, 123_456, false],
      ]);
      const audit = await ledger.audit(a.id);
      expect(audit).toMatchObject({ credited: 1_050_000, refunded: 7, balance: 926_544, usageTotal: 123_463, difference: 0, holdsOutstanding: 0 });
    }
    expect(await ledger.holdsSummary()).toEqual({ count: 0, held: 0 });
    expect((await accounts.listAccounts()).length).toBeGreaterThanOrEqual(24);
  });

  it('reaps expired holds on every master, from the announced slots and from a full sweep', async () => {
    const { ledger } = owned.backend;
    const accts = await openAccountsOnEveryMaster(18, 100_000);
    expect((await mastersOf(accts)).size).toBe(3);
    // Deadlines from Redis's clock: 50 ms holds, two per account.
    for (const a of accts) {
      for (const amount of [1_000, 2_000]) {
        expect(await ledger.reserve({ requestId: rid(), accountId: a.id, keyId: a.keyId, amount, holdTtlMs: 50 })).toEqual({ admitted: true });
      }
    }
    expect(await ledger.holdsSummary()).toEqual({ count: 36, held: 18 * 3_000 });
    await new Promise((r) => setTimeout(r, 150));
    expect(await ledger.reap()).toEqual({ count: 36, released: 18 * 3_000 });
    await expectBooksExact(ledger, accts);

    // The slot announcements lost (the plain SADD beside the script): a full sweep of every slot's
    // index, each read on the master that owns the slot, still finds them.
    const sweeper = createRedisBackend({ redis, fullSweepEvery: 1 }).ledger;
    for (const a of accts) expect(await ledger.reserve({ requestId: rid(), accountId: a.id, keyId: a.keyId, amount: 500, holdTtlMs: 50 })).toEqual({ admitted: true });
    await redis.del('tg:reap-slots');
    expect(await ledger.reap(Date.now() + 60_000)).toEqual({ count: 0, released: 0 });
    await new Promise((r) => setTimeout(r, 150));
    expect(await sweeper.reap()).toEqual({ count: 18, released: 18 * 500 });
    await expectBooksExact(ledger, accts);
  });

  it('keeps the journal in per-account streams that sweeps read and commits remove', async () => {
    const { ledger } = owned.backend;
    const stream = owned.journalStream;
    expect(stream).toBeDefined();
    if (stream === undefined || !isJournalingLedger(ledger)) throw new Error('the Redis ledger keeps journal streams');
    // What the gateway's JournaledLedger asks of it: each settlement appends its journal entry.
    ledger.journalSettlements();
    const accts = await openAccountsOnEveryMaster(12, 100_000);
    expect((await mastersOf(accts)).size).toBe(3);
    const settled = new Map<string, number>();
    for (const [i, a] of accts.entries()) {
      const requestId = rid();
      await ledger.reserve({ requestId, accountId: a.id, keyId: a.keyId, amount: 10_000, holdTtlMs: 60_000 });
      const out = await ledger.settle(settlement(a, requestId, 100 + i));
      expect(out.journal?.entryId).toBeDefined();
      settled.set(requestId, 100 + i);
    }
    const found = await stream.sweep(accts.map((a) => a.id), Date.now() + 60_000, 1000);
    expect(new Map(found.map((e) => [e.requestId, e.cost]))).toEqual(settled);
    expect((await stream.pending(accts[0]?.id ?? '')).length).toBe(1);
    await stream.remove(found);
    expect(await stream.sweep(accts.map((a) => a.id), Date.now() + 60_000, 1000)).toEqual([]);
  });

  it('keeps the books exact through a failover under traffic', async () => {
    const { ledger } = owned.backend;
    const accts = await openAccounts(24, 10_000_000);
    const masterOf = await slotMasters();
    const roles = await cluster.roles();
    // A master that serves some of these accounts, and its replica.
    const target = masterOf(slotOfTag(accts[0]?.id ?? ''));
    const replica = roles.find((r) => r.role === 'slave' && r.masterPort === target)?.port;
    expect(replica).toBeDefined();
    const onTarget = accts.filter((a) => masterOf(slotOfTag(a.id)) === target).length;
    expect(onTarget).toBeGreaterThan(0);

    // Each call is retried (the same request id: reserve and settle are idempotent) until it lands.
    let retries = 0;
    const retry = async <T>(call: () => Promise<T>): Promise<T> => {
      // Generous: a failover on a loaded machine (the whole suite runs on two cores) takes seconds.
      const until = Date.now() + 25_000;
      for (;;) {
        try {
          return await call();
        } catch (err) {
          if (Date.now() > until) throw err;
          retries++;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };
    const charged = new Map<string, number>();
    let stop = false;
    let served = 0;
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const a = accts[(w + i * 7) % accts.length] as Acct;
        const requestId = rid();
        const cost = 1 + ((w * 31 + i) % 900);
        const r = await retry(() => ledger.reserve({ requestId, accountId: a.id, keyId: a.keyId, amount: 1_000, holdTtlMs: 60_000 }));
        expect(r).toEqual({ admitted: true });
        await retry(() => ledger.settle(settlement(a, requestId, cost)));
        charged.set(a.id, (charged.get(a.id) ?? 0) + cost);
        served++;
      }
    };
    const workers = Array.from({ length: 8 }, (_, w) => worker(w));
    await new Promise((r) => setTimeout(r, 500));
    const before = served;
    expect(await cluster.cli(replica as number, 'cluster', 'failover')).toContain('OK');
    // The replica is promoted (a manual failover waits for it to catch up, so no write is lost).
    const promotedBy = Date.now() + 10_000;
    while (!(await cluster.roles()).some((r) => r.port === replica && r.role === 'master')) {
      if (Date.now() > promotedBy) throw new Error('replica not promoted in 10 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const atPromotion = served;
    await new Promise((r) => setTimeout(r, 1_000));
    stop = true;
    await Promise.all(workers);
    expect(served).toBeGreaterThan(atPromotion);
    expect(atPromotion).toBeGreaterThan(before);
    // Traffic reached the promoted master after the failover.
    expect((await slotMasters())(slotOfTag(accts[0]?.id ?? ''))).toBe(replica);

    for (const a of accts) {
      expect(await ledger.balance(a.id)).toEqual({ balance: 10_000_000 - (charged.get(a.id) ?? 0), held: 0 });
    }
    await expectBooksExact(ledger, accts);
    expect(await ledger.holdsSummary()).toEqual({ count: 0, held: 0 });
    expect(owned.health.up).toBe(true);
    // For the log of a run: how much the failover disturbed.
    console.log(`failover: ${served} requests settled, ${retries} retried calls, ${onTarget}/${accts.length} accounts on the failed-over master`);
  }, 60_000);

  it('a gateway on a redis+cluster:// URL keeps serving, and charges every request once, through a master SIGKILLed', async () => {
    const sim = await startSimulator({ log: false });
    try {
      const namespace = `gw-${randomBytes(3).toString('hex')}`;
      const backend = createRedisBackend({ redis, namespace });
      const accts = await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          const a = await backend.accounts.createAccount(`gw-${i}`);
          await backend.ledger.credit(a.id, 100_000_000, `start-${a.id}`);
          return { id: a.id, secret: (await backend.accounts.createKey(a.id)).secret };
        }),
      );
      const masterOf = await slotMasters();
      const victim = masterOf(slotOfTag(accts[0]?.id ?? ''));
      const g = await startGatewayProcess({
        REDIS_URL: `redis+cluster://${cluster.nodes}`,
        TOLLGATE_TEST_NAMESPACE: namespace,
        TOLLGATE_SIMULATOR_URL: sim.url,
        TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '500',
      });
      const chat = (secret: string): Promise<Response> =>
        fetch(`${g.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'outlaw-1-xploded', max_tokens: 20, messages: [{ role: 'user', content: 'Say something.' }] }),
        });
      const served = new Map<string, number>();
      const statuses = new Map<number, number>();
      let stop = false;
      const client = async (c: number): Promise<void> => {
        for (let i = 0; !stop; i++) {
          const a = accts[(c + i) % accts.length] as { id: string; secret: string };
          const res = await chat(a.secret);
          await res.text();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 200) served.set(a.id, (served.get(a.id) ?? 0) + 1);
          else await new Promise((r) => setTimeout(r, 50));
        }
      };
      const clients = Array.from({ length: 6 }, (_, c) => client(c));
      await until('traffic', () => ((statuses.get(200) ?? 0) >= 50 ? true : undefined), 10_000);
      const masterPorts = new Set((await cluster.roles()).filter((r) => r.role === 'master').map((r) => r.port));
      expect(masterPorts.has(victim)).toBe(true);
      await cluster.servers.find((s) => s.port === victim)?.kill();
      // The victim's replica takes its slots; then the victim's accounts are served again.
      await until('promotion', async () => ((await cluster.roles()).some((r) => r.role === 'master' && r.port !== victim && !masterPorts.has(r.port)) ? true : undefined), 15_000);
      const first = accts[0] as { id: string; secret: string };
      await until('served after failover', async () => {
        const res = await chat(first.secret);
        await res.text();
        return res.status === 200 ? true : undefined;
      }, 15_000);
      served.set(first.id, (served.get(first.id) ?? 0) + 1);
      await new Promise((r) => setTimeout(r, 500));
      stop = true;
      await Promise.all(clients);
      expect([...statuses.keys()].filter((s) => s !== 200 && s !== 503)).toEqual([]);
      expect((await fetch(`${g.url}/readyz`)).status).toBe(200);
      // Settlements that met the failover are retried by the gateway's queue until they land.
      for (const a of accts) {
        // Completed records: a reservation whose reply the failover lost is released by a zero settlement,
        // recorded as 'refused' at no cost (it moves no money), so those are not counted.
        const completed = async (): Promise<number> => (await backend.ledger.listUsage(a.id, { limit: 100_000 })).filter((r) => r.status === 'completed').length;
        await until(`settled ${a.id}`, async () => ((await completed()) === (served.get(a.id) ?? 0) ? true : undefined), 20_000);
        const audit = await backend.ledger.audit(a.id);
        expect(audit.difference).toBe(0);
        expect(audit.holdsOutstanding).toBe(0);
        expect(audit.usageTotal).toBeGreaterThan(0);
      }
      await g.kill('SIGTERM');
      console.log(`gateway through a killed master: ${JSON.stringify(Object.fromEntries(statuses))}`);
    } finally {
      await sim.close();
    }
  }, 60_000);
});
