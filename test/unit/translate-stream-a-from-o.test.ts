// Streaming A<-O: OpenAI-format upstream chunks -> Anthropic SSE for an Anthropic client (docs/wire-formats.md B.4, C.6, C.9).
import Anthropic from '@anthropic-ai/sdk';
import { createParser } from 'eventsource-parser';
import { describe, expect, it } from 'vitest';
import { createStreamTranslator, type SseEvent, type StreamTranslationContext } from '../../src/translate/translation.js';

const ctx: StreamTranslationContext = {
  upstreamModel: 'deepseek-x', clientModel: 'claude-opus-5-5', supportsReasoning: true, defaultMaxOutputTokens: 8192,
  requestId: 'req_stream1', includeUsage: false, inputTokenEstimate: 400,
};
type Obj = Record<string, unknown>;

/** Parses SSE text with the same parser the gateway uses for upstreams. */
function sseEvents(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  const parser = createParser({ onEvent: (e) => out.push({ ...(e.event ? { event: e.event } : {}), data: e.data }) });
  parser.feed(text);
  return out;
}

const head = '"id":"chatcmpl-up1","object":"chat.completion.chunk","created":1763700000,"model":"deepseek-x"';
const chunk = (choices: unknown[], extra = ''): string => `data: {${head},"choices":${JSON.stringify(choices)}${extra}}\n\n`;
const delta = (d: Obj, finish: string | null = null) => chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finish }]);

/** Runs an upstream SSE fixture through a translator; `eof` true means the body ended without more. */
function translate(upstream: string, c: StreamTranslationContext = ctx) {
  const t = createStreamTranslator('openai', 'anthropic', c);
  let out = '';
  for (const ev of sseEvents(upstream)) out += t.push(ev);
  out += t.finish();
  return { t, out, events: sseEvents(out).map((e) => ({ event: e.event, data: JSON.parse(e.data) as Obj })) };
}

/** The B.4 rules every Anthropic stream we emit must satisfy. */
function expectValidAnthropicStream(events: Array<{ event?: string; data: Obj }>): void {
  expect(events[0]!.event).toBe('message_start');
  expect(events.at(-1)!.event).toBe('message_stop');
  let open: number | undefined;
  let next = 0;
  for (const e of events) {
    expect(e.event).toBe(e.data.type);
    if (e.event === 'content_block_start') {
      expect(open).toBeUndefined();
      expect(e.data.index).toBe(next++);
      open = e.data.index as number;
    } else if (e.event === 'content_block_delta') {
      expect(e.data.index).toBe(open);
    } else if (e.event === 'content_block_stop') {
      expect(e.data.index).toBe(open);
      open = undefined;
    } else if (e.event === 'message_delta') {
      expect(open).toBeUndefined();
      expect(e.data.usage).toBeTypeOf('object');
    }
  }
}

async function finalMessageViaSdk(sse: string) {
  const client = new Anthropic({
    apiKey: 'test-key', baseURL: 'http://127.0.0.1:9', maxRetries: 0,
    fetch: () => Promise.resolve(new Response(sse, { status: 200, headers: { 'content-type': 'text/event-stream' } })),
  });
  return client.messages.stream({ model: 'claude-opus-5-5', max_tokens: 1024, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
}

const fullFixture =
  delta({ role: 'assistant', content: '' }) +
  delta({ reasoning_content: 'Need ' }) +
  delta({ reasoning_content: 'weather.' }) +
  delta({ content: 'Checking.' }) +
  delta({ tool_calls: [{ index: 0, id: 'call_A', type: 'function', function: { name: 'get_weather', arguments: '' } }] }) +
  delta({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }) +
  delta({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }) +
  delta({ tool_calls: [{ index: 1, id: 'call_B', type: 'function', function: { name: 'get_time', arguments: '{}' } }] }) +
  delta({}, 'tool_calls') +
  chunk([], ',"usage":{"prompt_tokens":412,"completion_tokens":58,"total_tokens":470,"prompt_tokens_details":{"cached_tokens":300}}') +
  'data: [DONE]\n\n';

describe('A<-O stream translation (C.9 table)', () => {
  it('reasoning, text and two parallel tool calls become thinking, text and tool_use blocks 0..3 in order', () => {
    const { events, t } = translate(fullFixture);
    expectValidAnthropicStream(events);
    expect(events.map((e) => e.event)).toEqual([
      'message_start',
      'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta', 'content_block_stop',
      'message_delta', 'message_stop',
    ]);
    const starts = events.filter((e) => e.event === 'content_block_start').map((e) => e.data.content_block);
    expect(starts).toEqual([
      { type: 'thinking', thinking: '', signature: '' },
      { type: 'text', text: '' },
      { type: 'tool_use', id: 'call_A', name: 'get_weather', input: {} },
      { type: 'tool_use', id: 'call_B', name: 'get_time', input: {} },
    ]);
    // Thinking block ends with a gateway-made, recognisable signature.
    expect(events[4]!.data.delta).toEqual({ type: 'signature_delta', signature: expect.stringMatching(/^tollgate:/) as string });
    expect(t.finishReason).toBe('tool_use');
    expect(t.emittedOutput).toBe(true);
    expect(t.outputText()).toBe('Need weather.Checking.get_weather{"city":"Oslo"}get_time{}');
  });

  it('message_start carries the caller input estimate (not 0) and the client model; message_delta carries real cumulative usage', () => {
    const { events, t } = translate(fullFixture);
    const start = events[0]!.data.message as Obj;
    expect(start).toMatchObject({ id: 'msg_req_stream1', model: 'claude-opus-5-5', content: [], stop_reason: null, stop_sequence: null });
    expect(start.usage).toEqual({ input_tokens: 400, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    const md = events.find((e) => e.event === 'message_delta')!.data;
    expect(md).toEqual({
      type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: {
        input_tokens: 112, output_tokens: 58, cache_read_input_tokens: 300, cache_creation_input_tokens: 0,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
      },
    });
    expect(t.usage).toEqual({ input: 412, cacheRead: 300, cacheWrite5m: 0, cacheWrite1h: 0, output: 58, reasoning: 0 });
  });

  it('the official Anthropic SDK accumulates the translated stream into the right final message', async () => {
    const { out } = translate(fullFixture);
    const msg = await finalMessageViaSdk(out);
    expect(msg.content).toEqual([
      { type: 'thinking', thinking: 'Need weather.', signature: expect.stringMatching(/^tollgate:/) as string },
      { type: 'text', text: 'Checking.' },
      { type: 'tool_use', id: 'call_A', name: 'get_weather', input: { city: 'Oslo' } },
      { type: 'tool_use', id: 'call_B', name: 'get_time', input: {} },
    ]);
    expect(msg.stop_reason).toBe('tool_use');
    expect(msg.usage).toMatchObject({ input_tokens: 112, output_tokens: 58, cache_read_input_tokens: 300 });
  });
});

describe('A<-O stream pitfalls (C.9, C.6)', () => {
  it('tool id repeated on every fragment: a new block starts only on a new index', () => {
    const { events } = translate(
      delta({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_X', type: 'function', function: { name: 'Bash', arguments: '' } }] }) +
      delta({ tool_calls: [{ index: 0, id: 'call_X', type: 'function', function: { arguments: '{"command":' } }] }) +
      delta({ tool_calls: [{ index: 0, id: 'call_X', type: 'function', function: { arguments: '"ls"}' } }] }) +
      delta({}, 'tool_calls') + 'data: [DONE]\n\n');
    expectValidAnthropicStream(events);
    expect(events.filter((e) => e.event === 'content_block_start')).toHaveLength(1);
    expect(events.filter((e) => e.event === 'content_block_delta').map((e) => (e.data.delta as Obj).partial_json)).toEqual(['{"command":', '"ls"}']);
  });

  it('arguments all in one chunk are sent as one input_json_delta', async () => {
    const { events, out } = translate(
      delta({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'Read', arguments: '{"file_path":"/a"}' } }] }) +
      delta({}, 'tool_calls') + 'data: [DONE]\n\n');
    expect(events.filter((e) => e.event === 'content_block_delta').map((e) => e.data.delta)).toEqual([{ type: 'input_json_delta', partial_json: '{"file_path":"/a"}' }]);
    expect((await finalMessageViaSdk(out)).content).toEqual([{ type: 'tool_use', id: 'call_1', name: 'Read', input: { file_path: '/a' } }]);
  });

  it('a tool block whose JSON was empty is still valid: "{}" is sent', async () => {
    const { events, out } = translate(
      delta({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'now', arguments: '' } }] }) + delta({}, 'tool_calls') + 'data: [DONE]\n\n');
    expect(events.filter((e) => e.event === 'content_block_delta').map((e) => e.data.delta)).toEqual([{ type: 'input_json_delta', partial_json: '{}' }]);
    expect((await finalMessageViaSdk(out)).content).toEqual([{ type: 'tool_use', id: 'call_1', name: 'now', input: {} }]);
  });

  it('choices:[] chunks and non-JSON keep-alive payloads are tolerated', () => {
    const { events } = translate(chunk([]) + 'data: keep-alive\n\n' + ': comment\n\n' + delta({ content: 'Hi' }, 'stop') + 'data: [DONE]\n\n');
    expectValidAnthropicStream(events);
    expect(events.filter((e) => e.event === 'content_block_delta').map((e) => e.data.delta)).toEqual([{ type: 'text_delta', text: 'Hi' }]);
  });

  it('missing finish_reason and missing [DONE]: finish() on EOF still closes blocks and ends with end_turn', () => {
    const { events, t } = translate(delta({ role: 'assistant', content: 'Hel' }) + delta({ content: 'lo' }));
    expectValidAnthropicStream(events);
    expect(events.find((e) => e.event === 'message_delta')!.data.delta).toEqual({ stop_reason: 'end_turn', stop_sequence: null });
    // No usage reported: message_delta must not overwrite the input estimate with 0.
    expect(events.find((e) => e.event === 'message_delta')!.data.usage).toEqual({ output_tokens: 0 });
    expect(t.usageReported).toBe(false);
    expect(t.outputText()).toBe('Hello');
  });

  it('stop reason forced to tool_use when the upstream reported "stop" after a tool call', () => {
    const { events, t } = translate(delta({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'x', arguments: '{}' } }] }) + delta({}, 'stop') + 'data: [DONE]\n\n');
    expect(events.find((e) => e.event === 'message_delta')!.data.delta).toEqual({ stop_reason: 'tool_use', stop_sequence: null });
    expect(t.finishReason).toBe('tool_use');
  });

  it('usage only on the finish chunk (compat servers without include_usage) is still used', () => {
    const { t } = translate(delta({ content: 'x' }) + chunk([{ index: 0, delta: {}, finish_reason: 'length' }], ',"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}') + 'data: [DONE]\n\n');
    expect(t.usage).toEqual({ input: 9, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 2, reasoning: 0 });
    expect(t.finishReason).toBe('max_tokens');
  });

  it('never emits deltas for a block that is not open (interleaved fragments of an earlier tool are dropped)', () => {
    const { events } = translate(
      delta({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'a', arguments: '{"x":1}' } }] }) +
      delta({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'b', arguments: '{}' } }] }) +
      delta({ tool_calls: [{ index: 0, function: { arguments: ' ' } }] }) +
      delta({}, 'tool_calls') + 'data: [DONE]\n\n');
    expectValidAnthropicStream(events);
  });

  it('upstream error payload mid-stream -> event: error and nothing after it', () => {
    const t = createStreamTranslator('openai', 'anthropic', ctx);
    let out = '';
    for (const ev of sseEvents(delta({ content: 'partial' }) + 'data: {"error":{"message":"upstream overloaded","type":"server_error","code":"server_is_overloaded"}}\n\n' + delta({ content: 'late' }))) out += t.push(ev);
    out += t.finish();
    const events = sseEvents(out);
    expect(events.at(-1)).toEqual({ event: 'error', data: JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'upstream overloaded' } }) });
    expect(out).not.toContain('late');
    expect(out).not.toContain('message_stop');
  });

  it('fail() after a broken connection writes event: error once; later calls write nothing', () => {
    const t = createStreamTranslator('openai', 'anthropic', ctx);
    t.push({ data: JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content: 'x' } }] }) });
    expect(t.fail('Upstream timed out', 'timeout')).toBe('event: error\ndata: {"type":"error","error":{"type":"timeout_error","message":"Upstream timed out"}}\n\n');
    expect(t.finish()).toBe('');
    expect(t.push({ data: '[DONE]' })).toBe('');
  });

  it('emittedOutput stays false when the upstream produced nothing', () => {
    const { t, events } = translate(delta({ role: 'assistant', content: '' }) + 'data: [DONE]\n\n');
    expect(t.emittedOutput).toBe(false);
    expectValidAnthropicStream(events);
  });
});
