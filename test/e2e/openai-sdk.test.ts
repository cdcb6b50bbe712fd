// The official openai client against Tollgate in front of the simulator, over loopback HTTP.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

let h: Harness;
let client: OpenAI;

beforeAll(async () => {
  h = await startHarness({ ledger: 'redis' });
  client = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => h.close());

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
  },
];

describe('openai client end to end', () => {
  it('lists the five models with prices and capability flags', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toEqual(['outlaw-1-xploded', 'glm-5.3-xploded', 'glm-5.3-flash-xploded', 'mimo-v2.6-flash-xploded', 'qwen3.8-27b-xploded']);
    const qwen = page.data[4] as unknown as Record<string, unknown>;
    expect(qwen).toMatchObject({
      object: 'model',
      owned_by: 'tollgate',
      name: 'Qwen3.8 27B Xploded',
      kind: 'Uncensored',
      context_length: 512000,
      supports_tools: true,
      supports_vision: true,
      abliterated: false,
      pricing: { input: 0.3, output: 2.4 },
    });
  });

  it('creates a completion without streaming, charging the upstream usage', async () => {
    const res = await client.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'Hello there' }] }).withResponse();
    const requestId = res.response.headers.get('x-request-id');
    expect(requestId).toMatch(/^req_/);
    expect(res.data.id).toContain(requestId);
    expect(res.data.model).toBe('outlaw-1-xploded');
    expect(res.data.choices[0]?.message.content?.length).toBeGreaterThan(0);
    const sim = h.simulator.requests.at(-1);
    expect(sim?.body).toMatchObject({ model: 'sim-outlaw-1-xploded', max_tokens: 16384 });
    expect(res.data.usage?.prompt_tokens).toBe(sim?.inputTokens);
    await h.settled();
    const [record] = await h.backend.ledger.listUsage(h.accountId, { limit: 1 });
    expect(record?.requestId).toBe(requestId);
    expect(record?.usage.output).toBe(res.data.usage?.completion_tokens);
  });

  it('streams chunk by chunk and ends with [DONE]; the usage chunk is dropped unless asked for', async () => {
    const stream = await client.chat.completions.create({ model: 'glm-5.3-flash-xploded', stream: true, messages: [{ role: 'user', content: 'Stream please' }] });
    let text = '';
    let usageSeen = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usageSeen = true;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usageSeen).toBe(false);
    // The gateway still asked the upstream for usage, to bill.
    expect(h.simulator.requests.at(-1)?.body).toMatchObject({ stream_options: { include_usage: true } });
  });

  it('passes the usage chunk when the client asks for it', async () => {
    const stream = await client.chat.completions.create({
      model: 'glm-5.3-flash-xploded',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 7,
      messages: [{ role: 'user', content: 'Usage please' }],
    });
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(usage?.completion_tokens).toBe(7);
    expect(finish).toBe('length');
  });

  it('round-trips a tool call and its result, streamed and not', async () => {
    const first = await client.chat.completions.create({ model: 'mimo-v2.6-flash-xploded', tools, messages: [{ role: 'user', content: 'Weather in Oslo?' }] });
    const call = first.choices[0]?.message.tool_calls?.[0];
    expect(first.choices[0]?.finish_reason).toBe('tool_calls');
    expect(call?.type === 'function' ? call.function.name : undefined).toBe('get_weather');
    const runner = client.chat.completions.stream({
      model: 'mimo-v2.6-flash-xploded',
      tools,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        first.choices[0]?.message as OpenAI.Chat.ChatCompletionMessageParam,
        { role: 'tool', tool_call_id: call?.id ?? '', content: '{"temp_c":3}' },
      ],
    });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]?.message.content).toMatch(/^Tool result received:/);
  });

  it('relays the first chunk while the upstream is still generating, and a disconnect aborts the upstream', async () => {
    const slow = await startHarness({ simulator: { firstTokenDelayMs: 10, tokenDelayMs: 150, replyTokens: 40 } });
    try {
      const slowClient = new OpenAI({ apiKey: slow.key, baseURL: `${slow.baseUrl}/v1`, maxRetries: 0 });
      const controller = new AbortController();
      const started = Date.now();
      const stream = await slowClient.chat.completions.create({ model: 'outlaw-1-xploded', stream: true, messages: [{ role: 'user', content: 'slow' }] }, { signal: controller.signal });
      let chunks = 0;
      let firstAt = 0;
      try {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content) {
            chunks += 1;
            if (firstAt === 0) firstAt = Date.now() - started;
            if (chunks === 2) controller.abort();
          }
        }
      } catch {
        // the abort ends iteration
      }
      // 40 tokens at 150 ms would take 6 s; the first arrived long before that.
      expect(firstAt).toBeLessThan(2000);
      const upstream = await slow.simulator.waitForRequest((r) => r.aborted, 5000);
      expect(upstream.aborted).toBe(true);
      expect(upstream.outputTokensSent).toBeLessThan(40);
    } finally {
      await slow.close();
    }
  });
});
