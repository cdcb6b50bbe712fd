// The Gemini upstream format's codecs: usage from usageMetadata, finish reasons, the request it is sent,
// and its stream, as the translated pairs read them.
import { describe, expect, it } from 'vitest';
import { upstreamFormat } from '../../src/formats/index.js';
import { translateRequest, translateResponse, createStreamTranslator, TranslationError, type StreamTranslationContext } from '../../src/translate/translation.js';
import { pngBase64 } from '../helpers/png.js';

const gemini = upstreamFormat('gemini');
const ctx: StreamTranslationContext = { upstreamModel: 'gemini-x', clientModel: 'client', supportsReasoning: true, defaultMaxOutputTokens: 4096, requestId: 'req_g', includeUsage: true, inputTokenEstimate: 3 };

describe('Gemini usage', () => {
  it('the prompt includes its cached part; thoughts are output apart from the answer, and reasoning', () => {
    const r = gemini.decodeResponse({ candidates: [{ content: { parts: [{ text: 'hi' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 100, cachedContentTokenCount: 60, candidatesTokenCount: 7, thoughtsTokenCount: 30, totalTokenCount: 137 } });
    expect(r.usage).toEqual({ input: 100, cacheRead: 60, cacheWrite5m: 0, cacheWrite1h: 0, output: 37, reasoning: 30 });
  });

  it('absent thinking and cache counts are zeros (proto3 leaves them out); an absent prompt or answer count is not', () => {
    expect(gemini.decodeResponse({ candidates: [], usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2 } }).usage).toEqual({ input: 5, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 2, reasoning: 0 });
    expect(gemini.decodeResponse({ candidates: [], usageMetadata: { promptTokenCount: 5 } }).usage.unbillable).toBe(true);
    expect(gemini.decodeResponse({ candidates: [], usageMetadata: { candidatesTokenCount: 5 } }).usage.unbillable).toBe(true);
    expect(gemini.decodeResponse({ candidates: [], usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2, thoughtsTokenCount: 'x' } }).usage.unbillable).toBe(true);
    expect(gemini.decodeResponse({ candidates: [] }).usage.unbillable).toBe(true);
  });
});

describe('Gemini replies to each client format', () => {
  const reply = (finishReason: string, parts: unknown[]) => ({ candidates: [{ content: { role: 'model', parts }, finishReason }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 3 }, responseId: 'r1', modelVersion: 'gemini-x-001' });

  it('maps finish reasons: MAX_TOKENS is length, a safety stop a content filter, a function call tool calls', () => {
    expect(translateResponse(reply('MAX_TOKENS', [{ text: 'a' }]), 'gemini', 'openai', ctx).finishReason).toBe('length');
    expect(translateResponse(reply('SAFETY', []), 'gemini', 'anthropic', ctx).finishReason).toBe('refusal');
    expect(translateResponse(reply('STOP', [{ functionCall: { name: 'f', args: { a: 1 } } }]), 'gemini', 'anthropic', ctx).finishReason).toBe('tool_use');
    expect(translateResponse({ promptFeedback: { blockReason: 'SAFETY' } }, 'gemini', 'openai', ctx).finishReason).toBe('content_filter');
  });

  it('thought parts become reasoning, function calls tool calls with an id when Gemini gave none', () => {
    const { body } = translateResponse(reply('STOP', [{ text: 'pondering', thought: true }, { functionCall: { name: 'get_weather', args: { city: 'Oslo' } } }]), 'gemini', 'openai', ctx);
    const message = (body.choices as Array<{ message: { reasoning_content: string; tool_calls: Array<{ id: string; function: { name: string; arguments: string } }> } }>)[0]!.message;
    expect(message.reasoning_content).toBe('pondering');
    expect(message.tool_calls[0]!.function).toEqual({ name: 'get_weather', arguments: '{"city":"Oslo"}' });
    expect(message.tool_calls[0]!.id).toMatch(/^call_/);
  });
});

describe('the request a Gemini upstream gets', () => {
  it('system instruction, user/model roles, function responses by name, the reserved output limit', () => {
    const body = translateRequest({
      model: 'm',
      max_tokens: 50,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '7 degrees' },
      ],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      stop: ['END'],
    }, 'openai', 'gemini', ctx, 40);
    expect(body).toEqual({
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
      contents: [
        { role: 'user', parts: [{ text: 'Weather?' }] },
        { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Oslo' } } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { content: '7 degrees' } } }] },
      ],
      tools: [{ functionDeclarations: [{ name: 'get_weather', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } } } }] }],
      toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } },
      generationConfig: { maxOutputTokens: 40, stopSequences: ['END'] },
    });
    expect(gemini.chatPath('', 'gemini-2.5-flash', false)).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(gemini.chatPath('/proxy', 'gemini-2.5-flash', true)).toBe('/proxy/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
    expect(gemini.defaultCredentialsHeader).toBe('x-goog-api-key');
  });

  it('refuses what it cannot express, with a 400 naming the field: an image URL, a result answering no call, n>1', () => {
    const refused = (body: unknown): TranslationError => {
      try {
        translateRequest(body, 'openai', 'gemini', ctx);
      } catch (err) {
        if (err instanceof TranslationError) return err;
      }
      throw new Error('not refused');
    };
    expect(refused({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/cat.png' } }] }] }).status).toBe(400);
    expect(refused({ model: 'm', messages: [{ role: 'tool', tool_call_id: 'call_9', content: 'x' }] }).message).toMatch(/answers no tool call/);
    expect(refused({ model: 'm', n: 2, messages: [{ role: 'user', content: 'x' }] }).param).toBe('n');
  });

  it('turns thinking off with a zero budget, and on with a budget and thoughts included', () => {
    const off = translateRequest({ model: 'm', reasoning_effort: 'none', messages: [{ role: 'user', content: 'x' }] }, 'openai', 'gemini', ctx);
    expect((off.generationConfig as Record<string, unknown>).thinkingConfig).toEqual({ thinkingBudget: 0 });
    const on = translateRequest({ model: 'm', max_tokens: 1000, thinking: { type: 'enabled', budget_tokens: 1500 }, messages: [{ role: 'user', content: 'x' }] }, 'anthropic', 'gemini', ctx);
    expect((on.generationConfig as Record<string, unknown>).thinkingConfig).toEqual({ thinkingBudget: 1500, includeThoughts: true });
  });

  it('counts a body for the worst case: its contents and system instruction, its inline images', () => {
    const image = pngBase64(2, 2);
    const shape = gemini.bodyShape({ systemInstruction: { parts: [{ text: 's' }] }, contents: [{ role: 'user', parts: [{ text: 'a' }, { inlineData: { mimeType: 'image/png', data: image } }, { inlineData: { mimeType: 'application/pdf', data: 'JVBERi0=' } }] }] });
    expect(shape.messages).toBe(2);
    expect(shape.images).toHaveLength(1);
    expect(shape.images[0]!.payloadBytes).toBe(JSON.stringify(image).length);
    // One tile on Gemini 2.x (258), Gemini 3's default 1,120: the larger.
    expect(shape.images[0]!.tokens).toBe(1120);
  });
});

describe('a Gemini stream', () => {
  const event = (data: unknown) => ({ data: JSON.stringify(data) });

  it('to an Anthropic client: the chunk with the finish reason ends it, with the final usage', () => {
    const t = createStreamTranslator('gemini', 'anthropic', ctx);
    let out = t.push(event({ candidates: [{ content: { parts: [{ text: 'Hel' }] } }], usageMetadata: { promptTokenCount: 9 }, responseId: 'r' }));
    out += t.push(event({ candidates: [{ content: { parts: [{ text: 'lo' }] } }], usageMetadata: { promptTokenCount: 9 } }));
    expect(t.state).toBe('open');
    out += t.push(event({ candidates: [{ content: { parts: [] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 2, thoughtsTokenCount: 4 } }));
    expect(t.state).not.toBe('open');
    expect(out).toContain('"text":"Hel"');
    expect(out).toContain('event: message_stop');
    expect(t.usage).toEqual({ input: 9, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 6, reasoning: 4 });
  });

  it('an error event is an in-band error for the client, overload kept as overload', () => {
    const t = createStreamTranslator('gemini', 'openai', ctx);
    t.push(event({ candidates: [{ content: { parts: [{ text: 'a' }] } }] }));
    const out = t.push(event({ error: { code: 503, message: 'The model is overloaded.', status: 'UNAVAILABLE' } }));
    expect(t.state).toBe('failed');
    expect(out).toContain('The model is overloaded.');
    expect(out).toContain('service_unavailable_error');
  });
});
