// Models served by a Gemini-API upstream (the simulator's Gemini mode), reached from all three client
// formats with the official clients: a chat completion (openai), a message (@anthropic-ai/sdk) and a
// response (openai, Responses API), whole and streamed, with tools. Every call is charged exactly the
// usage the upstream reported in its usageMetadata: the prompt (with its cached part), the answer and
// the thoughts, priced from the catalog.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { expectChargesMatchSimulator, mark } from './e2e-support.js';

const PLAIN = 'outlaw-1-xploded';
const REASONING = 'glm-5.3-flash-xploded';
const UPSTREAM_KEY = 'gm-upstream-secret-0123456789';

const WEATHER_SCHEMA = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
const CHAT_TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather', parameters: WEATHER_SCHEMA } },
];
const MESSAGE_TOOLS: Anthropic.Tool[] = [{ name: 'get_weather', description: 'Current weather', input_schema: WEATHER_SCHEMA as Anthropic.Tool.InputSchema }];

let h: Harness;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  h = await startHarness({ upstreamFormat: 'gemini', ledger: 'redis', upstreamApiKey: UPSTREAM_KEY });
  openai = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
});
afterAll(async () => {
  await h?.close();
});

/** The last request the simulator received. */
const lastUpstream = () => h.simulator.requests[h.simulator.requests.length - 1]!;

describe('chat completions through a Gemini upstream', () => {
  it('whole: a tool call, then the answer to its result; the key in x-goog-api-key, the model in the path', async () => {
    const m0 = await mark(h);
    const first = await openai.chat.completions.create({ model: PLAIN, tools: CHAT_TOOLS, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Oslo?' }] });
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toHaveProperty('city');
    const up = lastUpstream();
    expect(up.path).toBe(`/v1beta/models/sim-${PLAIN}:generateContent`);
    expect(up.headers['x-goog-api-key']).toBe(UPSTREAM_KEY);
    expect(up.headers.authorization).toBeUndefined();
    const body = up.body as { systemInstruction: unknown; tools: Array<{ functionDeclarations: Array<{ name: string }> }>; generationConfig: { maxOutputTokens: number } };
    expect(body.systemInstruction).toEqual({ parts: [{ text: 'Be brief.' }] });
    expect(body.tools[0]!.functionDeclarations[0]!.name).toBe('get_weather');
    expect(body.generationConfig.maxOutputTokens).toBeGreaterThan(0);

    const second = await openai.chat.completions.create({
      model: PLAIN,
      tools: CHAT_TOOLS,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        first.choices[0]!.message,
        { role: 'tool', tool_call_id: call.id, content: '7 degrees and rain' },
      ],
    });
    expect(second.choices[0]!.finish_reason).toBe('stop');
    expect(second.choices[0]!.message.content!.length).toBeGreaterThan(0);
    // The result is answered to the function by name, as Gemini matches them.
    const contents = (lastUpstream().body as { contents: Array<{ role: string; parts: Array<Record<string, unknown>> }> }).contents;
    expect(contents.map((c) => c.role)).toEqual(['user', 'model', 'user']);
    expect(contents[2]!.parts[0]).toEqual({ functionResponse: { name: 'get_weather', response: { content: '7 degrees and rain' } } });
    const records = await expectChargesMatchSimulator(h, m0, 2);
    expect(first.usage!.prompt_tokens).toBe(records[0]!.usage.input);
    expect(first.usage!.completion_tokens).toBe(records[0]!.usage.output);
  });

  it('streamed with include_usage: streamGenerateContent?alt=sse, the usage chunk and the charge exact', async () => {
    const m0 = await mark(h);
    const stream = await openai.chat.completions.create({ model: PLAIN, stream: true, stream_options: { include_usage: true }, tools: CHAT_TOOLS, messages: [{ role: 'user', content: 'Weather in Bergen?' }] });
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null = null;
    const args: string[] = [];
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (choice?.finish_reason) finish = choice.finish_reason;
      for (const t of choice?.delta.tool_calls ?? []) if (t.function?.arguments) args.push(t.function.arguments);
    }
    expect(finish).toBe('tool_calls');
    expect(JSON.parse(args.join(''))).toHaveProperty('city');
    const up = lastUpstream();
    expect(up.path).toBe(`/v1beta/models/sim-${PLAIN}:streamGenerateContent`);
    expect(up.query).toBe('alt=sse');
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    expect(usage).toMatchObject({ prompt_tokens: rec!.usage.input, completion_tokens: rec!.usage.output });
  });

  it('thoughts are billed as output and reported as reasoning tokens', async () => {
    const m0 = await mark(h);
    const res = await openai.chat.completions.create({ model: REASONING, reasoning_effort: 'low', messages: [{ role: 'user', content: 'Think, then say hello' }] });
    const config = (lastUpstream().body as { generationConfig: { thinkingConfig?: unknown } }).generationConfig;
    expect(config.thinkingConfig).toEqual({ thinkingBudget: 2048, includeThoughts: true });
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    const reasoning = res.usage!.completion_tokens_details!.reasoning_tokens!;
    expect(reasoning).toBeGreaterThan(0);
    expect(rec!.usage.reasoning).toBe(reasoning);
    expect(res.usage!.completion_tokens).toBe(rec!.usage.output);
    expect((res.choices[0]!.message as { reasoning_content?: string }).reasoning_content!.length).toBeGreaterThan(0);
  });

  it("a prompt the upstream serves from its cache is billed at the catalog's cached price", async () => {
    const request = { model: PLAIN, messages: [{ role: 'user' as const, content: 'A question asked twice, word for word.' }] };
    await openai.chat.completions.create(request);
    const m0 = await mark(h);
    const again = await openai.chat.completions.create(request);
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    const up = lastUpstream();
    expect(up.cachedInputTokens).toBeGreaterThan(0);
    expect(rec!.usage.cachedInput).toBe(up.cachedInputTokens);
    expect(again.usage!.prompt_tokens_details!.cached_tokens).toBe(up.cachedInputTokens);
    // Priced with the cached part apart (the example catalog has no cached price: the input price).
    const pricing = h.catalog.current().byId.get(PLAIN)!.pricing;
    expect(rec!.cost).toBe(costMicros({ input: up.inputTokens, output: up.outputTokensSent, cachedInput: up.cachedInputTokens, reasoning: 0 }, pricing));
  });
});

describe('messages through a Gemini upstream', () => {
  it('whole: tool_use, then the answer to the tool_result', async () => {
    const m0 = await mark(h);
    const first = await anthropic.messages.create({ model: PLAIN, max_tokens: 400, tools: MESSAGE_TOOLS, messages: [{ role: 'user', content: 'Weather in Oslo?' }] });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(use.name).toBe('get_weather');
    expect((lastUpstream().body as { generationConfig: { maxOutputTokens: number } }).generationConfig.maxOutputTokens).toBe(400);
    const second = await anthropic.messages.create({
      model: PLAIN,
      max_tokens: 400,
      tools: MESSAGE_TOOLS,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '7 degrees' }] },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    expect(second.content[0]!.type).toBe('text');
    const records = await expectChargesMatchSimulator(h, m0, 2);
    // Anthropic's input_tokens leave out what was read from a cache (the chat tests asked this before).
    expect(first.usage.input_tokens + (first.usage.cache_read_input_tokens ?? 0)).toBe(records[0]!.usage.input);
    expect(first.usage.cache_read_input_tokens).toBe(records[0]!.usage.cachedInput);
    expect(first.usage.output_tokens).toBe(records[0]!.usage.output);
  });

  it('streamed: events in order, the final usage exact', async () => {
    const m0 = await mark(h);
    const stream = anthropic.messages.stream({ model: PLAIN, max_tokens: 400, tools: MESSAGE_TOOLS, messages: [{ role: 'user', content: 'Weather in Tromsø?' }] });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const message = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types.at(-1)).toBe('message_stop');
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content.some((b) => b.type === 'tool_use' && b.name === 'get_weather')).toBe(true);
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    expect(message.usage.output_tokens).toBe(rec!.usage.output);
    expect(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0)).toBe(rec!.usage.input);
  });
});

describe('responses through a Gemini upstream', () => {
  const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', description: 'Current weather', parameters: WEATHER_SCHEMA, strict: true }];

  it('whole: a function call, then the answer to its output', async () => {
    const m0 = await mark(h);
    const first = await openai.responses.create({ model: PLAIN, tools, input: 'Weather in Oslo?' });
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    expect(call.name).toBe('get_weather');
    const second = await openai.responses.create({ model: PLAIN, tools, previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: '7 degrees' }] });
    expect(second.status).toBe('completed');
    expect(second.output_text.length).toBeGreaterThan(0);
    const records = await expectChargesMatchSimulator(h, m0, 2);
    expect(first.usage!.input_tokens).toBe(records[0]!.usage.input);
    expect(second.usage!.output_tokens).toBe(records[1]!.usage.output);
  });

  it('streamed: response.completed carries the usage charged', async () => {
    const m0 = await mark(h);
    const stream = await openai.responses.create({ model: PLAIN, stream: true, input: 'Say hello' });
    let completed: OpenAI.Responses.Response | undefined;
    for await (const e of stream) if (e.type === 'response.completed') completed = e.response;
    const text = completed!.output.flatMap((o) => (o.type === 'message' ? o.content : [])).map((c) => (c.type === 'output_text' ? c.text : '')).join('');
    expect(text.length).toBeGreaterThan(0);
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    expect(completed!.usage).toMatchObject({ input_tokens: rec!.usage.input, output_tokens: rec!.usage.output });
  });
});

describe("a Gemini upstream's errors", () => {
  it('a 429 is a rate limit, a 503 the overload each client format retries, a 400 the upstream message', async () => {
    h.simulator.injectFault({ status: 429, message: 'Resource has been exhausted (e.g. check quota).' });
    await expect(openai.chat.completions.create({ model: PLAIN, messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 429 });
    h.simulator.injectFault({ status: 503, message: 'The model is overloaded.' });
    await expect(anthropic.messages.create({ model: PLAIN, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 529 });
    h.simulator.injectFault({ status: 400, message: 'Invalid JSON payload received.' });
    const err = (await openai.chat.completions.create({ model: PLAIN, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(err.status).toBe(400);
    expect(err.message).toContain('Invalid JSON payload received.');
  });

  it('an error event mid-stream reaches the client in its own format, and only what was sent is charged', async () => {
    const m0 = await mark(h);
    h.simulator.injectFault({ errorEventAfterChunks: 3, message: 'The model is overloaded.' });
    const stream = anthropic.messages.stream({ model: PLAIN, max_tokens: 400, messages: [{ role: 'user', content: 'Tell me a story' }] });
    await expect(stream.finalMessage()).rejects.toThrow(/overloaded/);
    const [rec] = await expectChargesMatchSimulator(h, m0, 1);
    expect(rec!.usage.output).toBeGreaterThan(0);
  });
});
