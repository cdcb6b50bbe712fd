// The worst case counts every byte forwarded upstream (issue 11): fields the decoders never knew (a
// document's title, a structured-output schema, an assistant's reasoning_content) used to ride along
// uncounted, so a 0.01 USD balance was served a request billed at 0.10 USD. And every path (both
// pass-throughs, both cross-format directions) forwards exactly the output limit it reserved.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';

// 2.50 USD per million input tokens: 0.01 USD buys 4,000 input tokens at most.
const MODEL = 'glm-5.3-xploded';
const SMALL_BALANCE = 10_000;
const PADDING = 'x'.repeat(40_000);

const harnesses: Partial<Record<UpstreamFormatName, Harness>> = {};
const harness = (f: UpstreamFormatName): Harness => harnesses[f] as Harness;

beforeAll(async () => {
  harnesses.openai = await startHarness({ upstreamFormat: 'openai', balanceMicros: SMALL_BALANCE });
  harnesses.anthropic = await startHarness({ upstreamFormat: 'anthropic', balanceMicros: SMALL_BALANCE });
});
afterAll(async () => {
  await harnesses.openai?.close();
  await harnesses.anthropic?.close();
});

async function send(h: Harness, client: UpstreamFormatName, body: Record<string, unknown>): Promise<{ status: number; json: { error?: { code?: string; type?: string } } }> {
  const path = client === 'openai' ? '/v1/chat/completions' : '/v1/messages';
  const auth: Record<string, string> = client === 'openai' ? { authorization: `Bearer ${h.key}` } : { 'x-api-key': h.key, 'anthropic-version': '2023-06-01' };
  const res = await fetch(`${h.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as { error?: { code?: string; type?: string } } };
}

// Each body is small by the old decoders' count (a few dozen bytes of text) and 40 KB on the wire.
const UNCOUNTED: Array<[string, UpstreamFormatName, Record<string, unknown>]> = [
  [
    'a document title',
    'anthropic',
    {
      model: MODEL,
      max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'short' }, title: PADDING }, { type: 'text', text: 'summarise' }] }],
    },
  ],
  [
    'output_config.format.schema',
    'anthropic',
    {
      model: MODEL,
      max_tokens: 10,
      messages: [{ role: 'user', content: 'answer' }],
      output_config: { format: { type: 'json_schema', schema: { type: 'object', description: PADDING, properties: { a: { type: 'string' } } } } },
    },
  ],
  [
    'an assistant reasoning_content',
    'openai',
    {
      model: MODEL,
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'ok', reasoning_content: PADDING },
        { role: 'user', content: 'go on' },
      ],
    },
  ],
];

describe('the reservation covers every forwarded byte', () => {
  for (const upstream of ['openai', 'anthropic'] as const) {
    it.each(UNCOUNTED)(`%s (%s client, ${upstream} upstream): refused with 402 on a 0.01 USD balance if it is forwarded`, async (_name, client, body) => {
      const h = harness(upstream);
      h.simulator.clearLog();
      const before = await h.backend.ledger.balance(h.accountId);
      const r = await send(h, client, body);
      const forwarded = h.simulator.requests.some((req) => JSON.stringify(req.body).includes(PADDING));
      if (r.status === 200) {
        // Served only when the translation for this upstream drops the field: then it was never sent.
        expect(forwarded).toBe(false);
        return;
      }
      expect(r.status).toBe(402);
      expect(r.json.error?.code ?? (r.json as { error?: { type?: string } }).error?.type).toMatch(/insufficient_balance|billing_error/);
      expect(h.simulator.requests).toHaveLength(0);
      expect(await h.backend.ledger.balance(h.accountId)).toEqual(before);
    });
  }

  it('still serves the same request without the padding on that balance', async () => {
    const h = harness('openai');
    const r = await send(h, 'openai', { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'ok', reasoning_content: 'brief' }, { role: 'user', content: 'go on' }] });
    expect(r.status).toBe(200);
  });
});

describe('every path forwards exactly the reserved output limit', () => {
  let big: Partial<Record<UpstreamFormatName, Harness>> = {};
  beforeAll(async () => {
    big = {
      openai: await startHarness({ upstreamFormat: 'openai' }),
      anthropic: await startHarness({ upstreamFormat: 'anthropic' }),
    };
  });
  afterAll(async () => {
    await big.openai?.close();
    await big.anthropic?.close();
  });

  const paths = (['openai', 'anthropic'] as const).flatMap((client) => (['openai', 'anthropic'] as const).map((upstream) => [client, upstream] as const));
  it.each(paths)('%s client, %s upstream: a max_tokens above the context window is clamped to it', async (client, upstream) => {
    const h = big[upstream] as Harness;
    const model = h.catalog.current().byId.get('outlaw-1-xploded');
    if (model === undefined) throw new Error('model missing');
    h.simulator.clearLog();
    const r = await send(h, client, { model: model.id, max_tokens: model.contextWindow * 3, messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(200);
    const sent = h.simulator.requests.at(-1)?.body as Record<string, unknown>;
    const limit = sent.max_completion_tokens ?? sent.max_tokens;
    expect(limit).toBe(model.contextWindow);
    // The settled hold was for exactly that limit: the request's usage record says what was charged,
    // and nothing is left held.
    await h.settled();
    expect((await h.backend.ledger.balance(h.accountId)).held).toBe(0);
  });
});
