// The official `openai` client against models served by an Anthropic-format upstream: everything is
// translated both ways, and the charge still equals the simulator's usage to the micro-dollar.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_MODELS, startHarness, type Harness } from '../helpers/gateway-harness.js';
import { PNG_BASE64, expectChargesMatchSimulator, mark } from './e2e-support.js';

const PLAIN = 'outlaw-1-xploded';
const REASONING = 'glm-5.3-flash-xploded';

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', description: 'Local time', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
];

describe('openai client, Anthropic-format upstream', () => {
  let h: Harness;
  let client: OpenAI;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'anthropic', ledger: 'redis' });
    client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('models.list names the catalogue', async () => {
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids.sort()).toEqual(EXAMPLE_MODELS.map((m) => m.id).sort());
  });

  it('chat.completions.create, non-streaming', async () => {
    const m0 = await mark(h);
    const res = await client.chat.completions.create({ model: PLAIN, max_tokens: 200, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }] });
    expect(res.object).toBe('chat.completion');
    expect(res.model).toBe(PLAIN);
    expect(res.choices[0]!.finish_reason).toBe('stop');
    expect(res.choices[0]!.message.content!.length).toBeGreaterThan(0);
    const up = h.simulator.requests[h.simulator.requests.length - 1]!;
    expect(up.path).toBe('/v1/messages');
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    expect(res.usage!.prompt_tokens).toBe(rec!.usage.input);
    expect(res.usage!.completion_tokens).toBe(rec!.usage.output);
  });

  it('the upstream gets exactly the reserved output limit: the client\'s, capped by the context window', async () => {
    await client.chat.completions.create({ model: PLAIN, max_completion_tokens: 300, messages: [{ role: 'user', content: 'Say hello' }] });
    const small = h.simulator.requests[h.simulator.requests.length - 1]!.body as { max_tokens?: number; max_completion_tokens?: number };
    expect(small.max_tokens).toBe(300);
    expect(small.max_completion_tokens).toBeUndefined();
    // Far past the 1M-token window: forwarded as sent, the upstream could generate past the hold.
    await client.chat.completions.create({ model: PLAIN, max_tokens: 50_000_000, messages: [{ role: 'user', content: 'Say hello' }] });
    const big = h.simulator.requests[h.simulator.requests.length - 1]!.body as { max_tokens?: number };
    expect(big.max_tokens).toBeGreaterThan(0);
    expect(big.max_tokens).toBeLessThanOrEqual(1_000_000);
  });

  it('streaming with stream_options.include_usage: one usage chunk, choices empty, totals exact', async () => {
    const m0 = await mark(h);
    const stream = await client.chat.completions.create({ model: PLAIN, max_tokens: 200, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Tell me a story' }] });
    let text = '';
    let finish: string | null = null;
    const usageChunks: OpenAI.Completions.CompletionUsage[] = [];
    const ids = new Set<string>();
    for await (const chunk of stream) {
      ids.add(chunk.id);
      expect(chunk.model).toBe(PLAIN);
      if (chunk.usage) {
        expect(chunk.choices).toEqual([]);
        usageChunks.push(chunk.usage);
      }
      for (const c of chunk.choices) {
        text += c.delta.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    expect(ids.size).toBe(1);
    expect(text.length).toBeGreaterThan(0);
    expect(finish).toBe('stop');
    expect(usageChunks).toHaveLength(1);
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    expect(usageChunks[0]!.prompt_tokens).toBe(rec!.usage.input);
    expect(usageChunks[0]!.completion_tokens).toBe(rec!.usage.output);
  });

  it('streaming without include_usage sends no usage chunk and is still charged exactly', async () => {
    const m0 = await mark(h);
    const stream = await client.chat.completions.create({ model: PLAIN, max_tokens: 200, stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    let usageSeen = false;
    for await (const chunk of stream) if (chunk.usage) usageSeen = true;
    expect(usageSeen).toBe(false);
    await expectChargesMatchSimulator(h, m0, 1);
  });

  it.each([false, true])('tools round trip with parallel calls (stream=%s)', async (streamed) => {
    const m0 = await mark(h);
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather and time in Oslo, in parallel please' }];
    let calls: OpenAI.Chat.Completions.ChatCompletionMessageToolCall[];
    let finish: string | null;
    if (streamed) {
      const runner = client.chat.completions.stream({ model: PLAIN, max_tokens: 400, tools: TOOLS, messages });
      const done = await runner.finalChatCompletion();
      calls = done.choices[0]!.message.tool_calls ?? [];
      finish = done.choices[0]!.finish_reason;
    } else {
      const res = await client.chat.completions.create({ model: PLAIN, max_tokens: 400, tools: TOOLS, messages });
      calls = res.choices[0]!.message.tool_calls ?? [];
      finish = res.choices[0]!.finish_reason;
    }
    expect(finish).toBe('tool_calls');
    expect(calls.map((c) => (c.type === 'function' ? c.function.name : c.type))).toEqual(['get_weather', 'get_time']);
    for (const c of calls) {
      if (c.type !== 'function') throw new Error('expected function calls');
      expect(JSON.parse(c.function.arguments)).toEqual(expect.objectContaining({ city: expect.any(String) as unknown }));
    }
    const res2 = await client.chat.completions.create({
      model: PLAIN,
      max_tokens: 400,
      tools: TOOLS,
      messages: [
        ...messages,
        { role: 'assistant', content: null, tool_calls: calls },
        { role: 'tool', tool_call_id: calls[0]!.id, content: 'Sunny, 21 C' },
        { role: 'tool', tool_call_id: calls[1]!.id, content: '14:05' },
      ],
    });
    expect(res2.choices[0]!.finish_reason).toBe('stop');
    expect(res2.choices[0]!.message.content).toContain('Tool result received');
    // Both results reached the Anthropic upstream in one user turn, ids kept.
    const up = h.simulator.requests[h.simulator.requests.length - 1]!.body as { messages: { role: string; content: { type: string; tool_use_id?: string }[] }[] };
    const lastTurn = up.messages[up.messages.length - 1]!;
    expect(lastTurn.role).toBe('user');
    expect(lastTurn.content.filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id)).toEqual([calls[0]!.id, calls[1]!.id]);
    await expectChargesMatchSimulator(h, m0, 2);
  });

  it.each([false, true])('reasoning + tools loop (stream=%s): the continuation is one Anthropic accepts', async (streamed) => {
    const m0 = await mark(h);
    const first = { model: REASONING, max_tokens: 4000, reasoning_effort: 'low' as const, tools: TOOLS.slice(0, 1), messages: [{ role: 'user' as const, content: 'Weather in Oslo?' }] };
    const reply = streamed ? await client.chat.completions.stream(first).finalChatCompletion() : await client.chat.completions.create(first);
    const message = reply.choices[0]!.message;
    expect(reply.choices[0]!.finish_reason).toBe('tool_calls');
    const call = message.tool_calls![0]!;
    const res = await client.chat.completions.create({ ...first, messages: [...first.messages, message, { role: 'tool', tool_call_id: call.id, content: 'Rain' }] });
    expect(res.choices[0]!.finish_reason).toBe('stop');
    // Anthropic's rule: with thinking on, the tool loop's assistant turn must start with its thinking block.
    const up = h.simulator.requests[h.simulator.requests.length - 1]!.body as { thinking?: { type: string }; messages: { role: string; content: { type: string }[] }[] };
    const assistant = up.messages.find((m) => m.role === 'assistant')!;
    if (up.thinking?.type === 'enabled') expect(assistant.content[0]!.type).toBe('thinking');
    // Non-streamed replies carry thinking_blocks, so thinking stays on (the simulator checked the signature).
    if (!streamed) expect(up.thinking?.type).toBe('enabled');
    await expectChargesMatchSimulator(h, m0, 2);
  });

  it('an image on a vision model, and reasoning content on a reasoning model', async () => {
    const m0 = await mark(h);
    const img = await client.chat.completions.create({
      model: PLAIN,
      max_tokens: 100,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG_BASE64}` } }, { type: 'text', text: 'What is it?' }] }],
    });
    expect(img.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(JSON.stringify(h.simulator.requests[h.simulator.requests.length - 1]!.body)).toContain(PNG_BASE64);
    const res = await client.chat.completions.create({ model: REASONING, max_tokens: 2000, reasoning_effort: 'low', messages: [{ role: 'user', content: 'Think, then answer' }] });
    const msg = res.choices[0]!.message as typeof res.choices[0]['message'] & { reasoning_content?: string };
    expect(msg.reasoning_content?.length ?? 0).toBeGreaterThan(0);
    expect(msg.content!.length).toBeGreaterThan(0);
    await expectChargesMatchSimulator(h, m0, 2);
  });

  it('an upstream error event mid-stream becomes an OpenAI error the SDK throws; the partial output is charged', async () => {
    const m0 = await mark(h);
    h.simulator.injectFault({ errorEventAfterChunks: 6, message: 'Overloaded', times: 1 });
    const stream = await client.chat.completions.create({ model: PLAIN, max_tokens: 200, stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] });
    let text = '';
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(text.length).toBeGreaterThan(0);
    const sim = h.simulator.requests[h.simulator.requests.length - 1]!;
    await expect.poll(async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 })).length).toBe(m0.usageCount + 1);
    const [rec] = await h.backend.ledger.listUsage(h.accountId, { limit: 1 });
    expect(rec!.status).toBe('upstream_failed');
    expect(rec!.usage.output).toBe(sim.outputTokensSent);
    expect(rec!.usage.input).toBe(sim.inputTokens); // message_start told us before the failure
  });

  it.each([
    [429, OpenAI.RateLimitError, 429],
    [500, OpenAI.InternalServerError, undefined],
    [529, OpenAI.InternalServerError, 503],
  ] as const)('upstream %i -> the right OpenAI error class, nothing charged', async (status, cls, clientStatus) => {
    const before = await h.backend.ledger.balance(h.accountId);
    h.simulator.injectFault({ status, times: 5 });
    try {
      const err = await client.chat.completions.create({ model: PLAIN, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(cls);
      if (clientStatus !== undefined) expect((err as { status: number }).status).toBe(clientStatus);
    } finally {
      h.simulator.clearFaults();
    }
    await expect.poll(async () => (await h.backend.ledger.balance(h.accountId)).balance).toBe(before.balance);
  });
});
