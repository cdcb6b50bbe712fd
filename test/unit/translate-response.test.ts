// Non-stream response translation both ways: content, tool calls, reasoning, stop reasons (C.5), usage (C.6).
import { describe, expect, it } from 'vitest';
import { translateResponse, type TranslationContext } from '../../src/translate/translation.js';
import { usageFromAnthropic, usageToAnthropic } from '../../src/formats/anthropic-messages/usage.js';
import { usageFromOpenAI, usageToOpenAI } from '../../src/formats/openai-chat/usage.js';

const ctx: TranslationContext = { upstreamModel: 'up', clientModel: 'client-model', supportsReasoning: true, defaultMaxOutputTokens: 4096, requestId: 'req_resp' };
type Obj = Record<string, unknown>;

const openAICompletion = (message: Obj, finish: string, usage?: Obj): Obj => ({
  id: 'chatcmpl-up1', object: 'chat.completion', created: 1763700000, model: 'deepseek-x',
  choices: [{ index: 0, message: { role: 'assistant', refusal: null, ...message }, logprobs: null, finish_reason: finish }],
  usage: usage ?? { prompt_tokens: 52, completion_tokens: 18, total_tokens: 70, prompt_tokens_details: { cached_tokens: 40 }, completion_tokens_details: { reasoning_tokens: 5 } },
});

const anthropicMessage = (content: Obj[], stop: string, usage?: Obj): Obj => ({
  id: 'msg_01XYZ', type: 'message', role: 'assistant', model: 'claude-x', content, stop_reason: stop, stop_sequence: null,
  usage: usage ?? { input_tokens: 12, output_tokens: 58, cache_creation_input_tokens: 100, cache_read_input_tokens: 300 },
});

describe('A<-O response (OpenAI upstream -> Anthropic client)', () => {
  it('text + tool calls become text and tool_use blocks with ids unchanged, input as an object, echoing the client model', () => {
    const { body, finishReason } = translateResponse(openAICompletion({
      content: 'Checking.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
    }, 'tool_calls'), 'openai', 'anthropic', ctx);
    expect(body).toMatchObject({ id: 'msg_chatcmpl-up1', type: 'message', role: 'assistant', model: 'client-model', stop_reason: 'tool_use', stop_sequence: null });
    expect(body.content).toEqual([
      { type: 'text', text: 'Checking.' },
      { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Oslo' } },
    ]);
    expect(finishReason).toBe('tool_use');
  });

  it('stop reason forced to tool_use whenever a tool call was emitted (upstream said "stop")', () => {
    const { body } = translateResponse(openAICompletion({ content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'x', arguments: '' } }] }, 'stop'), 'openai', 'anthropic', ctx);
    expect(body.stop_reason).toBe('tool_use');
    expect((body.content as Obj[])[0]).toEqual({ type: 'tool_use', id: 'call_1', name: 'x', input: {} });
  });

  it('an upstream tool call without id gets a synthesized one', () => {
    const { body } = translateResponse(openAICompletion({ content: null, tool_calls: [{ type: 'function', function: { name: 'x', arguments: '{}' } }] }, 'tool_calls'), 'openai', 'anthropic', ctx);
    expect((body.content as Obj[])[0]!.id).toMatch(/^call_[a-f0-9]{24}$/);
  });

  it('reasoning_content (or reasoning) becomes a thinking block first, with a recognisable gateway signature', () => {
    for (const field of ['reasoning_content', 'reasoning']) {
      const { body } = translateResponse(openAICompletion({ content: 'Hi', [field]: 'Let me think.' }, 'stop'), 'openai', 'anthropic', ctx);
      const content = body.content as Obj[];
      expect(content[0]).toEqual({ type: 'thinking', thinking: 'Let me think.', signature: expect.stringMatching(/^tollgate:/) as string });
      expect(content[1]).toEqual({ type: 'text', text: 'Hi' });
    }
  });

  it.each([['stop', 'end_turn'], ['length', 'max_tokens'], ['content_filter', 'refusal'], ['function_call', 'tool_use']])(
    'finish_reason %s -> stop_reason %s', (finish, stop) => {
      expect(translateResponse(openAICompletion({ content: 'x' }, finish), 'openai', 'anthropic', ctx).body.stop_reason).toBe(stop);
    });

  it('usage: input_tokens = prompt - cached - cache_write; cache read/creation filled', () => {
    const { body, usage } = translateResponse(openAICompletion({ content: 'x' }, 'stop', {
      prompt_tokens: 1000, completion_tokens: 20, total_tokens: 1020, prompt_tokens_details: { cached_tokens: 600, cache_write_tokens: 100 },
    }), 'openai', 'anthropic', ctx);
    expect(body.usage).toEqual({
      input_tokens: 300, output_tokens: 20, cache_read_input_tokens: 600, cache_creation_input_tokens: 100,
      cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 0 },
    });
    expect(usage).toEqual({ input: 1000, cacheRead: 600, cacheWrite5m: 100, cacheWrite1h: 0, output: 20, reasoning: 0 });
  });

  it('a completion without choices is a 502 TranslationError, not a crash', () => {
    expect(() => translateResponse({ id: 'x', choices: [] }, 'openai', 'anthropic', ctx)).toThrow(expect.objectContaining({ status: 502 }) as Error);
  });
});

describe('O<-A response (Anthropic upstream -> OpenAI client)', () => {
  it('text, thinking and tool_use become content, reasoning_content + reasoning and tool_calls with JSON string arguments', () => {
    const { body, finishReason } = translateResponse(anthropicMessage([
      { type: 'thinking', thinking: 'Need weather.', signature: 'EqQBCk' },
      { type: 'redacted_thinking', data: 'opaque' },
      { type: 'text', text: 'Checking.', citations: null },
      { type: 'tool_use', id: 'toolu_01A', name: 'get_weather', input: { city: 'Oslo' }, caller: { type: 'direct' } },
    ], 'tool_use'), 'anthropic', 'openai', ctx);
    expect(body).toMatchObject({ id: 'chatcmpl-msg_01XYZ', object: 'chat.completion', model: 'client-model' });
    expect(typeof body.created).toBe('number');
    const choice = (body.choices as Obj[])[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message).toEqual({
      role: 'assistant', content: 'Checking.', refusal: null,
      reasoning_content: 'Need weather.', reasoning: 'Need weather.',
      thinking_blocks: [{ type: 'thinking', thinking: 'Need weather.', signature: 'EqQBCk' }],
      tool_calls: [{ id: 'toolu_01A', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
    });
    expect(JSON.stringify(body)).not.toContain('opaque');
    expect(finishReason).toBe('tool_calls');
  });

  it('thinking is never turned into visible text', () => {
    const { body } = translateResponse(anthropicMessage([{ type: 'thinking', thinking: 'secret plan', signature: 's' }, { type: 'text', text: 'Hello' }], 'end_turn'), 'anthropic', 'openai', ctx);
    expect(((body.choices as Obj[])[0]!.message as Obj).content).toBe('Hello');
  });

  it.each([
    ['end_turn', 'stop'], ['stop_sequence', 'stop'], ['max_tokens', 'length'], ['tool_use', 'tool_calls'],
    ['refusal', 'content_filter'], ['pause_turn', 'stop'], ['model_context_window_exceeded', 'length'],
  ])('stop_reason %s -> finish_reason %s', (stop, finish) => {
    const content = stop === 'tool_use' ? [{ type: 'tool_use', id: 't', name: 'n', input: {} }] : [{ type: 'text', text: 'x' }];
    const { body } = translateResponse(anthropicMessage(content, stop), 'anthropic', 'openai', ctx);
    expect((body.choices as Obj[])[0]!.finish_reason).toBe(finish);
  });

  it('usage: prompt_tokens = input + cache read + cache creation; cached_tokens = cache read; thinking tokens -> reasoning_tokens', () => {
    const { body, usage } = translateResponse(anthropicMessage([{ type: 'text', text: 'x' }], 'end_turn', {
      input_tokens: 12, output_tokens: 58, cache_creation_input_tokens: 100, cache_read_input_tokens: 300, output_tokens_details: { thinking_tokens: 20 },
    }), 'anthropic', 'openai', ctx);
    expect(body.usage).toEqual({
      prompt_tokens: 412, completion_tokens: 58, total_tokens: 470,
      prompt_tokens_details: { cached_tokens: 300, cache_write_tokens: 100, cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 0 } },
      completion_tokens_details: { reasoning_tokens: 20 },
    });
    expect(usage).toEqual({ input: 412, cacheRead: 300, cacheWrite5m: 100, cacheWrite1h: 0, output: 58, reasoning: 20 });
  });

  it('a stop_sequence stop keeps the matched string when returned to an Anthropic shape', () => {
    const msg = { ...anthropicMessage([{ type: 'text', text: 'x' }], 'stop_sequence'), stop_sequence: '###' };
    expect(translateResponse(msg, 'anthropic', 'openai', ctx).finishReason).toBe('stop');
  });
});

describe('usage mapping (C.6) round trips', () => {
  it('Anthropic -> normalized -> Anthropic is lossless and OpenAI -> normalized -> OpenAI keeps the counters', () => {
    const a = { input_tokens: 7, output_tokens: 9, cache_creation_input_tokens: 3, cache_read_input_tokens: 11, cache_creation: { ephemeral_5m_input_tokens: 1, ephemeral_1h_input_tokens: 2 } };
    expect(usageToAnthropic(usageFromAnthropic(a))).toEqual(a);
    // Without the split (older API versions) every write is a 5-minute write.
    const { cache_creation: _split, ...unsplit } = a;
    expect(usageFromAnthropic(unsplit)).toMatchObject({ input: 21, cacheRead: 11, cacheWrite5m: 3, cacheWrite1h: 0 });
    const withWrites = { prompt_tokens: 30, completion_tokens: 4, total_tokens: 34, prompt_tokens_details: { cached_tokens: 10, cache_write_tokens: 5, cache_creation: { ephemeral_5m_input_tokens: 3, ephemeral_1h_input_tokens: 2 } }, completion_tokens_details: { reasoning_tokens: 2 } };
    expect(usageFromOpenAI(withWrites)).toMatchObject({ input: 30, cacheRead: 10, cacheWrite5m: 3, cacheWrite1h: 2 });
    expect(usageToOpenAI(usageFromOpenAI(withWrites))).toEqual(withWrites);
    const o = { prompt_tokens: 30, completion_tokens: 4, total_tokens: 34, prompt_tokens_details: { cached_tokens: 10 }, completion_tokens_details: { reasoning_tokens: 2 } };
    expect(usageToOpenAI(usageFromOpenAI(o))).toEqual(o);
  });

  it('missing or null usage reads as zeros for the client, and is unbillable where a count is missing', () => {
    expect(usageFromOpenAI(null)).toEqual({ input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, reasoning: 0, unbillable: true, promptUnbillable: true });
    // A null counter is "not reported", as Anthropic streams send it; the output count is there, the prompt's is not.
    expect(usageFromAnthropic({ input_tokens: null, output_tokens: 3 })).toEqual({ input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 3, reasoning: 0, promptUnbillable: true });
    expect(usageFromAnthropic({ input_tokens: 5 })).toEqual({ input: 5, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, reasoning: 0, unbillable: true });
    expect(usageFromOpenAI({ prompt_tokens: 5, completion_tokens: -2 })).toMatchObject({ input: 5, output: 0, unbillable: true });
  });
});
