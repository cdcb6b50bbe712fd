// Streaming O<-A: Anthropic upstream events -> OpenAI chunks for an OpenAI client (docs/wire-formats.md A.6, C.6, C.9).
import { createParser } from 'eventsource-parser';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createStreamTranslator, type SseEvent, type StreamTranslationContext } from '../../src/translate/translation.js';

const ctx: StreamTranslationContext = {
  upstreamModel: 'claude-x', clientModel: 'gpt-style-name', supportsReasoning: true, defaultMaxOutputTokens: 8192,
  requestId: 'req_o1', includeUsage: true, inputTokenEstimate: 0,
};
type Obj = Record<string, unknown>;

function sseEvents(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  createParser({ onEvent: (e) => out.push({ ...(e.event ? { event: e.event } : {}), data: e.data }) }).feed(text);
  return out;
}

const ev = (name: string, data: Obj): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
const blockDelta = (index: number, delta: Obj) => ev('content_block_delta', { index, delta });

// The B.4 sequence plus a ping, a second tool call and usage split between start and delta.
const b4Fixture =
  ev('message_start', { message: { id: 'msg_01', type: 'message', role: 'assistant', model: 'claude-x', content: [], stop_reason: null, stop_sequence: null,
    usage: { input_tokens: 12, output_tokens: 1, cache_creation_input_tokens: 100, cache_read_input_tokens: 300 } } }) +
  ev('content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }) +
  ev('ping', {}) +
  blockDelta(0, { type: 'thinking_delta', thinking: 'Need weather.' }) +
  blockDelta(0, { type: 'signature_delta', signature: 'EqQBCk' }) +
  ev('content_block_stop', { index: 0 }) +
  ev('content_block_start', { index: 1, content_block: { type: 'text', text: '' } }) +
  blockDelta(1, { type: 'text_delta', text: 'Checking.' }) +
  ev('content_block_stop', { index: 1 }) +
  ev('content_block_start', { index: 2, content_block: { type: 'tool_use', id: 'toolu_01A', name: 'get_weather', input: {} } }) +
  blockDelta(2, { type: 'input_json_delta', partial_json: '' }) +
  blockDelta(2, { type: 'input_json_delta', partial_json: '{"city": ' }) +
  blockDelta(2, { type: 'input_json_delta', partial_json: '"Oslo"}' }) +
  ev('content_block_stop', { index: 2 }) +
  ev('content_block_start', { index: 3, content_block: { type: 'tool_use', id: 'toolu_01B', name: 'get_time', input: {} } }) +
  ev('content_block_stop', { index: 3 }) +
  ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 58 } }) +
  ev('message_stop', {});

function translate(upstream: string, c: StreamTranslationContext = ctx) {
  const t = createStreamTranslator('anthropic', 'openai', c);
  let out = '';
  for (const e of sseEvents(upstream)) out += t.push(e);
  out += t.finish();
  return { t, out };
}

/** The data payloads of an OpenAI stream (all but [DONE]). */
const chunks = (out: string): Obj[] => sseEvents(out).filter((e) => e.data !== '[DONE]').map((e) => JSON.parse(e.data) as Obj);

async function finalCompletionViaSdk(sse: string) {
  const client = new OpenAI({
    apiKey: 'test-key', baseURL: 'http://127.0.0.1:9/v1', maxRetries: 0,
    fetch: () => Promise.resolve(new Response(sse, { status: 200, headers: { 'content-type': 'text/event-stream' } })),
  });
  // stream() checks finish_reason, role, tool call type/name/arguments at the end (A.6).
  return client.chat.completions.stream({ model: 'gpt-style-name', messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } }).finalChatCompletion();
}

describe('O<-A stream translation (C.9 table)', () => {
  it('role chunk first; same id, created and model on every chunk; ends with [DONE] and no event: lines', () => {
    const { out } = translate(b4Fixture);
    const cs = chunks(out);
    expect((cs[0]!.choices as Obj[])[0]!.delta).toEqual({ role: 'assistant', content: '' });
    for (const c of cs) {
      expect(c).toMatchObject({ id: cs[0]!.id, created: cs[0]!.created, model: 'gpt-style-name', object: 'chat.completion.chunk' });
    }
    expect(cs[0]!.id).toBe('chatcmpl-req_o1');
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(out).not.toContain('event:');
  });

  it('thinking -> reasoning_content + reasoning; tool index counts tool blocks only; finish chunk then usage chunk', () => {
    const { out, t } = translate(b4Fixture);
    const deltas = chunks(out).filter((c) => (c.choices as Obj[]).length > 0).map((c) => (c.choices as Obj[])[0]!);
    expect(deltas.map((d) => d.delta)).toEqual([
      { role: 'assistant', content: '' },
      { reasoning_content: 'Need weather.', reasoning: 'Need weather.' },
      { content: 'Checking.' },
      { tool_calls: [{ index: 0, id: 'toolu_01A', type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"city": ' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] },
      { tool_calls: [{ index: 1, id: 'toolu_01B', type: 'function', function: { name: 'get_time', arguments: '' } }] },
      // A no-argument tool still gets valid JSON before the finish chunk.
      { tool_calls: [{ index: 1, function: { arguments: '{}' } }] },
      {},
    ]);
    expect(deltas.map((d) => d.finish_reason)).toEqual([null, null, null, null, null, null, null, null, 'tool_calls']);
    const last = chunks(out).at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({
      prompt_tokens: 412, completion_tokens: 58, total_tokens: 470,
      prompt_tokens_details: { cached_tokens: 300, cache_write_tokens: 100, cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 0 } },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
    // Every non-final chunk says usage:null when the client asked for include_usage.
    expect(chunks(out).slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(t.finishReason).toBe('tool_calls');
    expect(t.usage).toEqual({ input: 412, cacheRead: 300, cacheWrite5m: 100, cacheWrite1h: 0, output: 58, reasoning: 0 });
  });

  it('the official OpenAI SDK stream helper accepts the translated stream and accumulates it', async () => {
    const { out } = translate(b4Fixture);
    const completion = await finalCompletionViaSdk(out);
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('Checking.');
    expect(choice.message.tool_calls).toEqual([
      { id: 'toolu_01A', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Oslo"}' } },
      { id: 'toolu_01B', type: 'function', function: { name: 'get_time', arguments: '{}' } },
    ]);
    expect(completion.usage?.prompt_tokens).toBe(412);
  });

  it('usage chunk only when the client asked for include_usage', () => {
    const { out } = translate(b4Fixture, { ...ctx, includeUsage: false });
    expect(out).not.toContain('"usage"');
    expect(chunks(out).every((c) => (c.choices as Obj[]).length === 1)).toBe(true);
  });
});

describe('O<-A stream pitfalls (C.6, C.9)', () => {
  it('cumulative Anthropic usage: message_delta repeats input counts -> set, never add', () => {
    const { t } = translate(
      ev('message_start', { message: { id: 'msg_1', usage: { input_tokens: 50, output_tokens: 1, cache_read_input_tokens: 10, cache_creation_input_tokens: 0 } } }) +
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) + blockDelta(0, { type: 'text_delta', text: 'x' }) + ev('content_block_stop', { index: 0 }) +
      ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 50, output_tokens: 7, cache_read_input_tokens: 10 } }) +
      ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9 } }) +
      ev('message_stop', {}));
    expect(t.usage).toEqual({ input: 60, cacheRead: 10, cacheWrite5m: 0, cacheWrite1h: 0, output: 9, reasoning: 0 });
  });

  it('cache split only in message_delta (compatible vendors): last non-null value of each counter wins', () => {
    const { t } = translate(
      ev('message_start', { message: { id: 'msg_1', usage: { input_tokens: 500, output_tokens: 0, cache_read_input_tokens: null, cache_creation_input_tokens: null } } }) +
      ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 100, output_tokens: 5, cache_read_input_tokens: 400, cache_creation_input_tokens: null } }) +
      ev('message_stop', {}));
    expect(t.usage).toEqual({ input: 500, cacheRead: 400, cacheWrite5m: 0, cacheWrite1h: 0, output: 5, reasoning: 0 });
  });

  it('stop_reason mapping in streams: max_tokens -> length, refusal -> content_filter', () => {
    for (const [stop, finish] of [['max_tokens', 'length'], ['refusal', 'content_filter'], ['end_turn', 'stop']] as const) {
      const { out } = translate(ev('message_start', { message: { id: 'm', usage: { input_tokens: 1 } } }) + ev('message_delta', { delta: { stop_reason: stop }, usage: { output_tokens: 1 } }) + ev('message_stop', {}));
      const finishChunk = chunks(out).find((c) => (c.choices as Obj[])[0]?.finish_reason);
      expect((finishChunk!.choices as Obj[])[0]!.finish_reason).toBe(finish);
    }
  });

  it('tool_use with the whole input in content_block_start and no deltas still yields the arguments once', () => {
    const { out } = translate(
      ev('message_start', { message: { id: 'm', usage: { input_tokens: 1 } } }) +
      ev('content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } } }) +
      ev('content_block_stop', { index: 0 }) + ev('message_delta', { delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 3 } }) + ev('message_stop', {}));
    const args = chunks(out).flatMap((c) => ((c.choices as Obj[])[0]?.delta as Obj | undefined)?.tool_calls as Obj[] ?? []).map((tc) => (tc.function as Obj).arguments).join('');
    expect(args).toBe('{"command":"ls"}');
  });

  it('upstream event: error -> data: {"error":{message,type,param,code}} and the stream ends without [DONE]', () => {
    const { out } = translate(
      ev('message_start', { message: { id: 'm', usage: { input_tokens: 1 } } }) +
      ev('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }) +
      ev('message_stop', {}));
    const last = chunks(out).at(-1)!;
    expect(last).toEqual({ error: { message: 'Overloaded', type: 'service_unavailable_error', param: null, code: 'server_is_overloaded' } });
    expect(out).not.toContain('[DONE]');
  });

  it('the OpenAI SDK raises the in-band error as an APIError', async () => {
    const t = createStreamTranslator('anthropic', 'openai', ctx);
    const out = t.push({ event: 'message_start', data: '{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}' }) + t.fail('upstream connection reset', 'api_error');
    await expect(finalCompletionViaSdk(out)).rejects.toMatchObject({ message: expect.stringContaining('upstream connection reset') as string });
  });

  it('upstream EOF without message_stop: finish() still writes the finish chunk and [DONE]', () => {
    const t = createStreamTranslator('anthropic', 'openai', { ...ctx, includeUsage: false });
    let out = t.push({ event: 'message_start', data: '{"type":"message_start","message":{"id":"m","usage":{"input_tokens":3}}}' });
    out += t.push({ event: 'content_block_start', data: '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}' });
    out += t.push({ event: 'content_block_delta', data: '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}' });
    out += t.finish();
    const cs = chunks(out);
    expect((cs.at(-1)!.choices as Obj[])[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
  });
});
