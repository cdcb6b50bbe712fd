// Prompt and completion in the GenAI conventions' message shapes, and the rule that none of it is
// built (the client's body not even read) unless TOLLGATE_TRACE_CONTENT=on.
import { afterEach, describe, expect, it } from 'vitest';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { CatalogModel, CatalogUpstream } from '../../src/catalog/snapshot.js';
import type { GatewayContext } from '../../src/request/state.js';
import type { RelayOutcome } from '../../src/relay/relay.js';
import { telemetryObserver } from '../../src/exchange/telemetry-observer.js';
import { inputContent, outputContent, replyContent } from '../../src/telemetry/genai-content.js';
import { GatewayMetrics } from '../../src/telemetry/metrics.js';
import { initTracing, type Tracing } from '../../src/telemetry/tracing.js';

describe('inputContent', () => {
  it('maps OpenAI messages part by part: text, images by URL or inline, tool calls and results, reasoning, names', () => {
    const body = {
      model: 'm',
      messages: [
        { role: 'developer', content: 'Be brief.' },
        {
          role: 'user',
          name: 'ana',
          content: [
            { type: 'text', text: 'What is in these?' },
            { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0K' } },
            { type: 'input_audio', input_audio: { data: 'AAA', format: 'wav' } },
          ],
        },
        {
          role: 'assistant',
          content: 'Let me look.',
          reasoning_content: 'They want a description.',
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'look', arguments: '{"at":"a"}' } },
            { id: 'c2', type: 'function', function: { name: 'look', arguments: 'not json' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'a cat' },
        'not a message',
      ],
    };
    expect(inputContent('openai', body)).toEqual({
      input: [
        { role: 'developer', parts: [{ type: 'text', content: 'Be brief.' }] },
        {
          role: 'user',
          name: 'ana',
          parts: [
            { type: 'text', content: 'What is in these?' },
            { type: 'uri', modality: 'image', uri: 'https://example.com/a.png' },
            { type: 'blob', modality: 'image', mime_type: 'image/png', content: 'iVBORw0K' },
            // No counterpart in the conventions: kept whole under its own type.
            { type: 'input_audio', input_audio: { data: 'AAA', format: 'wav' } },
          ],
        },
        {
          role: 'assistant',
          parts: [
            { type: 'reasoning', content: 'They want a description.' },
            { type: 'text', content: 'Let me look.' },
            { type: 'tool_call', id: 'c1', name: 'look', arguments: { at: 'a' } },
            { type: 'tool_call', id: 'c2', name: 'look', arguments: 'not json' },
          ],
        },
        { role: 'tool', parts: [{ type: 'tool_call_response', id: 'c1', response: 'a cat' }] },
      ],
    });
  });

  it('maps Anthropic messages, with the system prompt apart as system instructions', () => {
    const body = {
      model: 'm',
      max_tokens: 10,
      system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/b.jpg' } },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' } },
            { type: 'text', text: 'Describe.' },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Two images.', signature: 'sig' },
            { type: 'tool_use', id: 't1', name: 'look', input: { at: 'b' } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'a dog' }] }] },
      ],
    };
    expect(inputContent('anthropic', body)).toEqual({
      system: [{ type: 'text', content: 'Be brief.' }],
      input: [
        {
          role: 'user',
          parts: [
            { type: 'blob', modality: 'image', mime_type: 'image/jpeg', content: '/9j/4AAQ' },
            { type: 'uri', modality: 'image', uri: 'https://example.com/b.jpg' },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' } },
            { type: 'text', content: 'Describe.' },
          ],
        },
        {
          role: 'assistant',
          parts: [
            { type: 'reasoning', content: 'Two images.' },
            { type: 'tool_call', id: 't1', name: 'look', arguments: { at: 'b' } },
          ],
        },
        { role: 'user', parts: [{ type: 'tool_call_response', id: 't1', response: [{ type: 'text', text: 'a dog' }] }] },
      ],
    });
    expect(inputContent('anthropic', { messages: [{ role: 'user', content: 'hi' }] })).toEqual({ input: [{ role: 'user', parts: [{ type: 'text', content: 'hi' }] }] });
    expect(inputContent('openai', 'not a body')).toEqual({ input: [] });
  });
});

describe('output content', () => {
  it('a whole reply: one message per choice (OpenAI) or the content blocks (Anthropic), with its finish reason', () => {
    expect(
      replyContent('openai', {
        choices: [
          { index: 0, message: { role: 'assistant', content: 'Hello.' }, finish_reason: 'stop' },
          { index: 1, message: { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }, finish_reason: 'tool_calls' },
        ],
      }),
    ).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: 'Hello.' }], finish_reason: 'stop' },
      { role: 'assistant', parts: [{ type: 'tool_call', id: 'c', name: 'f', arguments: {} }], finish_reason: 'tool_calls' },
    ]);
    expect(
      replyContent('anthropic', { role: 'assistant', content: [{ type: 'thinking', thinking: 'Hm.', signature: 's' }, { type: 'text', text: 'Hi.' }], stop_reason: 'end_turn' }),
    ).toEqual([{ role: 'assistant', parts: [{ type: 'reasoning', content: 'Hm.' }, { type: 'text', content: 'Hi.' }], finish_reason: 'end_turn' }]);
    // Not a reply of that format (an error body, nothing): the caller falls back to the relayed pieces.
    expect(replyContent('openai', { error: { message: 'x' } })).toBeUndefined();
    expect(replyContent('anthropic', undefined)).toBeUndefined();
  });

  it('a relayed stream: reasoning pieces apart from the rest, in order; a cut stream says how it ended', () => {
    expect(outputContent({ generated: ['Let', ' me', 'Hello', ' there'], reasoningGenerated: ['Let', ' me'], finishReason: 'stop', status: 'completed' })).toEqual([
      { role: 'assistant', parts: [{ type: 'reasoning', content: 'Let me' }, { type: 'text', content: 'Hello there' }], finish_reason: 'stop' },
    ]);
    // A text piece equal to a later reasoning piece is still text: reasoning is matched off in order.
    expect(outputContent({ generated: ['a', 'b', 'a'], reasoningGenerated: ['b', 'a'], finishReason: undefined, status: 'client_cancelled' })).toEqual([
      { role: 'assistant', parts: [{ type: 'reasoning', content: 'ba' }, { type: 'text', content: 'a' }], finish_reason: 'cancelled' },
    ]);
    expect(outputContent({ generated: [], reasoningGenerated: [], finishReason: undefined, status: 'upstream_failed' })).toEqual([{ role: 'assistant', parts: [], finish_reason: 'error' }]);
  });
});

describe('the exchange observer and content', () => {
  let tracing: Tracing | undefined;
  afterEach(async () => {
    await tracing?.shutdown();
    tracing = undefined;
  });

  const upstream = { name: 'u', format: 'openai', upstreamModel: 'up-m' } as CatalogUpstream;
  const model = { id: 'm', upstreams: [upstream] } as unknown as CatalogModel;

  /** One exchange through the observer; counts every read of the client's body and of the reply. */
  function exchange(t: Tracing, stream: boolean): { reads: number } {
    const counter = { reads: 0 };
    const watched = <T extends object>(o: T): T =>
      new Proxy(o, {
        get(target, key, receiver) {
          counter.reads++;
          const v = Reflect.get(target, key, receiver) as unknown;
          return typeof v === 'object' && v !== null ? watched(v) : v;
        },
      });
    const body = watched({ model: 'm', messages: [{ role: 'user', content: 'private prompt' }] });
    const reply = watched({ choices: [{ message: { role: 'assistant', content: 'private answer' }, finish_reason: 'stop' }] });
    const span = t.enabled ? t.startRequestSpan({ requestId: 'req-c', route: '/v1/chat/completions' }) : undefined;
    const ctx = { state: { requestId: 'req-c', format: 'openai', body, ...(span ? { span } : {}) }, body: reply } as unknown as GatewayContext;
    const observer = telemetryObserver(new GatewayMetrics({ defaultMetrics: false }), t);
    const call = observer.upstreamStarted(ctx, model, upstream, '127.0.0.1', 8000, 100, stream);
    call.relayStarted(stream);
    const outcome: RelayOutcome = { usage: undefined, generated: ['private answer'], reasoningGenerated: [], status: 'completed', finishReason: 'stop', firstTokenAt: undefined };
    call.finished(outcome);
    span?.end(200);
    return counter;
  }

  it.each([false, true])('with content off (stream %s), neither the prompt nor the reply is read, traced or not', async (stream) => {
    expect(exchange(initTracing({ env: {} }), stream).reads).toBe(0);
    const exporter = new InMemorySpanExporter();
    tracing = initTracing({ env: {}, spanProcessors: [new SimpleSpanProcessor(exporter)] });
    expect(exchange(tracing, stream).reads).toBe(0);
    await tracing.forceFlush();
    expect(exporter.getFinishedSpans()).toHaveLength(2);
    expect(JSON.stringify(exporter.getFinishedSpans().map((s) => s.attributes))).not.toContain('private');
  });

  it('with content on, the client span carries both, the server span neither', async () => {
    const exporter = new InMemorySpanExporter();
    tracing = initTracing({ env: { TOLLGATE_TRACE_CONTENT: 'on' }, spanProcessors: [new SimpleSpanProcessor(exporter)] });
    expect(exchange(tracing, false).reads).toBeGreaterThan(0);
    await tracing.forceFlush();
    const [client, server] = exporter.getFinishedSpans();
    expect(JSON.parse(client!.attributes['gen_ai.input.messages'] as string)).toEqual([{ role: 'user', parts: [{ type: 'text', content: 'private prompt' }] }]);
    expect(JSON.parse(client!.attributes['gen_ai.output.messages'] as string)).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: 'private answer' }], finish_reason: 'stop' },
    ]);
    expect(JSON.stringify(server!.attributes)).not.toContain('private');
  });
});
