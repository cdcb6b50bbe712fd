// A gateway process that gets SIGTERM (every rollout) while streams are open:
//   - readiness turns false at once, the listener refuses new connections, every open stream runs to
//     its normal end, the process exits 0 and every request is charged exactly its upstream usage,
//     with no hold left. On 7339c82 (its child given the same SIGTERM handler) both tests fail: close()
//     cut every stream at once and the clients saw "terminated" (other side closed).
//   - with a drain bound shorter than the streams, they are ended cleanly in the client's format (an
//     error event its SDK understands) and settled for what was generated.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { Client } from 'undici';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { costMicros } from '../../src/billing/money.js';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';
import { startSimulator } from '../../src/simulator/server.js';
import { EXAMPLE_MODELS } from '../helpers/gateway-harness.js';
import { startFaultWorld, stopFaultWorld, type FaultWorld } from '../helpers/fault-world.js';
import { killGatewayProcesses } from '../helpers/gateway-process.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { until } from '../e2e/e2e-support.js';

const MODEL = 'outlaw-1-xploded';
const pricing = EXAMPLE_MODELS.find((m) => m.id === MODEL)?.pricing;
const prices = {
  input: usdPerMillionToMicros(pricing?.input ?? '0'),
  output: usdPerMillionToMicros(pricing?.output ?? '0'),
  display: { input: '', output: '' },
};

let world: FaultWorld | undefined;

async function setUp(env: Record<string, string>, tokenDelayMs: number, replyTokens: number): Promise<FaultWorld> {
  world = await startFaultWorld({ label: 'drain', env, sim: { tokenDelayMs, replyTokens } });
  return world;
}

afterEach(async () => {
  const w = world;
  world = undefined;
  if (w !== undefined) await stopFaultWorld(w);
});
afterAll(() => killGatewayProcesses());

type Format = 'openai' | 'anthropic';

/** Starts a stream and waits for its first bytes, so it is open when the signal comes. */
async function openStream(w: FaultWorld, format: Format): Promise<{ format: Format; requestId: string; rest: Promise<string> }> {
  const res =
    format === 'openai'
      ? await fetch(`${w.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${w.secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, max_tokens: 500, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Tell a story.' }] }),
        })
      : await fetch(`${w.gateway.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': w.secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, max_tokens: 500, stream: true, messages: [{ role: 'user', content: 'Tell a story.' }] }),
        });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const first = await reader.read();
  expect(first.done).toBe(false);
  const rest = (async () => {
    let text = decoder.decode(first.value, { stream: true });
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text + decoder.decode();
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { format, requestId: res.headers.get('x-request-id') ?? '', rest };
}

/** Resolves with the connection error code, or 'connected' when the port still accepts. */
function tryConnect(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
}

async function usageOf(w: FaultWorld, requestId: string) {
  return until(`the usage record of ${requestId}`, async () => (await w.backend.ledger.listUsage(w.accountId, { limit: 100 })).find((r) => r.requestId === requestId), 10_000);
}

describe('graceful drain on SIGTERM', () => {
  it('readiness false at once, new connections refused, open streams complete, exit 0, books exact', async () => {
    // 40 tokens 40 ms apart: about 1.6 s each, all open when the signal comes.
    const w = await setUp({ TOLLGATE_DRAIN_TIMEOUT_MS: '20000' }, 40, 40);
    // One more stream on a connection of its own that allows pipelining: a readiness check sent on it
    // after the signal is answered from the draining gateway (its idle connections are closed at once,
    // and new ones refused, so no other way in is left).
    const probe = new Client(w.gateway.url, { pipelining: 2 });
    try {
      expect((await probe.request({ path: '/readyz', method: 'GET' })).statusCode).toBe(200);
      const probeStream = await probe.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { authorization: `Bearer ${w.secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, max_tokens: 500, stream: true, messages: [{ role: 'user', content: 'Tell a story.' }] }),
      });
      expect(probeStream.statusCode).toBe(200);
      const probeText = probeStream.body.text();
      const streams = await Promise.all((['openai', 'anthropic', 'openai', 'anthropic'] as const).map((f) => openStream(w, f)));
      const exited = w.gateway.kill('SIGTERM');
      // New connections are refused as soon as the signal is handled (readiness went false just before).
      await until('the listener to close', async () => ((await tryConnect(w.gateway.url)) === 'ECONNREFUSED' ? true : undefined), 5_000);
      const ready = probe.request({ path: '/readyz', method: 'GET' });
      // Every open stream runs to its normal end (on 7339c82 they were cut here: "terminated").
      const texts = await Promise.all(streams.map((s) => s.rest));
      expect((await probeText).trimEnd().endsWith('data: [DONE]')).toBe(true);
      expect((await ready).statusCode).toBe(503);
      expect(await (await ready).body.json()).toEqual({ status: 'not ready' });
      expect(w.gateway.output.some((l) => l.includes('"drain_started"'))).toBe(true);
      for (const [i, s] of streams.entries()) {
        const text = texts[i] ?? '';
        if (s.format === 'openai') expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
        else expect(text).toContain('event: message_stop');
        expect(text).not.toContain('"error"');
      }
      expect(await exited).toBe(0);

      // The books: each request charged exactly what the simulator reports it served, no hold left.
      let total = 0;
      for (const s of [...streams, { requestId: String(probeStream.headers['x-request-id']) }]) {
        const served = w.sim.requests.find((r) => r.headers['x-request-id'] === s.requestId);
        expect(served?.finished).toBe(true);
        expect(served?.outputTokensSent).toBe(40);
        const expected = costMicros({ input: served?.inputTokens ?? 0, output: 40, cachedInput: 0, reasoning: 0 }, prices);
        const record = await usageOf(w, s.requestId);
        expect(record.status).toBe('completed');
        expect(record.cost).toBe(expected);
        total += expected;
      }
      expect(total).toBeGreaterThan(0);
      const audit = await w.backend.ledger.audit(w.accountId);
      expect(audit.difference).toBe(0);
      expect(audit.holdsOutstanding).toBe(0);
      expect(audit.drawnDown).toBe(total);
    } finally {
      await probe.close().catch(() => undefined);
    }
  }, 60_000);

  it('a drain bound shorter than the streams ends them cleanly in each format and settles what was generated', async () => {
    // 200 tokens 40 ms apart (8 s) against a 1 s bound.
    const w = await setUp({ TOLLGATE_DRAIN_TIMEOUT_MS: '1000' }, 40, 200);
    const streams = await Promise.all((['openai', 'anthropic'] as const).map((f) => openStream(w, f)));
    const signalledAt = performance.now();
    const exited = w.gateway.kill('SIGTERM');
    const texts = await Promise.all(streams.map((s) => s.rest));
    expect(performance.now() - signalledAt).toBeLessThan(7_000);
    const [openaiText = '', anthropicText = ''] = texts;
    // The last event is an error each SDK raises (OpenAI: a data line with `error`; Anthropic: an
    // `error` event of type overloaded_error), never a silent end that looks complete.
    expect(openaiText).not.toContain('[DONE]');
    const lastData = openaiText.trimEnd().split('\n\n').at(-1) ?? '';
    expect((JSON.parse(lastData.replace(/^data: /, '')) as { error: { message: string } }).error.message).toMatch(/restarting/);
    expect(anthropicText).not.toContain('message_stop');
    const lastEvent = anthropicText.trimEnd().split('\n\n').at(-1) ?? '';
    expect(lastEvent.startsWith('event: error\n')).toBe(true);
    expect((JSON.parse(lastEvent.split('\ndata: ')[1] ?? '{}') as { error: { type: string } }).error.type).toBe('overloaded_error');
    expect(await exited).toBe(0);

    let total = 0;
    for (const s of streams) {
      const served = w.sim.requests.find((r) => r.headers['x-request-id'] === s.requestId);
      const record = await usageOf(w, s.requestId);
      // Settled for what was generated: some output, less than the whole reply, at the catalog price.
      expect(record.usage.output).toBeGreaterThan(0);
      expect(record.usage.output).toBeLessThan(200);
      expect(record.usage.output).toBeLessThanOrEqual(served?.outputTokensSent ?? 0);
      expect(record.cost).toBe(costMicros(record.usage, prices));
      total += record.cost;
    }
    const audit = await w.backend.ledger.audit(w.accountId);
    expect(audit.difference).toBe(0);
    expect(audit.holdsOutstanding).toBe(0);
    expect(audit.drawnDown).toBe(total);
  }, 60_000);

  it('the production entry point (gateway-main, default catalog file) drains the same way and exits 0', async () => {
    const redis = await startRedisServer({});
    const conn = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    conn.on('error', () => undefined);
    const sim = await startSimulator({ log: true, tokenDelayMs: 40, replyTokens: 40 });
    const { DATABASE_URL: _db, TOLLGATE_CATALOG_FILE: _file, ...env } = process.env;
    const child = spawn(process.execPath, ['--import', 'tsx', new URL('../../src/gateway-main.ts', import.meta.url).pathname], {
      env: { ...env, REDIS_URL: redis.url, PORT: '0', METRICS_PORT: '0', TOLLGATE_SIMULATOR_URL: sim.url, TOLLGATE_DRAIN_TIMEOUT_MS: '20000' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const lines: string[] = [];
      createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
      const started = await until('gateway-main to start', () => lines.find((l) => l.includes('tollgate gateway started')), 20_000);
      const url = (JSON.parse(started) as { url: string }).url;
      // The production ledger namespace: an account and key made beside the gateway.
      const backend = createRedisBackend({ redis: conn });
      const account = await backend.accounts.createAccount('drain-main');
      await backend.ledger.credit(account.id, 100_000_000, 'start');
      const { secret } = await backend.accounts.createKey(account.id, { name: 'drain-main' });
      const w = { gateway: { url }, secret } as unknown as FaultWorld;
      const streams = await Promise.all((['openai', 'anthropic'] as const).map((f) => openStream(w, f)));
      child.kill('SIGTERM');
      await until('the listener to close', async () => ((await tryConnect(url)) === 'ECONNREFUSED' ? true : undefined), 5_000);
      const [openaiText = '', anthropicText = ''] = await Promise.all(streams.map((s) => s.rest));
      expect(openaiText.trimEnd().endsWith('data: [DONE]')).toBe(true);
      expect(anthropicText).toContain('event: message_stop');
      expect(await exited).toBe(0);
      let total = 0;
      for (const s of streams) {
        const served = sim.requests.find((r) => r.headers['x-request-id'] === s.requestId);
        expect(served?.outputTokensSent).toBe(40);
        const record = (await backend.ledger.listUsage(account.id, { limit: 10 })).find((r) => r.requestId === s.requestId);
        expect(record?.cost).toBe(costMicros({ input: served?.inputTokens ?? 0, output: 40, cachedInput: 0, reasoning: 0 }, prices));
        total += record?.cost ?? 0;
      }
      const audit = await backend.ledger.audit(account.id);
      expect(audit).toMatchObject({ difference: 0, holdsOutstanding: 0, drawnDown: total });
    } finally {
      child.kill('SIGKILL');
      conn.disconnect();
      await sim.close();
      await redis.stop();
    }
  }, 60_000);
});
