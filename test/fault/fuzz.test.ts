// 20,000 generated requests per run, over real HTTP to a real gateway with a real Redis ledger: both
// completion endpoints, count_tokens and models, with wrong types, odd and absurd numbers, deep nesting,
// odd unicode, unknown and missing fields, bad models, bad and conflicting credentials, broken JSON.
// Whatever arrives: no 5xx, no hang, no charge for a refused request, and the books agree to the
// micro-dollar with no hold left. A failure prints the seed, so the run can be replayed.
import fc from 'fast-check';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { until } from '../e2e/e2e-support.js';

const REQUESTS = 20_000;
const CONCURRENCY = 32;
/** A response slower than this is a hang (the simulator answers valid requests in milliseconds). */
const RESPONSE_BOUND_MS = 15_000;
const MODELS = ['outlaw-1-xploded', 'glm-5.3-xploded', 'qwen3.8-27b-xploded'];

let h: Harness;
const agent = new Agent({ connections: CONCURRENCY, keepAliveTimeout: 30_000 });

beforeAll(async () => {
  // A small default reply keeps 20,000 requests quick; the usage history keeps every record.
  h = await startHarness({ ledger: 'redis', simulator: { replyTokens: 3, reasoningTokens: 2 }, usageMaxRecords: 50_000, balanceMicros: 1_000_000_000 });
});
afterAll(async () => {
  await agent.close();
  await h.close();
});

interface Sent {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body: string | undefined;
}

const oddString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '\u0000', '\uFEFF', '\uD800', '💥'.repeat(50), 'a'.repeat(5000), '{"nested":"json"}', 'sk-tg-not-a-key-but-looks-like-one'),
);
const oddNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -1, 1, 2 ** 31, 2 ** 53, 1e308, -1e308, 0.5, 1e-300, Number.MAX_SAFE_INTEGER),
);
const anyValue = fc.oneof(oddString, oddNumber, fc.boolean(), fc.constant(null), fc.jsonValue({ maxDepth: 3 }));
const content = fc.oneof(
  oddString,
  fc.array(
    fc.oneof(
      fc.record({ type: fc.constant('text'), text: oddString }),
      fc.record({ type: fc.constantFrom('image_url', 'image', 'tool_result', 'document', 'weird'), text: anyValue }, { requiredKeys: ['type'] }),
      anyValue,
    ),
    { maxLength: 4 },
  ),
  anyValue,
);
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('user', 'assistant', 'system', 'tool', 'developer'), content }),
  fc.record({ role: oddString, content }, { requiredKeys: [] }),
  anyValue,
);
const body = fc.record(
  {
    model: fc.oneof(fc.constantFrom(...MODELS), oddString, anyValue),
    messages: fc.oneof(fc.array(message, { minLength: 1, maxLength: 4 }), anyValue),
    max_tokens: fc.oneof(fc.integer({ min: 1, max: 64 }), oddNumber, anyValue),
    stream: fc.oneof(fc.boolean(), anyValue),
    sim_reply_tokens: fc.oneof(fc.integer({ min: 1, max: 5 }), oddNumber),
    temperature: anyValue,
    tools: fc.oneof(fc.array(fc.record({ type: fc.constant('function'), function: fc.record({ name: oddString, parameters: anyValue }) }), { maxLength: 2 }), anyValue),
    system: anyValue,
    extra: fc.jsonValue({ maxDepth: 4 }),
  },
  { requiredKeys: [] },
);
const rawBody = fc.oneof(
  body.map((b) => JSON.stringify(b)),
  body.map((b) => JSON.stringify(b)),
  body.map((b) => JSON.stringify(b)),
  fc.integer({ min: 10, max: 6000 }).map((d) => `${'['.repeat(d)}1${']'.repeat(d)}`),
  fc.integer({ min: 10, max: 6000 }).map((d) => `{"model":"outlaw-1-xploded","messages":${'['.repeat(d)}${']'.repeat(d)}}`),
  oddString,
  fc.constantFrom('', 'null', '[]', '{', '{"model":', '\u0000\u0001', 'true'),
);

function credentials(key: string): fc.Arbitrary<Record<string, string>> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant({ authorization: `Bearer ${key}` }) },
    { weight: 6, arbitrary: fc.constant({ 'x-api-key': key, 'anthropic-version': '2023-06-01' }) },
    { weight: 1, arbitrary: fc.constant({}) },
    { weight: 1, arbitrary: fc.constant({ authorization: `Bearer Bearer ${key}` }) },
    { weight: 1, arbitrary: fc.constant({ authorization: `Bearer ${key}`, 'x-api-key': `${key}x` }) },
    // Only what a header may carry (visible ASCII and spaces): anything else never leaves the client.
    { weight: 1, arbitrary: oddString.map((s) => ({ authorization: `Bearer ${[...s].filter((c) => c >= ' ' && c <= '~').join('')}` })) },
    { weight: 1, arbitrary: fc.constant({ authorization: `Bearer sk-tg-${'A'.repeat(40)}` }) },
  );
}

function requests(key: string, seed: number): Sent[] {
  const one = fc.oneof(
    { weight: 10, arbitrary: fc.record({ path: fc.constantFrom('/v1/chat/completions', '/v1/messages'), headers: credentials(key), body: rawBody }) },
    { weight: 2, arbitrary: fc.record({ path: fc.constant('/v1/messages/count_tokens'), headers: credentials(key), body: rawBody }) },
    { weight: 1, arbitrary: fc.record({ path: fc.constantFrom('/v1/models', '/v1/models/outlaw-1-xploded', '/v1/nope'), headers: credentials(key), body: fc.constant(undefined) }) },
  );
  return fc.sample(one, { numRuns: REQUESTS, seed }).map((r) => ({
    method: r.body === undefined ? 'GET' : 'POST',
    path: r.path,
    headers: { ...r.headers, ...(r.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: r.body,
  }));
}

interface Answer {
  sent: Sent;
  status: number;
  requestId: string | null;
  ms: number;
}

async function send(sent: Sent): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${h.baseUrl}${sent.path}`, {
    method: sent.method,
    headers: sent.headers,
    ...(sent.body === undefined ? {} : { body: sent.body }),
    signal: AbortSignal.timeout(RESPONSE_BOUND_MS),
    dispatcher: agent,
  });
  await res.arrayBuffer();
  return { sent, status: res.status, requestId: res.headers.get('x-request-id'), ms: performance.now() - started };
}

describe('fuzzed requests', () => {
  it(`${REQUESTS} generated requests: no 5xx, no hang, no charge on a refusal, the books exact`, async () => {
    const seed = Number(process.env.TOLLGATE_FUZZ_SEED ?? Date.now() % 2 ** 31);
    const all = requests(h.key, seed);
    const answers: Answer[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < all.length) {
          const sent = all[next++] as Sent;
          answers.push(await send(sent));
        }
      }),
    );
    const context = `seed ${seed} (TOLLGATE_FUZZ_SEED=${seed} replays it)`;
    expect(answers, context).toHaveLength(REQUESTS);
    const serverErrors = answers.filter((a) => a.status >= 500);
    expect(serverErrors.slice(0, 3).map((a) => ({ status: a.status, path: a.sent.path, body: a.sent.body?.slice(0, 300) })), context).toEqual([]);
    const statuses = new Map<number, number>();
    for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    // The mix reaches the gateway's every door: served requests and refusals both, in numbers.
    expect(statuses.get(200) ?? 0, context).toBeGreaterThan(REQUESTS / 50);
    expect([...statuses.entries()].filter(([s]) => s >= 400).reduce((n, [, c]) => n + c, 0), context).toBeGreaterThan(REQUESTS / 4);

    // Every settlement lands (they follow the last byte), then: the books and the refusals.
    await until('no hold is left', async () => ((await h.backend.ledger.audit(h.accountId)).holdsOutstanding === 0 ? true : undefined), 20_000);
    const audit = await h.backend.ledger.audit(h.accountId);
    expect(audit.difference, context).toBe(0);
    const usage = await h.backend.ledger.listUsage(h.accountId, { limit: 50_000 });
    const charged = new Map(usage.map((u) => [u.requestId, u.cost]));
    const refusedButCharged = answers.filter((a) => a.status >= 400 && a.requestId !== null && (charged.get(a.requestId) ?? 0) > 0);
    expect(refusedButCharged.map((a) => ({ status: a.status, body: a.sent.body?.slice(0, 300) })), context).toEqual([]);
    // And every served completion was charged once: one usage record per 200 on a completion route.
    const served = answers.filter((a) => a.status === 200 && (a.sent.path === '/v1/chat/completions' || a.sent.path === '/v1/messages'));
    for (const a of served) expect(charged.has(a.requestId ?? ''), context).toBe(true);
  }, 180_000);
});
