// The billing ledger (Redis) failing under a gateway in its own process, with the production Redis
// connection (command deadlines, ledger health):
//   - Redis dies while a stream is being served: the settlement cannot be applied, is kept, and is
//     applied once Redis is back (late, past the hold's deadline, still exactly once). On 7339c82 it was
//     retried three times, dropped, and the reaper returned the whole hold: the request was free.
//   - Redis down: a fast, retryable 503 naming the billing ledger with Retry-After, in each client's
//     wire format, /readyz false, and recovery by itself (7339c82: 500 internal_error, /readyz 200).
//   - Redis paused: requests are refused within about the command deadline instead of being held for
//     the whole pause (7339c82: every request waited out the pause).
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';
import type { startSimulator } from '../../src/simulator/server.js';
import { EXAMPLE_MODELS } from '../helpers/gateway-harness.js';
import { startFaultWorld, stopFaultWorld, type FaultWorld } from '../helpers/fault-world.js';
import { killGatewayProcesses } from '../helpers/gateway-process.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { until } from '../e2e/e2e-support.js';

const MODEL = 'outlaw-1-xploded';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let world: FaultWorld | undefined;

async function setUp(env: Record<string, string> = {}, sim: Parameters<typeof startSimulator>[0] = {}): Promise<FaultWorld> {
  world = await startFaultWorld({ label: 'fault', appendOnly: true, env: { TOLLGATE_REDIS_COMMAND_TIMEOUT_MS: '500', ...env }, sim });
  return world;
}

afterEach(async () => {
  const w = world;
  world = undefined;
  if (w !== undefined) await stopFaultWorld(w);
});
afterAll(() => killGatewayProcesses());

function chat(w: FaultWorld, extra: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${w.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 200, messages: [{ role: 'user', content: 'Say something.' }], ...extra }),
  });
}

function message(w: FaultWorld): Promise<Response> {
  return fetch(`${w.gateway.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': w.secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 200, messages: [{ role: 'user', content: 'Say something.' }] }),
  });
}

const readyz = async (w: FaultWorld): Promise<number> => (await fetch(`${w.gateway.url}/readyz`)).status;

const pricing = EXAMPLE_MODELS.find((m) => m.id === MODEL)?.pricing;

describe('ledger outage', () => {
  it('a settlement that cannot reach Redis is kept and applied when Redis returns: never free', async () => {
    // Holds live 3 s and are reaped every 200 ms: the hold is gone long before Redis comes back.
    const w = await setUp({ TOLLGATE_REQUEST_TIMEOUT_MS: '2000', TOLLGATE_HOLD_MARGIN_MS: '1000', TOLLGATE_REAPER_INTERVAL_MS: '200' }, { tokenDelayMs: 40 });
    const res = await chat(w, { stream: true, stream_options: { include_usage: true }, sim_reply_tokens: 30 });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id') ?? '';
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    // Redis dies mid-stream (with its append-only file: nothing it acknowledged is lost).
    await w.redis.kill();
    let text = new TextDecoder().decode(first.value);
    let lastChunkAt = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
      lastChunkAt = performance.now();
    }
    const endedAt = performance.now();
    expect(text).toContain('data: [DONE]');
    // The settlement's retries are off the response path: the end is not held back by them.
    expect(endedAt - lastChunkAt).toBeLessThan(1000);
    // As long as the outage the issue measured: longer than the hold's life (the reaper returns it
    // first, so the settlement lands late) and than any client-side retry budget.
    await sleep(20_000);
    await startRedisServer({ appendOnly: true, port: w.redis.port, dir: w.redis.dir });
    const served = w.sim.requests.find((r) => r.path === '/v1/chat/completions');
    expect(served?.outputTokensSent).toBe(30);
    const expected = costMicros({ input: served?.inputTokens ?? 0, output: 30, cachedInput: 0, reasoning: 0 }, {
      input: usdPerMillionToMicros(pricing?.input ?? '0'),
      output: usdPerMillionToMicros(pricing?.output ?? '0'),
      display: { input: '', output: '' },
    });
    expect(expected).toBeGreaterThan(0);
    const record = await until(
      'the settlement is applied',
      async () => (await w.backend.ledger.listUsage(w.accountId, { limit: 10 }).catch(() => [])).find((r) => r.requestId === requestId),
      30_000,
    );
    expect(record.cost).toBe(expected);
    const audit = await w.backend.ledger.audit(w.accountId);
    expect(audit.difference).toBe(0);
    expect(audit.holdsOutstanding).toBe(0);
    expect(audit.drawnDown).toBe(expected);
  }, 60_000);

  it('Redis down: a fast retryable 503 naming the ledger in each format, /readyz false, recovery by itself', async () => {
    const w = await setUp();
    expect((await chat(w)).status).toBe(200);
    expect(await readyz(w)).toBe(200);
    await w.redis.kill();
    await sleep(1200); // past the key-lookup cache
    const started = performance.now();
    const res = await chat(w);
    expect(performance.now() - started).toBeLessThan(3000);
    expect(res.status).toBe(503);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    const body = (await res.json()) as { error: { code: string; message: string; type: string } };
    expect(body.error.code).toBe('ledger_unavailable');
    expect(body.error.message).toMatch(/billing ledger/);
    const a = await message(w);
    expect(a.status).toBe(503);
    expect(((await a.json()) as { type: string; error: { message: string } }).error.message).toMatch(/billing ledger/);
    expect(await readyz(w)).toBe(503);
    // Nothing was charged and nothing reached the model while the ledger was down.
    expect(w.sim.requests.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(1);
    await startRedisServer({ appendOnly: true, port: w.redis.port, dir: w.redis.dir });
    await until('ready again', async () => ((await readyz(w)) === 200 ? true : undefined), 15_000);
    expect((await chat(w)).status).toBe(200);
    // Its answer comes before its settlement.
    await until('settled', async () => ((await w.backend.ledger.audit(w.accountId)).holdsOutstanding === 0 ? true : undefined), 5_000);
    const audit = await w.backend.ledger.audit(w.accountId);
    expect(audit.difference).toBe(0);
    expect(audit.holdsOutstanding).toBe(0);
    // The outage is logged once per change of state, not once per failed call or reconnect attempt.
    expect(w.gateway.output.filter((l) => l.includes('"event":"ledger_down"')).length).toBeLessThanOrEqual(2);
    expect(w.gateway.output.some((l) => l.includes('"event":"ledger_up"'))).toBe(true);
  });

  it('Redis paused: requests are refused within about the command deadline, not held for the pause', async () => {
    const w = await setUp();
    expect((await chat(w)).status).toBe(200);
    await sleep(1200); // past the key-lookup cache
    w.redis.pause();
    const started = performance.now();
    const res = await chat(w);
    const took = performance.now() - started;
    expect(res.status).toBe(503);
    expect(took).toBeLessThan(3000);
    expect(await readyz(w)).toBe(503);
    await sleep(2000);
    w.redis.resume();
    await until('ready again', async () => ((await readyz(w)) === 200 ? true : undefined), 15_000);
    expect((await chat(w)).status).toBe(200);
    const audit = await w.backend.ledger.audit(w.accountId);
    expect(audit.difference).toBe(0);
  });
});
