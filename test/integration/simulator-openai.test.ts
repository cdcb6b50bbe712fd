import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';
import { countTokens } from '../../src/simulator/tokenizer.js';

let sim: Simulator;
let client: OpenAI;

beforeAll(async () => {
  sim = await startSimulator({ reasoningModels: ['sim-reasoner'] });
  client = new OpenAI({ apiKey: 'sk-upstream-test', baseURL: sim.openaiBaseUrl, maxRetries: 0 });
});
afterAll(() => sim.close());

const weather = {
  type: 'function' as const,
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city', 'days'] } },
};
const time = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };

/** Raw SSE `data:` payloads, so the exact wire shape can be asserted. */
async function rawStream(body: object): Promise<string[]> {
  const res = await fetch(`${sim.openaiBaseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer k' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/event-stream');
  const text = await res.text();
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  return text
    .split('\n\n')
    .filter((f) => f !== '')
    .map((f) => {
      expect(f.startsWith('data: ')).toBe(true);
      return f.slice(6);
    });
}

describe('simulator OpenAI chat completions', () => {
  it('answers non-streaming with honest usage, as JSON the SDK parses', async () => {
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Say something.' },
    ];
    const res = await client.chat.completions.create({ model: 'sim-chat', messages });
    expect(res.object).toBe('chat.completion');
    expect(res.model).toBe('sim-chat');
    const choice = res.choices[0]!;
    expect(choice.finish_reason).toBe('stop');
    expect(choice.message.role).toBe('assistant');
    expect(countTokens(choice.message.content!)).toBe(24);
    expect(res.usage).toMatchObject({
      prompt_tokens: countTokens('Be brief.') + countTokens('Say something.') + 8,
      completion_tokens: 24,
      total_tokens: res.usage!.prompt_tokens + 24,
      completion_tokens_details: { reasoning_tokens: 0 },
    });
    const again = await client.chat.completions.create({ model: 'sim-chat', messages });
    expect(again.choices[0]!.message.content).toBe(choice.message.content);
    const logged = sim.requests.at(-1)!;
    expect(logged.headers.authorization).toBe('Bearer sk-upstream-test');
    expect(logged).toMatchObject({ method: 'POST', path: '/v1/chat/completions', finished: true, aborted: false, outputTokensSent: 24 });
    expect(logged.inputTokens).toBe(res.usage!.prompt_tokens);
  });

  it('streams one token per chunk with the A.6 envelope and a usage chunk only when asked', async () => {
    const req = { model: 'sim-chat', messages: [{ role: 'user', content: 'stream please' }], sim_reply_tokens: 7 };
    const withUsage = (await rawStream({ ...req, stream_options: { include_usage: true } })).slice(0, -1).map((d) => JSON.parse(d) as Record<string, unknown>);
    const ids = new Set(withUsage.map((c) => `${String(c.id)}|${String(c.created)}|${String(c.model)}`));
    expect(ids.size).toBe(1);
    type Choice = { delta: Record<string, unknown>; finish_reason: string | null };
    const choices = (c: Record<string, unknown>) => c.choices as Choice[];
    expect(choices(withUsage[0]!)[0]!.delta).toEqual({ role: 'assistant', content: '' });
    const tokens = withUsage.slice(1, 8).map((c) => choices(c)[0]!.delta.content as string);
    for (const t of tokens) expect(countTokens(t)).toBe(1);
    expect(countTokens(tokens.join(''))).toBe(7);
    expect(choices(withUsage[8]!)[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    for (const c of withUsage.slice(0, 9)) expect(c.usage).toBeNull();
    expect(withUsage[9]!.choices).toEqual([]);
    expect(withUsage[9]!.usage).toMatchObject({ completion_tokens: 7 });
    expect(withUsage).toHaveLength(10);

    const without = (await rawStream(req)).slice(0, -1).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(without).toHaveLength(9);
    for (const c of without) expect('usage' in c).toBe(false);
  });

  it('streams through the official SDK helper (which checks role, finish_reason and tool-call fields)', async () => {
    const stream = client.chat.completions.stream({ model: 'sim-chat', messages: [{ role: 'user', content: 'Use it in parallel' }], tools: [weather, time] });
    const final = await stream.finalChatCompletion();
    const calls = final.choices[0]!.message.tool_calls!;
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    expect(calls.map((c) => (c.type === 'function' ? c.function.name : ''))).toEqual(['get_weather', 'get_time']);
    const first = calls[0]!;
    expect(first.type === 'function' && JSON.parse(first.function.arguments)).toEqual({ city: 'example', days: 1 });
    expect(calls[0]!.id).not.toBe(calls[1]!.id);
    expect(calls[0]!.id).toMatch(/^call_/);
  });

  it('streams tool calls as A.6 deltas: id/type/name/"" first, then 2+ argument fragments', async () => {
    const frames = (await rawStream({ model: 'sim-chat', messages: [{ role: 'user', content: 'weather?' }], tools: [weather] }))
      .slice(0, -1)
      .map((d) => JSON.parse(d) as { choices: { delta: { tool_calls?: { index: number; id?: string; type?: string; function: { name?: string; arguments: string } }[] }; finish_reason: string | null }[] });
    const deltas = frames.flatMap((f) => f.choices[0]?.delta.tool_calls ?? []);
    expect(deltas[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } });
    expect(deltas[0]!.id).toMatch(/^call_/);
    const rest = deltas.slice(1);
    expect(rest.length).toBeGreaterThanOrEqual(2);
    for (const d of rest) expect(Object.keys(d).sort()).toEqual(['function', 'index']);
    expect(JSON.parse(rest.map((d) => d.function.arguments).join(''))).toEqual({ city: 'example', days: 1 });
    expect(frames.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('honours tool_choice: forced function, none, and replies to tool results with text', async () => {
    const forced = await client.chat.completions.create({
      model: 'sim-chat',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [weather, time],
      tool_choice: { type: 'function', function: { name: 'get_time' } },
    });
    const call = forced.choices[0]!.message.tool_calls![0]!;
    expect(call.type === 'function' && call.function.name).toBe('get_time');
    expect(call.type === 'function' && call.function.arguments).toBe('{}');
    expect(forced.choices[0]!.message.content).toBeNull();

    const none = await client.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }], tools: [weather], tool_choice: 'none' });
    expect(none.choices[0]!.finish_reason).toBe('stop');

    const after = await client.chat.completions.create({
      model: 'sim-chat',
      tools: [weather],
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: call.id, content: '3 degrees' },
      ],
    });
    expect(after.choices[0]!.message.content!.startsWith('Tool result received:')).toBe(true);
    expect(after.choices[0]!.finish_reason).toBe('stop');
    expect(after.usage!.prompt_tokens).toBe(
      12 + countTokens('weather?') + countTokens('{"city":"Oslo"}') + countTokens('3 degrees') + countTokens(JSON.stringify(weather)),
    );
  });

  it('truncates at max_completion_tokens / max_tokens with finish_reason length', async () => {
    const a = await client.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 5 });
    expect(a.choices[0]!.finish_reason).toBe('length');
    expect(countTokens(a.choices[0]!.message.content!)).toBe(5);
    expect(a.usage!.completion_tokens).toBe(5);
    const b = await client.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 3 });
    expect(b.usage!.completion_tokens).toBe(3);
  });

  it('emits reasoning first on reasoning models, in reasoning_content and reasoning, counted as output', async () => {
    const res = await client.chat.completions.create({ model: 'sim-reasoner', messages: [{ role: 'user', content: 'think' }] });
    const msg = res.choices[0]!.message as unknown as { reasoning_content: string; reasoning: string; content: string };
    expect(msg.reasoning_content).toBe(msg.reasoning);
    expect(countTokens(msg.reasoning)).toBe(16);
    expect(res.usage).toMatchObject({ completion_tokens: 40, completion_tokens_details: { reasoning_tokens: 16 } });

    const off = await client.chat.completions.create({ model: 'sim-reasoner', reasoning_effort: 'none', messages: [{ role: 'user', content: 'think' }] });
    expect('reasoning' in off.choices[0]!.message).toBe(false);
    const plain = await client.chat.completions.create({ model: 'sim-chat', reasoning_effort: 'high', messages: [{ role: 'user', content: 'think' }] });
    expect(plain.usage!.completion_tokens_details!.reasoning_tokens).toBe(0);

    const frames = (await rawStream({ model: 'sim-reasoner', messages: [{ role: 'user', content: 'think' }] }))
      .slice(0, -1)
      .map((d) => JSON.parse(d) as { choices: { delta: Record<string, string> }[] });
    const reasoning = frames.map((f) => f.choices[0]!.delta).filter((d) => 'reasoning' in d);
    expect(reasoning).toHaveLength(16);
    for (const d of reasoning) expect(d.reasoning_content).toBe(d.reasoning);
    expect(frames.findIndex((f) => 'content' in f.choices[0]!.delta && f.choices[0]!.delta.content !== '')).toBeGreaterThan(16);
  });

  it('lists models in the OpenAI shape and answers errors in the OpenAI shape', async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(['sim-chat', 'sim-reasoner']);
    expect(page.data[0]).toMatchObject({ object: 'model', owned_by: 'tollgate-simulator' });

    const bad = await fetch(`${sim.openaiBaseUrl}/chat/completions`, { method: 'POST', body: '{"model":"m"}' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { type: 'invalid_request_error', param: null, code: null } });
    const broken = await fetch(`${sim.openaiBaseUrl}/chat/completions`, { method: 'POST', body: '{not json' });
    expect(broken.status).toBe(400);
    const missing = await fetch(`${sim.url}/v1/nowhere`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toContain('/v1/nowhere');
    await expect(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: -1 })).rejects.toMatchObject({ status: 400 });
  });
});
