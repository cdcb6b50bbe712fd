// The cost an answer reports (issue 32, item 2): the settlement's own figure, min(cost, held), from the
// one cost function; USD from the exact decimal text; the cost written into an upstream event's own JSON
// text with nothing else changed; and the thinking-block filter of the Messages pass-through.
import { describe, expect, it } from 'vitest';
import { chargeOf, usdNumber } from '../../src/billing/answer-cost.js';
import { costMicros, formatUsd } from '../../src/billing/money.js';
import { ThinkingBlockFilter, thinkingRequested, withoutThinking } from '../../src/formats/anthropic-messages/index.js';
import { insertUsageCost } from '../../src/relay/usage-cost-text.js';

const pricing = { input: 3_000_000, output: 15_000_000, display: { input: '3', output: '15' } };

describe('chargeOf', () => {
  it('is the cost function of money.ts on the recorded usage, capped at the hold', () => {
    const usage = { input: 1234, output: 567, cachedInput: 0, reasoning: 0 };
    const cost = costMicros(usage, pricing);
    expect(cost).toBe(12_207);
    expect(chargeOf(pricing, 1_000_000)(usage)).toBe(cost);
    expect(chargeOf(pricing, 5_000)(usage)).toBe(5_000);
    // An absurd report is clamped as the ledger records it, never a throw.
    expect(chargeOf(pricing, 100)({ input: -3, output: 1.9, cachedInput: Number.NaN, reasoning: 0 })).toBe(costMicros({ input: 0, output: 1, cachedInput: 0, reasoning: 0 }, pricing));
  });
});

describe('usdNumber', () => {
  it('writes back as the exact decimal of the micro-USD, trailing zeros dropped', () => {
    for (const [micros, text] of [
      [0, '0'],
      [1, '0.000001'],
      [10, '0.00001'],
      [12_207, '0.012207'],
      [1_000_000, '1'],
      [123_456_789_012, '123456.789012'],
      [999_999_999_999_999, '999999999.999999'],
    ] as const) {
      expect(JSON.stringify(usdNumber(micros))).toBe(text);
    }
  });

  it('round-trips every amount of a sample to the same micro-USD (no float product anywhere)', () => {
    for (let m = 0; m < 2_000_000; m += 997) {
      const n = usdNumber(m);
      expect(formatUsd(m).replace(/\.?0+$/, '') || '0').toBe(String(n));
    }
  });
});

describe('insertUsageCost', () => {
  const cost = 0.012207;
  it('adds the cost at the end of the usage object, keeping every other byte', () => {
    const text = '{"id":"x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}}';
    expect(insertUsageCost(text, JSON.parse(text), cost)).toBe('{"id":"x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0},"cost":0.012207}}');
  });

  it('keeps the layout of a usage object that is not last, with spaces, or empty', () => {
    const spaced = '{ "usage" : { "output_tokens" : 5 } , "delta": {"stop_reason":"end_turn","note":"usage}"} }';
    expect(insertUsageCost(spaced, JSON.parse(spaced), cost)).toBe('{ "usage" : { "output_tokens" : 5 ,"cost":0.012207} , "delta": {"stop_reason":"end_turn","note":"usage}"} }');
    const empty = '{"type":"message_delta","usage":{}}';
    expect(insertUsageCost(empty, JSON.parse(empty), cost)).toBe('{"type":"message_delta","usage":{"cost":0.012207}}');
  });

  it('replaces a cost the upstream already reported instead of sending two', () => {
    const text = '{"usage":{"prompt_tokens":9,"cost":0.5}}';
    const out = insertUsageCost(text, JSON.parse(text), cost);
    expect(out).toBe('{"usage":{"prompt_tokens":9,"cost":0.012207}}');
  });

  it('leaves an event without a usage object as it is', () => {
    const text = '{"usage":null}';
    expect(insertUsageCost(text, JSON.parse(text), cost)).toBe(text);
  });
});

describe('thinking only when asked (Messages pass-through)', () => {
  it('reads the request as the translated pairs do', () => {
    expect(thinkingRequested({})).toBe(false);
    expect(thinkingRequested({ thinking: { type: 'disabled' } })).toBe(false);
    expect(thinkingRequested({ thinking: { type: 'enabled', budget_tokens: 1024 } })).toBe(true);
    expect(thinkingRequested({ thinking: { type: 'adaptive' } })).toBe(true);
    expect(thinkingRequested({ output_config: { effort: 'high' } })).toBe(true);
    // A thinking type this gateway does not know is passed on as asked.
    expect(thinkingRequested({ thinking: { type: 'some_future_mode' } })).toBe(true);
  });

  it('drops thinking and redacted thinking blocks from a whole reply', () => {
    expect(withoutThinking([{ type: 'thinking', thinking: 'x', signature: 's' }, { type: 'redacted_thinking', data: 'd' }, { type: 'text', text: 'a' }, { type: 'tool_use', id: 't', name: 'n', input: {} }])).toEqual([
      { type: 'text', text: 'a' },
      { type: 'tool_use', id: 't', name: 'n', input: {} },
    ]);
  });

  it('drops the events of hidden blocks and renumbers the later blocks densely', () => {
    const filter = new ThinkingBlockFilter();
    const events: Array<[string, Record<string, unknown>]> = [
      ['content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '' } }],
      ['content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'hm' } }],
      ['content_block_stop', { index: 0 }],
      ['content_block_start', { index: 1, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { index: 1, delta: { type: 'text_delta', text: 'hi' } }],
      ['content_block_stop', { index: 1 }],
      ['content_block_start', { index: 2, content_block: { type: 'redacted_thinking', data: 'x' } }],
      ['content_block_stop', { index: 2 }],
      ['content_block_start', { index: 3, content_block: { type: 'tool_use', id: 't', name: 'n', input: {} } }],
      ['content_block_stop', { index: 3 }],
    ];
    const kept = events.filter(([name, e]) => filter.apply(name, e) !== 'drop').map(([name, e]) => `${name}:${String(e.index)}`);
    expect(kept).toEqual(['content_block_start:0', 'content_block_delta:0', 'content_block_stop:0', 'content_block_start:1', 'content_block_stop:1']);
  });
});
