// Round-trip properties across the codecs: tool ids unchanged, arguments JSON equal to input objects.
import fc from 'fast-check';
import { createParser } from 'eventsource-parser';
import { describe, expect, it } from 'vitest';
import {
  createStreamTranslator, translateRequest, translateResponse, type SseEvent, type StreamTranslationContext,
} from '../../src/translate/translation.js';

type Obj = Record<string, unknown>;
const ctx: StreamTranslationContext = {
  upstreamModel: 'up', clientModel: 'client', supportsReasoning: true, defaultMaxOutputTokens: 4096, requestId: 'req_rt', includeUsage: true, inputTokenEstimate: 10,
};

const toolId = fc.stringMatching(/^(toolu_|call_)[a-zA-Z0-9_-]{1,24}$/);
const toolName = fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_-]{0,30}$/);
// JSON text -> object guarantees a JSON-representable input (no -0, no undefined).
const toolInput = fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })
  .map((o) => JSON.parse(JSON.stringify(o)) as Obj);
const calls = fc.uniqueArray(fc.record({ id: toolId, name: toolName, input: toolInput }), { minLength: 1, maxLength: 4, selector: (c) => c.id });

function sseEvents(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  createParser({ onEvent: (e) => out.push({ ...(e.event ? { event: e.event } : {}), data: e.data }) }).feed(text);
  return out;
}

describe('request round trips', () => {
  it('Anthropic tool_use -> OpenAI tool_calls -> Anthropic tool_use keeps ids, names and inputs', () => {
    fc.assert(fc.property(calls, (cs) => {
      const anthropic = {
        model: 'm', max_tokens: 100,
        messages: [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: cs.map((c) => ({ type: 'tool_use', ...c })) },
          { role: 'user', content: cs.map((c) => ({ type: 'tool_result', tool_use_id: c.id, content: `result ${c.id}` })) },
        ],
      };
      const openai = translateRequest(anthropic, 'anthropic', 'openai', ctx);
      const assistant = (openai.messages as Obj[])[1]!;
      const toolCalls = assistant.tool_calls as Array<{ id: string; function: { name: string; arguments: string } }>;
      expect(toolCalls.map((t) => t.id)).toEqual(cs.map((c) => c.id));
      expect(toolCalls.map((t) => JSON.parse(t.function.arguments) as unknown)).toEqual(cs.map((c) => c.input));
      expect((openai.messages as Obj[]).slice(2).map((m) => m.tool_call_id)).toEqual(cs.map((c) => c.id));

      const back = translateRequest({ ...openai, model: 'm' }, 'openai', 'anthropic', ctx);
      const messages = back.messages as Obj[];
      expect(messages[1]!.content).toEqual(cs.map((c) => ({ type: 'tool_use', ...c })));
      expect((messages[2]!.content as Obj[]).map((b) => b.tool_use_id)).toEqual(cs.map((c) => c.id));
    }), { numRuns: 150 });
  });
});

describe('response round trips', () => {
  it('OpenAI completion -> Anthropic message -> (as an Anthropic upstream) -> OpenAI completion keeps tool calls', () => {
    fc.assert(fc.property(calls, (cs) => {
      const completion = {
        id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'x',
        choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: cs.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } })) }, finish_reason: 'tool_calls' }],
        usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
      };
      const anthropic = translateResponse(completion, 'openai', 'anthropic', ctx).body;
      expect(anthropic.content).toEqual(cs.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.input })));
      const again = translateResponse(anthropic, 'anthropic', 'openai', ctx).body;
      const message = (again.choices as Obj[])[0]!.message as Obj;
      expect(message.tool_calls).toEqual(completion.choices[0]!.message.tool_calls.map((t) => ({ ...t, function: { ...t.function, arguments: JSON.stringify(JSON.parse(t.function.arguments)) } })));
    }), { numRuns: 100 });
  });
});

describe('stream round trips', () => {
  // Arguments cut into arbitrary fragments must reassemble into the same object on the other side.
  const fragmented = calls.chain((cs) => fc.tuple(fc.constant(cs), fc.array(fc.array(fc.nat(), { maxLength: 5 }), { minLength: cs.length, maxLength: cs.length })));
  const split = (text: string, cuts: number[]): string[] => {
    const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
    const parts: string[] = [];
    let prev = 0;
    for (const p of [...points, text.length]) { parts.push(text.slice(prev, p)); prev = p; }
    return parts;
  };

  it('OpenAI fragments -> Anthropic input_json_delta blocks parse to the original inputs', () => {
    fc.assert(fc.property(fragmented, ([cs, cuts]) => {
      let upstream = '';
      cs.forEach((c, i) => {
        split(JSON.stringify(c.input), cuts[i]!).forEach((frag, k) => {
          const tc = k === 0 ? { index: i, id: c.id, type: 'function', function: { name: c.name, arguments: frag } } : { index: i, function: { arguments: frag } };
          upstream += `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { tool_calls: [tc] }, finish_reason: null }] })}\n\n`;
        });
      });
      upstream += 'data: [DONE]\n\n';
      const t = createStreamTranslator('openai', 'anthropic', ctx);
      let out = '';
      for (const e of sseEvents(upstream)) out += t.push(e);
      out += t.finish();
      const blocks: Array<{ id: string; name: string; json: string }> = [];
      for (const e of sseEvents(out)) {
        const d = JSON.parse(e.data) as Obj;
        if (d.type === 'content_block_start') {
          const cb = d.content_block as Obj;
          blocks.push({ id: cb.id as string, name: cb.name as string, json: '' });
        } else if (d.type === 'content_block_delta') blocks[d.index as number]!.json += (d.delta as Obj).partial_json as string;
      }
      expect(blocks.map((b) => ({ id: b.id, name: b.name, input: JSON.parse(b.json) as unknown }))).toEqual(cs);
      expect(t.finishReason).toBe('tool_use');
    }), { numRuns: 150 });
  });

  it('Anthropic input_json_delta fragments -> OpenAI tool_calls arguments parse to the original inputs', () => {
    fc.assert(fc.property(fragmented, ([cs, cuts]) => {
      const ev = (d: Obj) => `event: ${d.type as string}\ndata: ${JSON.stringify(d)}\n\n`;
      let upstream = ev({ type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 3, output_tokens: 1 } } });
      upstream += ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }) + ev({ type: 'content_block_stop', index: 0 });
      cs.forEach((c, i) => {
        upstream += ev({ type: 'content_block_start', index: i + 1, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } });
        for (const frag of split(JSON.stringify(c.input), cuts[i]!)) upstream += ev({ type: 'content_block_delta', index: i + 1, delta: { type: 'input_json_delta', partial_json: frag } });
        upstream += ev({ type: 'content_block_stop', index: i + 1 });
      });
      upstream += ev({ type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } }) + ev({ type: 'message_stop' });
      const t = createStreamTranslator('anthropic', 'openai', ctx);
      let out = '';
      for (const e of sseEvents(upstream)) out += t.push(e);
      const acc: Array<{ id: string; name: string; args: string }> = [];
      for (const e of sseEvents(out)) {
        if (e.data === '[DONE]') continue;
        const choice = ((JSON.parse(e.data) as Obj).choices as Obj[])[0];
        for (const tc of ((choice?.delta as Obj | undefined)?.tool_calls as Obj[] | undefined) ?? []) {
          const fn = tc.function as Obj;
          const slot = (acc[tc.index as number] ??= { id: '', name: '', args: '' });
          if (tc.id) slot.id = tc.id as string;
          if (fn.name) slot.name = fn.name as string;
          slot.args += fn.arguments as string;
        }
      }
      expect(acc.map((a) => ({ id: a.id, name: a.name, input: JSON.parse(a.args) as unknown }))).toEqual(cs);
    }), { numRuns: 150 });
  });
});
