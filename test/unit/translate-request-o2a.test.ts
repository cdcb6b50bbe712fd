// OpenAI-format client -> Anthropic upstream request translation (docs/wire-formats.md C.1–C.4, C.7, C.8).
import { describe, expect, it } from 'vitest';
import { translateRequest, TranslationError, type TranslationContext } from '../../src/translate/translation.js';

const ctx: TranslationContext = {
  upstreamModel: 'claude-sonnet-x', clientModel: 'sonnet', supportsReasoning: true, defaultMaxOutputTokens: 16000, requestId: 'req_o2a',
};
type Msg = Record<string, unknown>;
const o2a = (body: Record<string, unknown>, c: TranslationContext = ctx) => translateRequest({ model: 'sonnet', ...body }, 'openai', 'anthropic', c);
const msgs = (out: Record<string, unknown>) => out.messages as Msg[];
const weatherCall = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } };

describe('O->A request: roles and system (C.1)', () => {
  it('system and developer messages before the first turn become top-level system blocks; name dropped', () => {
    const out = o2a({ messages: [
      { role: 'system', content: 'Be terse.', name: 'ops' },
      { role: 'developer', content: [{ type: 'text', text: 'Answer in English.' }] },
      { role: 'user', content: 'hi', name: 'alice' },
    ] });
    expect(out.system).toEqual([{ type: 'text', text: 'Be terse.' }, { type: 'text', text: 'Answer in English.' }]);
    expect(msgs(out)).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
    expect(out.model).toBe('claude-sonnet-x');
  });

  it('a later system message is folded into the next user turn as a system-reminder', () => {
    const out = o2a({ messages: [
      { role: 'user', content: 'one' }, { role: 'assistant', content: 'ok' },
      { role: 'system', content: 'Now be formal.' }, { role: 'user', content: 'two' },
    ] });
    expect(msgs(out)[2]).toEqual({ role: 'user', content: [
      { type: 'text', text: '<system-reminder>\nNow be formal.\n</system-reminder>' }, { type: 'text', text: 'two' },
    ] });
  });

  it('consecutive same-role messages are merged into one turn', () => {
    const out = o2a({ messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] });
    expect(msgs(out)).toEqual([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }]);
  });
});

describe('O->A request: content parts (C.2)', () => {
  it('data: image URLs are parsed into base64 sources, http(s) URLs become url sources, detail dropped', () => {
    const out = o2a({ messages: [{ role: 'user', content: [
      { type: 'text', text: 'look' },
      { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/4AAQ', detail: 'high' } },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'low' } },
    ] }] });
    expect(msgs(out)[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
    ]);
  });

  it('Anthropic accepts only jpeg/png/gif/webp images: other data URL types are a 400', () => {
    expect(() => o2a({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/bmp;base64,Qk0' } }] }] }))
      .toThrow(expect.objectContaining({ status: 400, param: 'messages[0].content[0]' }) as Error);
  });

  it('file part with a PDF data URL becomes a document block titled with the filename', () => {
    const out = o2a({ messages: [{ role: 'user', content: [{ type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,JVBERi0' } }] }] });
    expect(msgs(out)[0]!.content).toEqual([{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0' }, title: 'a.pdf' }]);
  });

  it('input_audio has no Anthropic equivalent: 400 invalid request naming the part', () => {
    const call = () => o2a({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'UklGR', format: 'wav' } }] }] });
    expect(call).toThrow(TranslationError);
    expect(call).toThrow(expect.objectContaining({ status: 400, param: 'messages[0].content[0]' }) as Error);
  });

  it('file_id references cannot be resolved for Anthropic: 400', () => {
    expect(() => o2a({ messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }] }))
      .toThrow(expect.objectContaining({ status: 400 }) as Error);
  });
});

describe('O->A request: tools and tool_choice (C.3)', () => {
  it('function.parameters -> input_schema; missing parameters -> {type:"object",properties:{}}', () => {
    const out = o2a({
      messages: [{ role: 'user', content: 'x' }],
      tools: [
        { type: 'function', function: { name: 'get_weather', description: 'w', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
        { type: 'function', function: { name: 'now' } },
      ],
    });
    expect(out.tools).toEqual([
      { name: 'get_weather', description: 'w', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
      { name: 'now', input_schema: { type: 'object', properties: {} } },
    ]);
  });

  it('custom tools have no Anthropic equivalent: 400', () => {
    expect(() => o2a({ messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'custom', custom: { name: 'grammar' } }] }))
      .toThrow(expect.objectContaining({ status: 400, param: 'tools[0]' }) as Error);
  });

  it.each([
    ['auto', { type: 'auto' }],
    ['required', { type: 'any' }],
    ['none', { type: 'none' }],
    [{ type: 'function', function: { name: 'get_weather' } }, { type: 'tool', name: 'get_weather' }],
  ])('tool_choice %j maps to %j', (choice, expected) => {
    const out = o2a({ messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'get_weather' } }], tool_choice: choice });
    expect(out.tool_choice).toEqual(expected);
  });

  it('only parallel_tool_calls:false -> {type:"auto",disable_parallel_tool_use:true}', () => {
    const out = o2a({ messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 't' } }], parallel_tool_calls: false });
    expect(out.tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true });
  });

  it('allowed_tools choice filters the tools and maps its mode', () => {
    const out = o2a({
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'a' } }, { type: 'function', function: { name: 'b' } }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'b' } }] } },
    });
    expect((out.tools as Msg[]).map((t) => t.name)).toEqual(['b']);
    expect(out.tool_choice).toEqual({ type: 'any' });
  });

  it('forced tool choice together with thinking: thinking is left off (Anthropic rejects the combination)', () => {
    const out = o2a({
      messages: [{ role: 'user', content: 'x' }], max_tokens: 8000, reasoning_effort: 'high',
      tools: [{ type: 'function', function: { name: 't' } }], tool_choice: 'required',
    });
    expect(out.thinking).toBeUndefined();
    expect(out.tool_choice).toEqual({ type: 'any' });
  });
});

describe('O->A request: tool calls and results (C.4)', () => {
  it('tool_calls become tool_use blocks with ids unchanged and arguments parsed into an object', () => {
    const out = o2a({ messages: [{ role: 'user', content: 'weather?' }, { role: 'assistant', content: null, tool_calls: [weatherCall] }] });
    expect(msgs(out)[1]).toEqual({ role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Oslo' } }] });
  });

  it('empty or missing arguments become {}; unparsable (truncated) arguments become {} and never a string', () => {
    const out = o2a({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'calling', tool_calls: [
      { id: 'call_a', type: 'function', function: { name: 'a', arguments: '' } },
      { id: 'call_b', type: 'function', function: { name: 'b' } },
      { id: 'call_c', type: 'function', function: { name: 'c', arguments: '{"path":"/tm' } },
    ] }] });
    const blocks = msgs(out)[1]!.content as Msg[];
    expect(blocks[0]).toEqual({ type: 'text', text: 'calling' });
    expect(blocks.slice(1).map((b) => b.input)).toEqual([{}, {}, {}]);
  });

  it('consecutive tool messages are merged into one user message with one tool_result per call, deduplicated, before the user text', () => {
    const out = o2a({ messages: [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: null, tool_calls: [weatherCall, { id: 'call_2', type: 'function', function: { name: 'now', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c":3}' },
      { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: '12:00' }] },
      { role: 'tool', tool_call_id: 'call_2', content: '12:00 again' },
      { role: 'user', content: 'thanks' },
    ] });
    expect(msgs(out)).toHaveLength(3);
    expect(msgs(out)[2]).toEqual({ role: 'user', content: [
      { type: 'tool_result', tool_use_id: 'call_1', content: [{ type: 'text', text: '{"temp_c":3}' }] },
      { type: 'tool_result', tool_use_id: 'call_2', content: [{ type: 'text', text: '12:00' }] },
      { type: 'text', text: 'thanks' },
    ] });
    expect(JSON.stringify(out)).not.toContain('is_error');
  });
});

describe('O->A request: limits and sampling (C.7)', () => {
  it('max_tokens: max_completion_tokens wins over max_tokens, else the model default', () => {
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 300, max_tokens: 200 }).max_tokens).toBe(300);
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], max_tokens: 200 }).max_tokens).toBe(200);
    expect(o2a({ messages: [{ role: 'user', content: 'x' }] }).max_tokens).toBe(16000);
  });

  it('stop string or array -> stop_sequences', () => {
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], stop: 'END' }).stop_sequences).toEqual(['END']);
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], stop: ['a', 'b'] }).stop_sequences).toEqual(['a', 'b']);
  });

  it('temperature is clamped to 0..1 for Anthropic', () => {
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], temperature: 1.7 }).temperature).toBe(1);
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], temperature: 0.2 }).temperature).toBe(0.2);
  });

  it('user -> metadata.user_id; OpenAI-only fields are dropped', () => {
    const out = o2a({
      messages: [{ role: 'user', content: 'x' }], user: 'u-42', seed: 1, logprobs: true, frequency_penalty: 0.5,
      presence_penalty: 0.1, logit_bias: { 1: 2 }, store: true, service_tier: 'auto', stream_options: { include_usage: true },
    });
    expect(out.metadata).toEqual({ user_id: 'u-42' });
    expect(Object.keys(out).sort()).toEqual(['max_tokens', 'messages', 'metadata', 'model']);
  });

  it('n>1 cannot be served by Anthropic: TranslationError 400 with param n', () => {
    expect(() => o2a({ messages: [{ role: 'user', content: 'x' }], n: 2 })).toThrow(expect.objectContaining({ status: 400, param: 'n', name: 'TranslationError' }) as Error);
    expect(() => o2a({ messages: [{ role: 'user', content: 'x' }], n: 1 })).not.toThrow();
  });

  it('response_format json_schema -> output_config.format', () => {
    const schema = { type: 'object', properties: {} };
    const out = o2a({ messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
    expect(out.output_config).toEqual({ format: { type: 'json_schema', schema } });
  });
});

describe('O->A request: reasoning (C.8)', () => {
  it('reasoning_effort -> thinking enabled with a budget below max_tokens; temperature dropped while thinking', () => {
    const out = o2a({ messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'medium', max_completion_tokens: 20000, temperature: 0.5 });
    expect(out.thinking).toEqual({ type: 'enabled', budget_tokens: 8192 });
    expect(out.temperature).toBeUndefined();
  });

  it('thinking budget is kept below max_tokens, and left off when max_tokens leaves no room for 1024', () => {
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high', max_tokens: 4000 }).thinking).toEqual({ type: 'enabled', budget_tokens: 3999 });
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high', max_tokens: 1000 }).thinking).toBeUndefined();
  });

  it('reasoning_effort none -> thinking disabled; models without reasoning get no thinking field', () => {
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'none' }).thinking).toEqual({ type: 'disabled' });
    expect(o2a({ messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high' }, { ...ctx, supportsReasoning: false }).thinking).toBeUndefined();
  });

  it('unsigned reasoning and gateway-signed thinking are never forwarded to Anthropic; real signed thinking_blocks are', () => {
    const out = o2a({ messages: [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: 'a', reasoning_content: 'plain reasoning' },
      { role: 'user', content: 'y' },
      { role: 'assistant', content: 'b', thinking_blocks: [{ type: 'thinking', thinking: 'ours', signature: 'tollgate:abc' }] },
      { role: 'user', content: 'z' },
      { role: 'assistant', content: null, tool_calls: [weatherCall], thinking_blocks: [{ type: 'thinking', thinking: 'real', signature: 'EqQBCkgI' }] },
      { role: 'tool', tool_call_id: 'call_1', content: '3C' },
    ] });
    expect(msgs(out)[1]!.content).toEqual([{ type: 'text', text: 'a' }]);
    expect(msgs(out)[3]!.content).toEqual([{ type: 'text', text: 'b' }]);
    expect(msgs(out)[5]!.content).toEqual([
      { type: 'thinking', thinking: 'real', signature: 'EqQBCkgI' },
      { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Oslo' } },
    ]);
  });
});
