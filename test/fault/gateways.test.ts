// Gateways in their own processes against one Redis (the production connection), under faults:
//   - Redis unreachable when a gateway starts: it starts, is not ready and refuses with a retryable 503
//     until Redis comes, then serves without a restart;
//   - a gateway SIGKILLed mid-stream while a second one serves: the dead one's hold is returned by the
//     survivor's reaper, and nothing else moves;
//   - two gateways, one small monthly cap, hundreds of concurrent requests with overlapping holds: the
//     key never spends past its cap, and the books agree;
//   - two gateways, one key's rate limits: exactly N of a burst admitted for N requests per window, and
//     exactly C in flight at once for a concurrency of C, the rest 429, none of them charged.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createRedisBackend, type Backend } from '../../src/billing/backends.js';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';
import { freePort, startRedisServer, type OwnRedisProcess } from '../helpers/redis-server.js';
import { killGatewayProcesses, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.js';
import { until } from '../e2e/e2e-support.js';

const MODEL = 'outlaw-1-xploded';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(() => killGatewayProcesses());

function chat(url: string, key: string, extra: Record<string, unknown> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 50, messages: [{ role: 'user', content: 'Say something.' }], ...extra }),
    ...(signal === undefined ? {} : { signal }),
  });
}

async function world(redis: OwnRedisProcess, simOpts: Parameters<typeof startSimulator>[0] = {}) {
  const conn = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  conn.on('error', () => undefined);
  const namespace = `gw-${randomBytes(4).toString('hex')}`;
  const backend: Backend = createRedisBackend({ redis: conn, namespace });
  const sim: Simulator = await startSimulator({ log: true, ...simOpts });
  cleanups.push(async () => {
    conn.disconnect();
    await sim.close();
  });
  const env = { REDIS_URL: redis.url, TOLLGATE_TEST_NAMESPACE: namespace, TOLLGATE_SIMULATOR_URL: sim.url, TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '500' };
  const gateway = async (extra: Record<string, string> = {}): Promise<GatewayProcess> => {
    const g = await startGatewayProcess({ ...env, ...extra });
    cleanups.push(async () => {
      await g.kill();
    });
    return g;
  };
  return { conn, backend, sim, gateway };
}

describe('gateway processes under faults', () => {
  it('starts with Redis unreachable: not ready, 503 ledger_unavailable, then serves once Redis comes', async () => {
    const port = await freePort();
    const sim = await startSimulator({});
    cleanups.push(() => sim.close());
    const namespace = `gw-${randomBytes(4).toString('hex')}`;
    const g = await startGatewayProcess({ REDIS_URL: `redis://127.0.0.1:${port}`, TOLLGATE_TEST_NAMESPACE: namespace, TOLLGATE_SIMULATOR_URL: sim.url, TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '500' });
    cleanups.push(async () => {
      await g.kill();
    });
    await until('not ready', async () => ((await fetch(`${g.url}/readyz`)).status === 503 ? true : undefined), 10_000);
    const refused = await chat(g.url, `sk-tg-${'A'.repeat(43)}`);
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('ledger_unavailable');
    expect(refused.headers.get('retry-after')).not.toBeNull();
    const redis = await startRedisServer({ port });
    cleanups.push(() => redis.stop());
    const conn = new Redis(redis.url);
    cleanups.push(async () => {
      conn.disconnect();
    });
    const backend = createRedisBackend({ redis: conn, namespace });
    const acct = await backend.accounts.createAccount('late-redis');
    await backend.ledger.credit(acct.id, 10_000_000, 'start');
    const { secret } = await backend.accounts.createKey(acct.id);
    await until('ready', async () => ((await fetch(`${g.url}/readyz`)).status === 200 ? true : undefined), 15_000);
    const served = await until('served', async () => {
      const res = await chat(g.url, secret);
      return res.status === 200 ? res : undefined;
    }, 10_000);
    await served.text();
    await until('settled', async () => ((await backend.ledger.listUsage(acct.id)).length === 1 ? true : undefined), 5000);
    const audit = await backend.ledger.audit(acct.id);
    expect(audit.difference).toBe(0);
    expect(audit.holdsOutstanding).toBe(0);
  });

  it("a gateway SIGKILLed mid-stream: the survivor reaps its hold; the books agree", async () => {
    const redis = await startRedisServer({});
    cleanups.push(() => redis.stop());
    const w = await world(redis, { tokenDelayMs: 50 });
    const acct = await w.backend.accounts.createAccount('victim');
    await w.backend.ledger.credit(acct.id, 10_000_000, 'start');
    const { secret } = await w.backend.accounts.createKey(acct.id);
    // Holds live 1.5 s; the survivor reaps every 200 ms.
    const short = { TOLLGATE_REQUEST_TIMEOUT_MS: '1000', TOLLGATE_HOLD_MARGIN_MS: '500' };
    const victim = await w.gateway({ ...short });
    const survivor = await w.gateway({ ...short, TOLLGATE_REAPER_INTERVAL_MS: '200' });
    const res = await chat(victim.url, secret, { stream: true, sim_reply_tokens: 200 });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect((await w.backend.ledger.balance(acct.id)).held).toBeGreaterThan(0);
    await victim.kill('SIGKILL');
    await reader.cancel().catch(() => undefined);
    await until('the hold is returned', async () => ((await w.backend.ledger.balance(acct.id)).held === 0 ? true : undefined), 10_000);
    // The survivor serves on, and the books agree.
    const again = await chat(survivor.url, secret, { sim_reply_tokens: 2 });
    expect(again.status).toBe(200);
    await again.text();
    await until('settled', async () => ((await w.backend.ledger.listUsage(acct.id)).length === 1 ? true : undefined), 5000);
    const audit = await w.backend.ledger.audit(acct.id);
    expect(audit.difference).toBe(0);
    expect(audit.holdsOutstanding).toBe(0);
  });

  it('two gateways, one small monthly cap, 300 concurrent requests: never past the cap', async () => {
    const redis = await startRedisServer({});
    cleanups.push(() => redis.stop());
    const w = await world(redis, { tokenDelayMs: 2 });
    const acct = await w.backend.accounts.createAccount('capped');
    await w.backend.ledger.credit(acct.id, 100_000_000, 'start');
    // 0.002 USD: room for some of the requests, not all, however they overlap. The 300 requests' actual
    // costs (about 4-25 micro-USD each) add up to about twice the cap, so some are refused even when a
    // loaded machine serves them one after another; at 0.02 USD they all fit unless enough overlapped
    // for their holds to pass the cap (a CI run saw 300 × 200).
    const cap = 2_000;
    const { secret, record } = await w.backend.accounts.createKey(acct.id, { monthlyCap: cap });
    // A generous command deadline: this test is about the cap, and on a loaded CI machine a 500 ms deadline
    // turns some answers into 503 ledger_unavailable (the outage tests cover that).
    const patient = { TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '10000' };
    const [a, b] = [await w.gateway(patient), await w.gateway(patient)];
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const s = await w.backend.ledger.keySpend(acct.id, record.id);
        peak = Math.max(peak, s.monthSpent + s.monthHeld);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const statuses = await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        const res = await chat((i % 2 === 0 ? a : b).url, secret, { max_tokens: 20 + (i % 30), sim_reply_tokens: 1 + (i % 20), stream: i % 3 === 0 });
        await res.text();
        return res.status;
      }),
    );
    sampling = false;
    await sampler;
    const counts = JSON.stringify(Object.fromEntries(statuses.reduce((m, s) => m.set(s, (m.get(s) ?? 0) + 1), new Map<number, number>())));
    expect(statuses.filter((s) => s === 200).length, counts).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 402).length, counts).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200 || s === 402), counts).toBe(true);
    await until('settled', async () => ((await w.backend.ledger.audit(acct.id)).holdsOutstanding === 0 ? true : undefined), 10_000);
    const spend = await w.backend.ledger.keySpend(acct.id, record.id);
    expect(spend.monthSpent).toBeLessThanOrEqual(cap);
    expect(peak).toBeLessThanOrEqual(cap);
    const audit = await w.backend.ledger.audit(acct.id);
    expect(audit.difference).toBe(0);
    expect(audit.usageTotal).toBe(spend.monthSpent);
  });

  it('two gateways share a key\'s rate limits exactly: N requests per window, C in flight', async () => {
    const redis = await startRedisServer({});
    cleanups.push(() => redis.stop());
    // Slow answers (50 tokens, 40 ms each: 2 s), so a burst's reservations all happen while the first are in flight.
    const w = await world(redis, { tokenDelayMs: 40 });
    const acct = await w.backend.accounts.createAccount('limited');
    await w.backend.ledger.credit(acct.id, 100_000_000, 'start');
    const { secret, record } = await w.backend.accounts.createKey(acct.id, { rateLimits: { requestsPerMinute: 17 } });
    const WINDOW = 5_000;
    const patient = { TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '10000', TOLLGATE_RATE_LIMIT_WINDOW_MS: String(WINDOW) };
    const [a, b] = [await w.gateway(patient), await w.gateway(patient)];
    const burst = async (n: number, extra: Record<string, unknown>) =>
      Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const res = await chat((i % 2 === 0 ? a : b).url, secret, { max_tokens: 60, ...extra });
          await res.text();
          return { status: res.status, limit: res.headers.get('x-ratelimit-limit-requests') };
        }),
      );
    const count = (rs: Array<{ status: number }>, s: number) => rs.filter((r) => r.status === s).length;
    // A burst at the start of a window (by Redis's clock), so it cannot straddle two.
    const [sec, us] = await w.conn.time();
    await new Promise((r) => setTimeout(r, WINDOW - ((Number(sec) * 1000 + Math.floor(Number(us) / 1000)) % WINDOW) + 20));
    const fast = await burst(60, { sim_reply_tokens: 1 });
    expect(count(fast, 200), JSON.stringify(fast)).toBe(17);
    expect(count(fast, 429), JSON.stringify(fast)).toBe(43);
    expect(fast.every((r) => r.limit === '17')).toBe(true);

    await w.backend.accounts.setKeyRateLimits(acct.id, record.id, { concurrentRequests: 3 });
    const slow = await burst(12, { sim_reply_tokens: 50 });
    expect(count(slow, 200), JSON.stringify(slow)).toBe(3);
    expect(count(slow, 429), JSON.stringify(slow)).toBe(9);

    await until('settled', async () => ((await w.backend.ledger.audit(acct.id)).holdsOutstanding === 0 ? true : undefined), 10_000);
    // Only the admitted requests were charged and recorded.
    const usage = await w.backend.ledger.listUsage(acct.id, { limit: 1_000 });
    expect(usage.length).toBe(20);
    const audit = await w.backend.ledger.audit(acct.id);
    expect(audit.difference).toBe(0);
  });
});
