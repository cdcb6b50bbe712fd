// POST /v1/responses with the official openai client's responses.create, against an OpenAI-format and
// an Anthropic-format upstream (the simulator), over a gateway whose record is a real PostgreSQL:
// non-stream and stream (every event numbered in order, the terminal event's output equal to the
// items streamed), a function tool round trip continued with previous_response_id, GET / DELETE /
// input_items of a stored response, another account's response not found, clear 400s in the
// Responses error shape that charge nothing, hosted tools dropped with a header; every served request
// is charged exactly its reported usage at the catalog's prices.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';
import { EXAMPLE_MODELS, startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { until } from './e2e-support.js';

const tdb = useTestDatabase('responses');
const MODEL = 'outlaw-1-xploded';
const pricing = EXAMPLE_MODELS.find((m) => m.id === MODEL)?.pricing;
const prices = { input: usdPerMillionToMicros(pricing?.input ?? '0'), output: usdPerMillionToMicros(pricing?.output ?? '0'), display: { input: '', output: '' } };
const WEATHER = { type: 'function' as const, name: 'get_weather', description: 'Weather by city', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };

describe.each(['openai', 'anthropic'] as const)('the Responses API over a %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  let client: OpenAI;

  beforeAll(async () => {
    h = await startHarness({ upstreamFormat, record: tdb.db });
    client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The charge of one request once settled, and what its reported usage costs. */
  async function expectCharged(requestId: string | null, usage: { input_tokens: number; output_tokens: number; input_tokens_details: { cached_tokens: number }; output_tokens_details: { reasoning_tokens: number } } | null | undefined): Promise<void> {
    expect(requestId).toBeTruthy();
    expect(usage).toBeTruthy();
    const record = await until(
      'the settlement',
      async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 50 })).find((r) => r.requestId === requestId),
      10_000,
    );
    const expected = costMicros({ input: usage?.input_tokens ?? 0, output: usage?.output_tokens ?? 0, cachedInput: usage?.input_tokens_details.cached_tokens ?? 0, reasoning: usage?.output_tokens_details.reasoning_tokens ?? 0 }, prices);
    expect(expected).toBeGreaterThan(0);
    expect(record.cost).toBe(expected);
  }

  it('answers without streaming: a message item, usage with total_tokens, charged exactly', async () => {
    const { data, response } = await client.responses.create({ model: MODEL, input: 'Say hello.', max_output_tokens: 60 }).withResponse();
    expect(data).toMatchObject({ object: 'response', status: 'completed', model: MODEL });
    expect(data.id).toMatch(/^resp_/);
    expect(data.output_text.length).toBeGreaterThan(0);
    const message = data.output.find((o) => o.type === 'message');
    expect(message).toMatchObject({ role: 'assistant', status: 'completed' });
    expect(data.usage?.total_tokens).toBe((data.usage?.input_tokens ?? 0) + (data.usage?.output_tokens ?? 0));
    await expectCharged(response.headers.get('x-request-id'), data.usage);
  });

  it('streams the full event sequence, numbered in order, ending in response.completed with every item', async () => {
    const { data: stream, response } = await client.responses.create({ model: MODEL, input: 'Tell me something.', stream: true }).withResponse();
    const events: Array<{ type: string; sequence_number: number }> = [];
    let text = '';
    let final: OpenAI.Responses.Response | undefined;
    for await (const e of stream) {
      events.push(e);
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (e.type === 'response.completed') final = e.response;
    }
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.slice(0, 2).map((e) => e.type)).toEqual(['response.created', 'response.in_progress']);
    expect(events[events.length - 1]?.type).toBe('response.completed');
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['response.output_item.added', 'response.content_part.added', 'response.output_text.done', 'response.output_item.done']));
    expect(text.length).toBeGreaterThan(0);
    const message = final?.output.find((o) => o.type === 'message');
    expect(message?.type === 'message' ? message.content.map((c) => (c.type === 'output_text' ? c.text : '')).join('') : undefined).toBe(text);
    await expectCharged(response.headers.get('x-request-id'), final?.usage);
    // The openai SDK's stream helper assembles the same.
    const helper = await client.responses.stream({ model: MODEL, input: 'Again.' }).finalResponse();
    expect(helper.status).toBe('completed');
    expect(helper.output_text.length).toBeGreaterThan(0);
  });

  it('a function tool round trip continued with previous_response_id; the stored response can be read, listed and deleted', async () => {
    const first = await client.responses.create({ model: MODEL, input: 'Weather in Oslo?', tools: [WEATHER] }).withResponse();
    const call = first.data.output.find((o) => o.type === 'function_call');
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', status: 'completed' });
    if (call?.type !== 'function_call') throw new Error('no call');
    expect(call.id).toMatch(/^fc_/);
    expect(JSON.parse(call.arguments)).toBeTypeOf('object');
    await expectCharged(first.response.headers.get('x-request-id'), first.data.usage);

    const second = await client.responses
      .create({ model: MODEL, previous_response_id: first.data.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temperature_c": 7}' }], tools: [WEATHER] })
      .withResponse();
    expect(second.data.status).toBe('completed');
    expect(second.data.previous_response_id).toBe(first.data.id);
    expect(second.data.output_text.length).toBeGreaterThan(0);
    // The upstream saw the whole conversation: the earlier call and its output, not only the new item.
    const upstream = h.simulator.requests[h.simulator.requests.length - 1];
    expect(JSON.stringify(upstream?.body)).toContain('get_weather');
    expect(JSON.stringify(upstream?.body)).toContain('temperature_c');
    await expectCharged(second.response.headers.get('x-request-id'), second.data.usage);

    const fetched = await client.responses.retrieve(second.data.id);
    expect(fetched.id).toBe(second.data.id);
    expect(fetched.output_text).toBe(second.data.output_text);
    const items = await client.responses.inputItems.list(second.data.id);
    expect(items.data.map((i) => i.type)).toEqual(['function_call_output']);
    // Another account's key finds nothing.
    const other = await h.backend.accounts.createAccount('other');
    const { secret } = await h.backend.accounts.createKey(other.id);
    const stranger = new OpenAI({ apiKey: secret, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    await expect(stranger.responses.retrieve(second.data.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.create({ model: MODEL, previous_response_id: second.data.id, input: 'and?' })).rejects.toMatchObject({ status: 404, param: 'previous_response_id' });
    await client.responses.delete(second.data.id);
    await expect(client.responses.retrieve(second.data.id)).rejects.toMatchObject({ status: 404 });
  });

  it('bad input is a 400 in the Responses error shape and charges nothing; a declared hosted tool is dropped and named', async () => {
    const before = (await h.backend.ledger.balance(h.accountId)).balance;
    await expect(client.responses.create({ model: MODEL, input: [{ type: 'mystery_item' } as never] })).rejects.toMatchObject({ status: 400, param: 'input[0].type' });
    await expect(client.responses.create({ model: MODEL, input: 'hi', tools: [{ type: 'web_search' }], tool_choice: { type: 'web_search' } as never })).rejects.toMatchObject({
      status: 400,
      param: 'tool_choice',
    });
    await expect(client.responses.create({ model: MODEL, input: [{ type: 'item_reference', id: 'msg_nope' }] })).rejects.toMatchObject({ status: 400, param: 'input[0]' });
    await expect(client.responses.create({ model: MODEL, input: 'hi', tools: [{ type: 'web_search' }], include: ['web_search_call.action.sources'] })).rejects.toMatchObject({
      status: 400,
      param: 'include',
      message: expect.stringMatching(/web_search/),
    });
    await expect(client.responses.create({ model: 'no-such-model', input: 'hi' })).rejects.toMatchObject({ status: 404 });
    expect((await h.backend.ledger.balance(h.accountId)).balance).toBe(before);
    const { data, response } = await client.responses.create({ model: MODEL, input: 'Search the web for nothing.', tools: [{ type: 'web_search' }, WEATHER] }).withResponse();
    expect(response.headers.get('x-tollgate-dropped-tools')).toBe('web_search');
    expect(data.status).toBe('completed');
  });

  it('a stream cut by the upstream ends with an error event then response.failed, never response.completed', async () => {
    h.simulator.injectFault({ cutAfterChunks: 4, match: { model: `sim-${MODEL}` } });
    const { data: stream, response } = await client.responses.create({ model: MODEL, input: 'A long story, please.', stream: true }).withResponse();
    const types: string[] = [];
    let failed: OpenAI.Responses.Response | undefined;
    try {
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === 'response.failed') failed = e.response;
      }
    } catch {
      // An SDK version may turn the error event into an exception; what came before was collected.
    }
    expect(types).not.toContain('response.completed');
    expect(types.slice(-2)).toEqual(['error', 'response.failed']);
    expect(failed?.status).toBe('failed');
    expect(failed?.error?.message).toMatch(/upstream stream ended/);
    const requestId = response.headers.get('x-request-id');
    const record = await until('the settlement', async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 50 })).find((r) => r.requestId === requestId), 10_000);
    expect(record.status).toBe('upstream_failed');
  });

  it('reasoning round-trips through a signed encrypted_content; a tampered one is dropped, not forwarded', async () => {
    const REASONER = 'glm-5.3-xploded';
    const first = await client.responses.create({ model: REASONER, input: 'Think, then answer.', reasoning: { effort: 'low', summary: 'auto' }, include: ['reasoning.encrypted_content'], store: false });
    const reasoning = first.output.find((o) => o.type === 'reasoning');
    if (reasoning?.type !== 'reasoning') throw new Error('no reasoning item');
    expect(reasoning.summary[0]?.text.length ?? 0).toBeGreaterThan(0);
    expect(reasoning.encrypted_content).toMatch(/^tg1\./);
    const history = (enc: string) => [
      { role: 'user' as const, content: 'Think, then answer.' },
      { type: 'reasoning' as const, id: reasoning.id, summary: reasoning.summary, encrypted_content: enc },
      { role: 'assistant' as const, content: first.output_text },
      { role: 'user' as const, content: 'And now?' },
    ];
    await client.responses.create({ model: REASONER, input: history(reasoning.encrypted_content ?? ''), reasoning: { effort: 'low' }, store: false });
    const sent = JSON.stringify(h.simulator.requests[h.simulator.requests.length - 1]?.body);
    // The upstream got its own reasoning back (Anthropic: the thinking block with its signature).
    expect(sent).toContain(reasoning.summary[0]?.text.slice(0, 30) ?? '');
    const tampered = `${(reasoning.encrypted_content ?? '').slice(0, -4)}AAAA`;
    await client.responses.create({ model: REASONER, input: history(tampered), reasoning: { effort: 'low' }, store: false });
    const sentTampered = JSON.stringify(h.simulator.requests[h.simulator.requests.length - 1]?.body);
    expect(sentTampered).not.toContain(reasoning.summary[0]?.text.slice(0, 30) ?? '');
  });

  it('past the balance: 402 naming max_output_tokens, in the Responses error shape', async () => {
    const poor = await h.backend.accounts.createAccount('poor');
    await h.backend.ledger.credit(poor.id, 200, `poor-start-${poor.id}`);
    const { secret } = await h.backend.accounts.createKey(poor.id);
    const broke = new OpenAI({ apiKey: secret, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    const err = (await broke.responses.create({ model: MODEL, input: 'hi', max_output_tokens: 100_000 }).catch((e: unknown) => e)) as { status: number; code: string; message: string; error: { max_output_tokens_hint?: number } };
    expect(err.status).toBe(402);
    expect(err.code).toBe('insufficient_balance');
    expect(err.message).toMatch(/max_output_tokens \d+ or less/);
    // Nothing was charged and nothing is held.
    expect(await h.backend.ledger.balance(poor.id)).toEqual({ balance: 200, held: 0 });
  });
});
