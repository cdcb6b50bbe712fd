import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anthropicInputTokens, openaiInputTokens } from '../../src/simulator/input-tokens.js';
import { TOOL_RESULT_PREFIX, exampleFromSchema, planReply, type PlanInput } from '../../src/simulator/reply.js';
import { WORDS, countTokens, encode } from '../../src/simulator/tokenizer.js';

const base = (over: Partial<PlanInput> = {}): PlanInput => {
  let n = 0;
  return {
    lastUserText: 'hello there',
    afterToolResult: false,
    tools: [],
    allowParallel: true,
    reasoning: false,
    replyTokens: 24,
    reasoningTokens: 16,
    nextToolId: () => `call_${++n}`,
    ...over,
  };
};

describe('simulator vocabulary and token pieces', () => {
  it('every word with its leading space is exactly one o200k_base token', () => {
    expect(WORDS.length).toBeGreaterThanOrEqual(64);
    for (const w of WORDS) {
      expect(w.startsWith(' ')).toBe(true);
      expect(encode(w), w).toHaveLength(1);
    }
  });

  it('a reply re-tokenizes to exactly its number of pieces (text and reasoning)', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 200 }), fc.boolean(), (text, n, afterTool) => {
        const plan = planReply(base({ lastUserText: text, replyTokens: n, afterToolResult: afterTool, reasoning: true }));
        expect(countTokens(plan.text.join(''))).toBe(plan.text.length);
        expect(countTokens(plan.reasoning.join(''))).toBe(plan.reasoning.length);
        expect(plan.outputTokens).toBe(plan.text.length + plan.reasoning.length);
        for (const piece of [...plan.text, ...plan.reasoning]) expect(encode(piece)).toHaveLength(1);
      }),
    );
  });

  it('is deterministic in the last user message and differs across messages', () => {
    const a = planReply(base({ lastUserText: 'alpha' })).text.join('');
    expect(planReply(base({ lastUserText: 'alpha' })).text.join('')).toBe(a);
    expect(planReply(base({ lastUserText: 'beta' })).text.join('')).not.toBe(a);
    expect(planReply(base()).text).toHaveLength(24);
  });

  it('truncates at the output cap, reasoning first, and reports length', () => {
    const capped = planReply(base({ maxTokens: 5 }));
    expect(capped.text).toHaveLength(5);
    expect(capped.finish).toBe('length');
    const reasoningEatsAll = planReply(base({ reasoning: true, maxTokens: 10 }));
    expect(reasoningEatsAll.reasoning).toHaveLength(10);
    expect(reasoningEatsAll.text).toHaveLength(0);
    expect(reasoningEatsAll.finish).toBe('length');
    expect(planReply(base({ maxTokens: 24 })).finish).toBe('stop');
  });

  it('after a tool result the text begins with the fixed prefix', () => {
    const plan = planReply(base({ afterToolResult: true, tools: [{ name: 't', schema: {} }] }));
    expect(plan.text.join('').startsWith(TOOL_RESULT_PREFIX + ' ')).toBe(true);
    expect(plan.toolCalls).toHaveLength(0);
    expect(plan.finish).toBe('stop');
  });
});

describe('simulator tool calls', () => {
  const tools = [
    { name: 'get_weather', schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    { name: 'get_time', schema: { type: 'object', properties: {} } },
    { name: 'third', schema: { type: 'object' } },
    { name: 'fourth', schema: { type: 'object' } },
  ];

  it('fills required properties from the schema recursively', () => {
    const schema = {
      type: 'object',
      properties: {
        s: { type: 'string' },
        n: { type: 'number' },
        i: { type: 'integer' },
        b: { type: 'boolean' },
        e: { enum: ['x', 'y'] },
        arr: { type: 'array', items: { type: 'integer' } },
        nested: { type: 'object', properties: { deep: { type: ['string', 'null'] }, skip: { type: 'string' } }, required: ['deep'] },
        optional: { type: 'string' },
      },
      required: ['s', 'n', 'i', 'b', 'e', 'arr', 'nested'],
    };
    expect(exampleFromSchema(schema)).toEqual({ s: 'example', n: 1, i: 1, b: true, e: 'x', arr: [1], nested: { deep: 'example' } });
  });

  it('calls the first tool, the forced tool, or up to three tools when asked for "parallel"', () => {
    const single = planReply(base({ tools }));
    expect(single.finish).toBe('tool_calls');
    expect(single.toolCalls.map((c) => c.name)).toEqual(['get_weather']);
    expect(JSON.parse(single.toolCalls[0]!.args)).toEqual({ city: 'example' });
    expect(planReply(base({ tools, forcedTool: 'get_time' })).toolCalls.map((c) => c.name)).toEqual(['get_time']);
    const par = planReply(base({ tools, lastUserText: 'do these in parallel please' }));
    expect(par.toolCalls.map((c) => c.name)).toEqual(['get_weather', 'get_time', 'third']);
    expect(new Set(par.toolCalls.map((c) => c.id)).size).toBe(3);
    expect(planReply(base({ tools, lastUserText: 'parallel', allowParallel: false })).toolCalls).toHaveLength(1);
  });

  it('splits arguments into 2+ fragments whose token counts sum to the argument tokens', () => {
    for (const t of tools) {
      const [call] = planReply(base({ tools: [t] })).toolCalls;
      expect(call!.argPieces.length).toBeGreaterThanOrEqual(2);
      expect(call!.argPieces.map((p) => p.text).join('')).toBe(call!.args);
      expect(call!.argPieces.reduce((s, p) => s + p.tokens, 0)).toBe(countTokens(call!.args));
      expect(call!.tokens).toBe(countTokens(call!.name) + countTokens(call!.args));
    }
  });
});

// The gateway's reservation bound: UTF-8 bytes of all text + tool definitions + tool arguments,
// +16 per message, +1,600 per image. Written here independently of the simulator's counter.
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

describe('simulator input tokens never exceed the gateway reservation bound', () => {
  const text = fc.string({ unit: 'grapheme', maxLength: 200 });
  const schema = fc.dictionary(fc.string({ maxLength: 10 }), fc.constantFrom({ type: 'string' }, { type: 'number' }));
  const openaiPart = fc.oneof(
    text.map((t) => ({ type: 'text', text: t })),
    fc.constant({ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }),
  );
  const openaiMessage = fc.oneof(
    fc.record({ role: fc.constantFrom('system', 'user', 'developer'), content: fc.oneof(text, fc.array(openaiPart, { maxLength: 4 })) }),
    fc.record({
      role: fc.constant('assistant'),
      content: fc.constant(null),
      tool_calls: fc.array(
        fc.record({ id: fc.constant('call_1'), type: fc.constant('function'), function: fc.record({ name: fc.constant('f'), arguments: text }) }),
        { maxLength: 3 },
      ),
    }),
    fc.record({ role: fc.constant('tool'), tool_call_id: fc.constant('call_1'), content: text }),
  );
  const openaiTool = fc.record({ type: fc.constant('function'), function: fc.record({ name: fc.constant('f'), parameters: schema }) });

  it('OpenAI requests', () => {
    fc.assert(
      fc.property(fc.array(openaiMessage, { minLength: 1, maxLength: 8 }), fc.array(openaiTool, { maxLength: 3 }), (messages, tools) => {
        let bound = tools.reduce((s, t) => s + bytes(JSON.stringify(t)), 0);
        for (const m of messages) {
          bound += 16;
          if (typeof m.content === 'string') bound += bytes(m.content);
          else if (Array.isArray(m.content)) for (const p of m.content) bound += 'text' in p ? bytes(p.text) : 1600;
          if ('tool_calls' in m) for (const c of m.tool_calls) bound += bytes(c.function.arguments);
        }
        const counted = openaiInputTokens({ model: 'm', messages, tools });
        expect(counted).toBeLessThanOrEqual(bound);
        expect(counted).toBeGreaterThanOrEqual(4 * messages.length);
      }),
      { numRuns: 300 },
    );
  });

  const anthropicBlock = fc.oneof(
    text.map((t) => ({ type: 'text' as const, text: t })),
    fc.constant({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }),
    fc.record({ type: fc.constant('tool_use'), id: fc.constant('toolu_1'), name: fc.constant('f'), input: fc.dictionary(fc.string({ maxLength: 8 }), text) }),
    fc.record({ type: fc.constant('tool_result'), tool_use_id: fc.constant('toolu_1'), content: text }),
  );
  const anthropicMessage = fc.record({ role: fc.constantFrom('user', 'assistant'), content: fc.oneof(text, fc.array(anthropicBlock, { maxLength: 4 })) });

  it('Anthropic requests', () => {
    fc.assert(
      fc.property(
        fc.array(anthropicMessage, { minLength: 1, maxLength: 8 }),
        text,
        fc.array(fc.record({ name: fc.constant('f'), input_schema: schema }), { maxLength: 3 }),
        (messages, system, tools) => {
          let bound = bytes(system) + tools.reduce((s, t) => s + bytes(JSON.stringify(t)), 0);
          for (const m of messages) {
            bound += 16;
            if (typeof m.content === 'string') {
              bound += bytes(m.content);
              continue;
            }
            for (const b of m.content) {
              if (b.type === 'text') bound += bytes(b.text);
              else if (b.type === 'image') bound += 1600;
              else if (b.type === 'tool_use') bound += bytes(JSON.stringify(b.input));
              else bound += bytes(b.content);
            }
          }
          const counted = anthropicInputTokens({ model: 'm', max_tokens: 1, system, messages, tools });
          expect(counted).toBeLessThanOrEqual(bound);
          expect(counted).toBeGreaterThanOrEqual(4 * messages.length);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('counts every part with the real tokenizer', () => {
    const n = openaiInputTokens({
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: [{ type: 'text', text: 'Look' }, { type: 'image_url', image_url: { url: 'x' } }] },
        { role: 'assistant', content: null, tool_calls: [{ function: { name: 'f', arguments: '{"a":1}' } }] },
        { role: 'tool', tool_call_id: 'c', content: 'done' },
      ],
      tools: [{ type: 'function', function: { name: 'f' } }],
    });
    const expected =
      4 * 4 + countTokens('You are terse.') + countTokens('Look') + 85 + countTokens('{"a":1}') + countTokens('done') +
      countTokens(JSON.stringify({ type: 'function', function: { name: 'f' } }));
    expect(n).toBe(expected);
  });
});

describe('scripted tool turn', () => {
  const base = { lastUserText: 'do it', allowParallel: true, reasoning: false, replyTokens: 10, reasoningTokens: 0, nextToolId: () => 'call_1' };
  const tools = [{ name: 'first', schema: { type: 'object' } }, { name: 'exec_command', schema: { type: 'object', properties: { cmd: { type: 'string' } } } }];
  const script = { tool: 'exec_command', arguments: { cmd: 'echo hi' } };

  it('calls the scripted tool with its arguments when declared, else behaves as unscripted', () => {
    const plan = planReply({ ...base, afterToolResult: false, tools, script });
    expect(plan.toolCalls.map((c) => [c.name, JSON.parse(c.args)])).toEqual([['exec_command', { cmd: 'echo hi' }]]);
    expect(plan.finish).toBe('tool_calls');
    const without = planReply({ ...base, afterToolResult: false, tools: [tools[0] as (typeof tools)[0]], script });
    expect(without.toolCalls.map((c) => c.name)).toEqual(['first']);
  });

  it('answers the tool result by quoting it, with output tokens counted', () => {
    const plan = planReply({ ...base, afterToolResult: true, tools: [], script, toolResultText: 'hi there\n' });
    expect(plan.text.join('')).toBe('The tool returned: hi there');
    expect(plan.outputTokens).toBe(plan.text.length);
    expect(plan.finish).toBe('stop');
  });
});
