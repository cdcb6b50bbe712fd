// A request the upstream accepted is never free (issue 37, item 1). Once the upstream has answered with a
// success status, its prompt is charged whatever happens next: at the usage the upstream reported (each
// token class at its price: input, cache read, 5-minute and 1-hour cache writes), else at the token count
// of what was sent, plus the output generated before the end. Every client format (chat completions,
// messages, Responses) over every upstream format (OpenAI, Anthropic, Gemini), streamed and whole:
//  - the client closes at the first byte (the upstream's headers are in, no body yet), once the prompt is
//    acknowledged (streams: the upstream's first event, e.g. message_start; a whole reply acknowledges
//    nothing before its body), and mid-answer (streams: a few tokens out; whole: half the body in);
//  - the upstream drops the connection mid-answer, the gateway's request deadline passes, and the
//    gateway's drain bound cuts the exchange; each is recorded as what it was;
//  - before the upstream accepted (an upstream 5xx, the client or the deadline or the drain before the
//    headers) nothing is charged.
// The charge is Σ class × price to the micro-dollar (a reference computed here, in BigInt), from the
// simulator's own report. On main (bfd2448) every client close and every whole reply cut after the
// headers settled at 0, and a cut Anthropic stream billed its cache writes at the plain input price.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelSpec } from '../../src/catalog/types.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import type { FaultSpec, SimulatedRequest } from '../../src/simulator/server.js';
import type { UsageRecord } from '../../src/billing/ledger.js';
import { EXAMPLE_MODELS, startHarness, upstreamFor, type Harness, type HarnessOptions } from '../helpers/gateway-harness.js';

const MODEL = 'outlaw-1-xploded';
const BASE = EXAMPLE_MODELS.find((m) => m.id === MODEL) as ModelSpec;
type Client = 'chat' | 'messages' | 'responses';
const CLIENTS: readonly Client[] = ['chat', 'messages', 'responses'];
const UPSTREAMS: readonly UpstreamFormatName[] = ['openai', 'anthropic', 'gemini'];

/** Micro-USD per 1M tokens: each class its own price, so a token billed in the wrong class shows. */
const PRICES = { input: 3_000_000, output: 15_000_000, cacheRead: 300_000, cacheWrite5m: 3_750_000, cacheWrite1h: 6_000_000 };
const PRICING = { input: '3', output: '15', cacheRead: '0.3', cacheWrite5m: '3.75', cacheWrite1h: '6' };
const PROMPT = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');

interface Classes {
  input: number;
  read: number;
  write5m: number;
  write1h: number;
  output: number;
}

/** Σ class × price, rounded up once to the micro-USD. */
function expectedCost(u: Classes): number {
  const uncached = u.input - u.read - u.write5m - u.write1h;
  const scaled =
    BigInt(uncached) * BigInt(PRICES.input) +
    BigInt(u.read) * BigInt(PRICES.cacheRead) +
    BigInt(u.write5m) * BigInt(PRICES.cacheWrite5m) +
    BigInt(u.write1h) * BigInt(PRICES.cacheWrite1h) +
    BigInt(u.output) * BigInt(PRICES.output);
  return Number((scaled + 999_999n) / 1_000_000n);
}

const classesOf = (r: UsageRecord): Classes => ({ input: r.usage.input, read: r.usage.cachedInput, write5m: r.usage.cacheWrite5m ?? 0, write1h: r.usage.cacheWrite1h ?? 0, output: r.usage.output });

function request(h: Harness, client: Client, stream: boolean, extra: Record<string, unknown> = {}): { url: string; init: RequestInit } {
  const shapes: Record<Client, { path: string; headers: Record<string, string>; body: Record<string, unknown> }> = {
    chat: { path: '/v1/chat/completions', headers: { authorization: `Bearer ${h.key}` }, body: { model: MODEL, max_tokens: 256, messages: [{ role: 'user', content: PROMPT }], stream } },
    messages: {
      path: '/v1/messages',
      headers: { 'x-api-key': h.key, 'anthropic-version': '2023-06-01' },
      body: { model: MODEL, max_tokens: 256, messages: [{ role: 'user', content: PROMPT }], stream },
    },
    responses: { path: '/v1/responses', headers: { authorization: `Bearer ${h.key}` }, body: { model: MODEL, max_output_tokens: 256, input: PROMPT, stream } },
  };
  const r = shapes[client];
  return { url: `${h.baseUrl}${r.path}`, init: { method: 'POST', headers: { 'content-type': 'application/json', ...r.headers }, body: JSON.stringify({ ...r.body, ...extra }) } };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One call in flight: the upstream's view of it, and the client's abort. */
interface InFlight {
  sim: SimulatedRequest;
  abort: AbortController;
  answer: Promise<Response | undefined>;
}

/**
 * Sends one request with `fault` on its upstream call and waits until the upstream holds it (`stalled`),
 * or merely has it (`arrived`, for faults that never answer). Calls are started one at a time, so each
 * fault meets its own request; they then run concurrently.
 */
async function start(h: Harness, client: Client, stream: boolean, fault: FaultSpec, until: 'stalled' | 'arrived' | 'none' = 'stalled'): Promise<InFlight> {
  const known = h.simulator.requests.length;
  h.simulator.injectFault(fault);
  const abort = new AbortController();
  const { url, init } = request(h, client, stream);
  const answer = fetch(url, { ...init, signal: abort.signal }).then(
    (res) => res,
    () => undefined,
  );
  const sim = await h.simulator.waitForRequest((r) => r.id > known && (until !== 'stalled' || r.stalled), 10_000);
  return { sim, abort, answer };
}

/** The client closes: abort, and read what came (a stream's partial body is dropped with the socket). */
async function clientCloses(call: InFlight): Promise<void> {
  // What the upstream wrote before it stalled is in the gateway's hands before the client's close reaches it.
  await sleep(50);
  call.abort.abort();
  const res = await call.answer;
  await res?.text().catch(() => undefined);
}

async function recordOf(h: Harness, sim: SimulatedRequest): Promise<UsageRecord> {
  const requestId = String(sim.headers['x-request-id']);
  await h.settled();
  const all = await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 });
  const rec = all.find((r) => r.requestId === requestId);
  expect(rec, `usage record of ${requestId}`).toBeDefined();
  return rec as UsageRecord;
}

type Cut = 'first byte' | 'acknowledged' | 'mid-answer';

/** Where the upstream holds its reply for the client (or the deadline, or the drain) to end the exchange there. */
function stallAt(stream: boolean, cut: Cut): FaultSpec {
  if (cut === 'first byte') return { stallAt: 'headers' };
  if (!stream) return { stallAt: 'mid-body' };
  // 1: past the upstream's first event (OpenAI's role chunk, Anthropic's message_start, Gemini's first
  // chunk); 6: a few tokens into the answer.
  return { stallAfterChunks: cut === 'acknowledged' ? 1 : 6 };
}

/**
 * What the exchange must be charged for: the upstream's own prompt report when one came before the end
 * (a stream's message_start or chunk usage; an OpenAI stream reports only at its end, a whole reply only
 * in its body), else the prompt's token count, which for these prompts is the simulator's own count (the
 * same tokenizer and per-message tokens); and the output the upstream sent before the end.
 */
function expectedUsage(upstream: UpstreamFormatName, stream: boolean, cut: Cut, sim: SimulatedRequest): Classes {
  const reported = stream && cut !== 'first byte' && upstream !== 'openai';
  if (reported && upstream === 'anthropic') expect(Math.min(sim.cachedInputTokens, sim.cacheWrite5mTokens, sim.cacheWrite1hTokens)).toBeGreaterThan(0);
  if (reported && upstream === 'gemini') expect(sim.cachedInputTokens).toBeGreaterThan(0);
  return {
    input: sim.inputTokens,
    read: reported ? sim.cachedInputTokens : 0,
    write5m: reported ? sim.cacheWrite5mTokens : 0,
    write1h: reported ? sim.cacheWrite1hTokens : 0,
    output: sim.outputTokensSent,
  };
}

async function expectCharged(h: Harness, call: InFlight, expected: Classes, status: string): Promise<void> {
  expect(call.sim.status).toBe(200);
  const rec = await recordOf(h, call.sim);
  expect({ status: rec.status, ...classesOf(rec) }).toEqual({ status, ...expected });
  expect(expected.input).toBeGreaterThan(0);
  expect(rec.cost).toBe(expectedCost(expected));
}

async function expectFree(h: Harness, call: InFlight, status: string): Promise<void> {
  const rec = await recordOf(h, call.sim);
  expect(call.sim.status === 200).toBe(false);
  expect({ status: rec.status, cost: rec.cost, input: rec.usage.input, output: rec.usage.output }).toEqual({ status, cost: 0, input: 0, output: 0 });
}

/** The model at PRICES, served by the simulator in `format`, and a cache report of a fifth read, a fifth written for 5 minutes, a fifth for 1 hour. */
function harnessFor(format: UpstreamFormatName, extra: Partial<HarnessOptions> = {}): Promise<Harness> {
  return startHarness({
    upstreamFormat: format,
    simulator: { cacheReport: ({ inputTokens }) => ({ read: Math.floor(inputTokens / 5), write5m: Math.floor(inputTokens / 5), write1h: Math.floor(inputTokens / 5) }) },
    models: (models, sim) => models.map((m) => (m.id === MODEL ? { ...BASE, pricing: PRICING, upstreams: [upstreamFor(format, sim, `sim-${MODEL}`)] } : m)),
    ...extra,
  });
}

describe.each(UPSTREAMS)('a %s-format upstream', (upstream) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harnessFor(upstream);
  });
  afterAll(async () => {
    await h?.close();
  });

  for (const client of CLIENTS) {
    for (const stream of [true, false]) {
      const mode = stream ? 'streamed' : 'whole';
      const cuts: Cut[] = stream ? ['first byte', 'acknowledged', 'mid-answer'] : ['first byte', 'mid-answer'];
      for (const cut of cuts) {
        it(`${client} client, ${mode}, the client closes at ${cut}: the prompt and the output so far, to the micro-dollar`, async () => {
          const call = await start(h, client, stream, stallAt(stream, cut));
          await clientCloses(call);
          const sim = await h.simulator.waitForRequest((r) => r.id === call.sim.id && (r.aborted || r.finished), 10_000);
          await expectCharged(h, call, expectedUsage(upstream, stream, cut, sim), 'client_cancelled');
        });
      }

      it(`${client} client, ${mode}, the upstream drops the connection mid-answer: charged as accepted, recorded as upstream_failed`, async () => {
        const call = await start(h, client, stream, stream ? { cutAfterChunks: 6 } : { cutMidBody: true }, 'none');
        const res = await call.answer;
        await res?.text().catch(() => undefined);
        await expectCharged(h, call, expectedUsage(upstream, stream, 'mid-answer', call.sim), 'upstream_failed');
      });
    }

    it(`${client} client: before the upstream accepted, nothing is charged (an upstream 500; the client gone before the headers)`, async () => {
      const failed = await start(h, client, true, { status: 500, times: 3 }, 'none');
      await (await failed.answer)?.text();
      h.simulator.clearFaults();
      await expectFree(h, failed, 'upstream_failed');
      const hung = await start(h, client, false, { hang: true }, 'arrived');
      await clientCloses(hung);
      await expectFree(h, hung, 'client_cancelled');
    });
  }
});

describe.each(UPSTREAMS)('a %s-format upstream: the deadline and the drain end accepted exchanges', (upstream) => {
  it('each client format, streamed and whole: timed_out, then shutdown_cut, each charged its prompt and output so far; free before the headers', async () => {
    const h = await harnessFor(upstream, { config: { requestTimeoutMs: 2500, drainTimeoutMs: 300 } });
    try {
      // The deadline: every exchange held mid-answer (and one before the headers) until it passes.
      const timed: Array<{ call: InFlight; stream: boolean }> = [];
      for (const client of CLIENTS) for (const stream of [true, false]) timed.push({ call: await start(h, client, stream, { ...stallAt(stream, 'mid-answer'), stallMs: 20_000 }), stream });
      const neverAnswered = await start(h, 'chat', true, { hang: true }, 'arrived');
      await Promise.all([...timed.map((t) => t.call.answer.then((r) => r?.text())), neverAnswered.answer.then((r) => r?.text())]);
      for (const { call, stream } of timed) await expectCharged(h, call, expectedUsage(upstream, stream, 'mid-answer', call.sim), 'timed_out');
      await expectFree(h, neverAnswered, 'timed_out');

      // The drain bound: the same, ended by the gateway's shutdown.
      const cut: Array<{ call: InFlight; stream: boolean }> = [];
      for (const client of CLIENTS) for (const stream of [true, false]) cut.push({ call: await start(h, client, stream, { ...stallAt(stream, 'mid-answer'), stallMs: 20_000 }), stream });
      const notYet = await start(h, 'messages', false, { hang: true }, 'arrived');
      await h.gateway.close();
      for (const { call, stream } of cut) await expectCharged(h, call, expectedUsage(upstream, stream, 'mid-answer', call.sim), 'shutdown_cut');
      await expectFree(h, notYet, 'shutdown_cut');
    } finally {
      await h.close();
    }
  }, 30_000);
});

describe('the cache-write case of the issue: a messages stream with a 100,000-token cached system block', () => {
  const TPM = 10_000_000;
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      upstreamFormat: 'anthropic',
      // The simulator's own prompt cache: each cache_control breakpoint is written, then read.
      simulator: { promptCache: true },
      models: (models, sim) => models.map((m) => (m.id === MODEL ? { ...BASE, pricing: PRICING, upstreams: [upstreamFor('anthropic', sim, `sim-${MODEL}`)] } : m)),
      // A window no test run crosses, so the token counts of all three calls share it.
      config: { rateLimitWindowMs: 3_600_000 },
    });
    await h.backend.accounts.setKeyRateLimits(h.accountId, h.keyId, { tokensPerMinute: TPM });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** 100,000 tokens of one word (each a single o200k token), the 1,000-token prompt's user turn of 996 (+4 for the message). */
  const system = (word: string, ttl?: '1h') => [{ type: 'text', text: ` ${word}`.repeat(100_000), cache_control: { type: 'ephemeral', ...(ttl === undefined ? {} : { ttl }) } }];
  const user = ' river'.repeat(996);

  /** Streams the request, reads until `until` has arrived, and closes. Returns the record and the tokens the answer's headers said were left. */
  async function readUntilAndClose(body: Record<string, unknown>, fault: FaultSpec, until: RegExp): Promise<{ rec: UsageRecord; sim: SimulatedRequest; remaining: number }> {
    const known = h.simulator.requests.length;
    h.simulator.injectFault(fault);
    const abort = new AbortController();
    const res = await fetch(`${h.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': h.key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 256, stream: true, messages: [{ role: 'user', content: user }], ...body }),
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let seen = '';
    while (!until.test(seen)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before ${String(until)}`);
      seen += decoder.decode(value, { stream: true });
    }
    abort.abort();
    const sim = await h.simulator.waitForRequest((r) => r.id > known && (r.aborted || r.finished), 10_000);
    return { rec: await recordOf(h, sim), sim, remaining: Number(res.headers.get('anthropic-ratelimit-tokens-remaining')) };
  }

  it('closed after message_start: 1,000 input and 100,000 5-minute writes at their prices; after the first text delta: the 1-hour writes and the token; a later read at the read price; the token limit keeps the prompt', async () => {
    const first = await readUntilAndClose({ system: system('the') }, { stallAfterChunks: 1 }, /event: message_start/);
    expect({ sim: [first.sim.inputTokens, first.sim.cacheWrite5mTokens] }).toEqual({ sim: [101_000, 100_000] });
    const firstUsage = { input: 101_000, read: 0, write5m: 100_000, write1h: 0, output: 0 };
    expect({ status: first.rec.status, ...classesOf(first.rec) }).toEqual({ status: 'client_cancelled', ...firstUsage });
    // 1,000 × 3 + 100,000 × 3.75 USD per million tokens.
    expect(first.rec.cost).toBe(378_000);
    expect(first.rec.cost).toBe(expectedCost(firstUsage));

    const second = await readUntilAndClose({ system: system('stone', '1h') }, { stallAfterChunks: 4 }, /"type":"text_delta"/);
    const secondUsage = { input: 101_000, read: 0, write5m: 0, write1h: 100_000, output: 1 };
    expect({ status: second.rec.status, ...classesOf(second.rec) }).toEqual({ status: 'client_cancelled', ...secondUsage });
    // 1,000 × 3 + 100,000 × 6 + 1 × 15.
    expect(second.rec.cost).toBe(603_015);
    expect(second.rec.cost).toBe(expectedCost(secondUsage));

    const third = await readUntilAndClose({ system: system('the') }, { stallAfterChunks: 1 }, /event: message_start/);
    const thirdUsage = { input: 101_000, read: 100_000, write5m: 0, write1h: 0, output: 0 };
    expect({ status: third.rec.status, ...classesOf(third.rec) }).toEqual({ status: 'client_cancelled', ...thirdUsage });
    // 1,000 × 3 + 100,000 × 0.3.
    expect(third.rec.cost).toBe(33_000);

    // Each answer's headers count the window's tokens after its own reservation: the first and third
    // requests reserve the same, so what the window lost between them is what the first two used. The
    // settlements gave back the unused output, never the prompt.
    expect(first.remaining - third.remaining).toBe(101_000 + 101_001);
    expect(first.remaining).toBeLessThan(TPM);
  }, 30_000);
});
