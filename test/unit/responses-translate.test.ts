// The Responses API translator on its own: namespace tools flattened for the upstream and restored on
// the calls the client gets back; hosted tools dropped and named; input items mapped in order (function
// calls merged into one assistant turn, their outputs as tool results); reasoning envelopes accepted
// only when ours and this account's.
import { describe, expect, it } from 'vitest';
import { decodeResponsesRequest, type ResponsesDecodeContext } from '../../src/formats/openai-responses/request.js';
import { encodeResponsesResponse } from '../../src/formats/openai-responses/response.js';
import { sealEnvelope } from '../../src/formats/openai-responses/reasoning-envelope.js';

const key = Buffer.alloc(32, 7);
const ctx: ResponsesDecodeContext = { priorItems: [], resolveItem: () => undefined, envelopeKey: key, accountTag: 'acct-a' };

describe('Responses translation', () => {
  it('flattens namespace tools for the upstream and gives calls back their namespace', () => {
    const decoded = decodeResponsesRequest(
      {
        model: 'm',
        input: 'go',
        tools: [
          { type: 'namespace', name: 'multi_agent_v1', tools: [{ type: 'function', name: 'close_agent', parameters: { type: 'object', $schema: 'x' } }] },
          { type: 'web_search' },
          { type: 'function', name: 'plain', parameters: null },
        ],
      },
      ctx,
    );
    expect(decoded.internal.tools.map((t) => t.name)).toEqual(['multi_agent_v1__close_agent', 'plain']);
    expect(decoded.internal.tools[0]?.parameters).toEqual({ type: 'object' });
    expect(decoded.droppedTools).toEqual(['web_search']);
    const out = encodeResponsesResponse(
      { id: 'x', model: 'm', content: [{ type: 'tool_call', id: 'call_1', name: 'multi_agent_v1__close_agent', input: { id: 3 } }], finishReason: 'tool_calls', stopSequence: null, usage: { input: 5, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 2, reasoning: 0 } },
      { id: 'resp_1', createdAt: 1, model: 'm', request: decoded, envelopeKey: key, accountTag: 'acct-a' },
    );
    expect(out.body.output).toEqual([{ id: 'fc_1_0', type: 'function_call', status: 'completed', call_id: 'call_1', name: 'close_agent', namespace: 'multi_agent_v1', arguments: '{"id":3}' }]);
    expect(out.body.usage).toEqual({ input_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 7 });
  });

  it('maps items in order: consecutive calls in one assistant turn, outputs as tool results, developer as system', () => {
    const decoded = decodeResponsesRequest(
      {
        model: 'm',
        instructions: 'Be brief.',
        input: [
          { role: 'developer', content: 'Use tools.' },
          { role: 'user', content: [{ type: 'input_text', text: 'Two things.' }] },
          { type: 'function_call', call_id: 'c1', name: 'a', arguments: '{}' },
          { type: 'function_call', call_id: 'c2', name: 'b', arguments: '{"x":1}', id: 'fc_9' },
          { type: 'function_call_output', call_id: 'c1', output: 'one', id: 'fco_1' },
          { type: 'function_call_output', call_id: 'c2', output: 'two' },
          { type: 'web_search_call', id: 'ws_1' },
        ],
      },
      ctx,
    );
    expect(decoded.internal.system).toEqual(['Be brief.', 'Use tools.']);
    expect(decoded.internal.messages.map((m) => [m.role, m.content.map((p) => p.type)])).toEqual([
      ['user', ['text']],
      ['assistant', ['tool_call', 'tool_call']],
      ['user', ['tool_result', 'tool_result']],
    ]);
    // The call id is the call_id, never the item id.
    expect(decoded.internal.messages[1]?.content.map((p) => (p.type === 'tool_call' ? p.id : ''))).toEqual(['c1', 'c2']);
  });

  it("takes back only our own envelope, for this account; drops another's or a forged one", () => {
    const thinking = [{ type: 'thinking' as const, text: 'plan', signature: 'sig' }];
    const mine = sealEnvelope(thinking, key, 'acct-a');
    const input = (enc: string) => [{ role: 'user', content: 'q' }, { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: enc }, { role: 'assistant', content: 'a' }, { role: 'user', content: 'q2' }];
    const parts = (enc: string) => decodeResponsesRequest({ model: 'm', input: input(enc) }, ctx).internal.messages[1]?.content.map((p) => p.type);
    expect(parts(mine)).toEqual(['thinking', 'text']);
    expect(parts(sealEnvelope(thinking, key, 'acct-b'))).toEqual(['text']);
    expect(parts(sealEnvelope(thinking, Buffer.alloc(32, 8), 'acct-a'))).toEqual(['text']);
    expect(parts('gAAAAopenai-ciphertext')).toEqual(['text']);
  });
});
