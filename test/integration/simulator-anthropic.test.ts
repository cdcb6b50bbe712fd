import Anthropic from '@anthropic-ai/sdk';
import AnthropicV0 from 'anthropic-sdk-v0';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';
import { countTokens } from '../../src/simulator/tokenizer.js';

let sim: Simulator;
let client: Anthropic;

beforeAll(async () => {
  sim = await startSimulator({ reasoningModels: ['sim-reasoner'] });
  client = new Anthropic({ apiKey: 'sk-ant-upstream', baseURL: sim.anthropicBaseUrl, maxRetries: 0 });
});
afterAll(() => sim.close());

const weather = {
  name: 'get_weather',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' }, opts: { type: 'object', properties: { metric: { type: 'boolean' } }, required: ['metric'] } }, required: ['city', 'opts'] },
};
const time = { name: 'get_time', input_schema: { type: 'object' as const, properties: {} } };

type Event = { event: string; data: Record<string, unknown> };
async function rawStream(body: object, query = ''): Promise<Event[]> {
  const res = await fetch(`${sim.url}/v1/messages${query}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  const frames = (await res.text()).split('\n\n').filter((f) => f !== '');
  return frames.map((f) => {
    const m = /^event: (\w+)\ndata: (.*)$/s.exec(f);
    expect(m, f).not.toBeNull();
    const data = JSON.parse(m![2]!) as Record<string, unknown>;
    expect(data.type).toBe(m![1]);
    return { event: m![1]!, data };
  });
}

describe('simulator Anthropic messages', () => {
  it('answers non-streaming with honest usage and records the credential header', async () => {
    const msg = await client.messages.create({ model: 'sim-chat', max_tokens: 100, system: 'Be terse.', messages: [{ role: 'user', content: 'Hello' }] });
    expect(msg).toMatchObject({ type: 'message', role: 'assistant', model: 'sim-chat', stop_reason: 'end_turn', stop_sequence: null });
    const block = msg.content[0]!;
    expect(block.type === 'text' && countTokens(block.text)).toBe(24);
    expect(msg.usage).toMatchObject({
      input_tokens: countTokens('Be terse.') + countTokens('Hello') + 4,
      output_tokens: 24,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    });
    // SDK 1.x sends the key as a bearer token; the log keeps every header for the gateway's tests.
    expect(sim.requests.at(-1)!.headers.authorization).toBe('Bearer sk-ant-upstream');
  });

  it('streams the exact B.4 event sequence, one token per text delta', async () => {
    const events = await rawStream({ model: 'sim-chat', max_tokens: 100, sim_reply_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, '?beta=true');
    expect(events.map((e) => e.event)).toEqual([
      'message_start', 'ping', 'content_block_start', ...Array<string>(5).fill('content_block_delta'), 'content_block_stop', 'message_delta', 'message_stop',
    ]);
    const start = events[0]!.data.message as { content: unknown[]; usage: Record<string, number> };
    expect(start.content).toEqual([]);
    expect(start.usage).toEqual({ input_tokens: countTokens('hi') + 4, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    expect(events[2]!.data).toEqual({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    const texts = events.slice(3, 8).map((e) => (e.data.delta as { text: string }).text);
    for (const t of texts) expect(countTokens(t)).toBe(1);
    expect(events[9]!.data).toMatchObject({ delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } });
  });

  it('streams through both SDK generations to a final message', async () => {
    const final = await client.messages.stream({ model: 'sim-chat', max_tokens: 10, messages: [{ role: 'user', content: 'long' }] }).finalMessage();
    expect(final.stop_reason).toBe('max_tokens');
    expect(final.usage.output_tokens).toBe(10);
    const v0 = new AnthropicV0({ apiKey: 'sk-ant-upstream', baseURL: sim.anthropicBaseUrl, maxRetries: 0 });
    const old = await v0.beta.messages.stream({ model: 'sim-chat', max_tokens: 100, messages: [{ role: 'user', content: 'long' }] }).finalMessage();
    expect(old.stop_reason).toBe('end_turn');
    expect(sim.requests.at(-1)).toMatchObject({ query: 'beta=true', path: '/v1/messages' });
    expect(sim.requests.at(-1)!.headers['x-api-key']).toBe('sk-ant-upstream');
  });

  it('calls tools (single, forced, parallel) with schema-shaped input, streamed as input_json_delta', async () => {
    const single = await client.messages.create({ model: 'sim-chat', max_tokens: 200, tools: [weather, time], messages: [{ role: 'user', content: 'weather' }] });
    expect(single.stop_reason).toBe('tool_use');
    expect(single.content).toEqual([{ type: 'tool_use', id: expect.stringMatching(/^toolu_/) as unknown, name: 'get_weather', input: { city: 'example', opts: { metric: true } } }]);

    const forced = await client.messages.create({ model: 'sim-chat', max_tokens: 200, tools: [weather, time], tool_choice: { type: 'tool', name: 'get_time' }, messages: [{ role: 'user', content: 'x' }] });
    expect(forced.content.map((b) => b.type === 'tool_use' && b.name)).toEqual(['get_time']);

    const par = await client.messages.stream({ model: 'sim-chat', max_tokens: 200, tools: [weather, time], messages: [{ role: 'user', content: 'both in parallel' }] }).finalMessage();
    expect(par.content.map((b) => b.type === 'tool_use' && b.name)).toEqual(['get_weather', 'get_time']);
    expect(par.content[1]).toMatchObject({ input: {} });

    const events = await rawStream({ model: 'sim-chat', max_tokens: 200, tools: [weather], messages: [{ role: 'user', content: 'weather' }] });
    const startBlock = events.find((e) => e.event === 'content_block_start')!;
    expect(startBlock.data.content_block).toMatchObject({ type: 'tool_use', name: 'get_weather', input: {} });
    const frags = events.filter((e) => e.event === 'content_block_delta').map((e) => e.data.delta as { type: string; partial_json: string });
    expect(frags.length).toBeGreaterThanOrEqual(2);
    for (const f of frags) expect(f.type).toBe('input_json_delta');
    expect(JSON.parse(frags.map((f) => f.partial_json).join(''))).toEqual({ city: 'example', opts: { metric: true } });

    const after = await client.messages.create({
      model: 'sim-chat',
      max_tokens: 200,
      tools: [weather],
      messages: [
        { role: 'user', content: 'weather' },
        { role: 'assistant', content: single.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: (single.content[0] as { id: string }).id, content: 'sunny' }] },
      ],
    });
    expect(after.stop_reason).toBe('end_turn');
    const text = after.content[0]!;
    expect(text.type === 'text' && text.text.startsWith('Tool result received:')).toBe(true);
    expect(after.usage.input_tokens).toBe(
      12 + countTokens('weather') + countTokens(JSON.stringify({ city: 'example', opts: { metric: true } })) + countTokens('sunny') + countTokens(JSON.stringify(weather)),
    );
  });

  it('emits a signed thinking block that verifies when echoed byte-for-byte and is refused when tampered', async () => {
    const req = { model: 'sim-reasoner', max_tokens: 2000, thinking: { type: 'enabled' as const, budget_tokens: 1024 } };
    const first = await client.messages.stream({ ...req, tools: [weather], messages: [{ role: 'user', content: 'weather' }] }).finalMessage();
    const [thinking, toolUse] = first.content;
    expect(thinking).toMatchObject({ type: 'thinking', signature: expect.stringMatching(/^[A-Za-z0-9+/=]{40,}$/) as unknown });
    expect(thinking?.type === 'thinking' && countTokens(thinking.thinking)).toBe(16);
    expect(first.usage.output_tokens).toBe(16 + countTokens('get_weather') + countTokens(JSON.stringify({ city: 'example', opts: { metric: true } })));

    const events = await rawStream({ ...req, messages: [{ role: 'user', content: 'weather' }] });
    const deltas = events.filter((e) => e.event === 'content_block_delta' && e.data.index === 0).map((e) => (e.data.delta as { type: string }).type);
    expect(deltas).toEqual([...Array<string>(16).fill('thinking_delta'), 'signature_delta']);

    const history = (block: unknown) => [
      { role: 'user' as const, content: 'weather' },
      { role: 'assistant' as const, content: [block, toolUse] as Anthropic.ContentBlockParam[] },
      { role: 'user' as const, content: [{ type: 'tool_result' as const, tool_use_id: (toolUse as { id: string }).id, content: 'ok' }] },
    ];
    const ok = await client.messages.create({ ...req, tools: [weather], messages: history(thinking) });
    expect(ok.content.some((b) => b.type === 'text' && b.text.startsWith('Tool result received:'))).toBe(true);

    const t = thinking as { thinking: string; signature: string };
    for (const bad of [{ ...t, signature: t.signature.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')) }, { ...t, thinking: t.thinking + ' ' }]) {
      const err = await client.messages.create({ ...req, tools: [weather], messages: history(bad) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      expect((err as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({
        type: 'error',
        error: { type: 'invalid_request_error', message: 'messages.1.content.0: Invalid `signature` in `thinking` block' },
      });
    }

    const adaptive = await client.messages.create({ model: 'sim-reasoner', max_tokens: 100, thinking: { type: 'adaptive' }, messages: [{ role: 'user', content: 'x' }] } as Anthropic.MessageCreateParamsNonStreaming);
    expect(adaptive.content[0]!.type).toBe('thinking');
    const notAsked = await client.messages.create({ model: 'sim-reasoner', max_tokens: 100, messages: [{ role: 'user', content: 'x' }] });
    expect(notAsked.content.map((b) => b.type)).toEqual(['text']);
  });

  it('counts tokens, lists models in the Anthropic shape, and errors in the Anthropic shape', async () => {
    const counted = await client.messages.countTokens({ model: 'sim-chat', system: 'sys', messages: [{ role: 'user', content: 'count me' }] });
    expect(counted.input_tokens).toBe(countTokens('sys') + countTokens('count me') + 4);

    const models = await fetch(`${sim.url}/v1/models?limit=1000`, { headers: { 'x-api-key': 'k', 'anthropic-version': '2023-06-01' } });
    expect(await models.json()).toEqual({
      data: [
        { type: 'model', id: 'sim-chat', display_name: 'sim-chat', created_at: '2026-01-01T00:00:00Z' },
        { type: 'model', id: 'sim-reasoner', display_name: 'sim-reasoner', created_at: '2026-01-01T00:00:00Z' },
      ],
      has_more: false,
      first_id: 'sim-chat',
      last_id: 'sim-reasoner',
    });
    const listed: string[] = [];
    for await (const m of client.models.list()) listed.push(m.id);
    expect(listed).toEqual(['sim-chat', 'sim-reasoner']);

    const noMax = await fetch(`${sim.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': 'k' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }) });
    expect(noMax.status).toBe(400);
    expect(await noMax.json()).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' } });
    expect(noMax.headers.get('request-id')).toMatch(/^req_sim_\d+$/);
  });
});
