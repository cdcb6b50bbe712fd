// Thinking only when asked (issue 32, item 6): a Messages client that does not enable thinking gets no
// thinking block, as Anthropic's own API behaves (the common `message.content[0].text` then reads the
// answer), whole or streamed; one that enables thinking gets it first. The reasoning is billed either
// way: it is output the upstream generated. Official @anthropic-ai/sdk client, a reasoning model served
// by an OpenAI-format upstream and by a Gemini one (the bundled simulator), over loopback.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';

const REASONING_MODEL = 'glm-5.3-xploded';

describe.each<UpstreamFormatName>(['openai', 'gemini'])('a reasoning model behind a %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat });
  });
  afterAll(async () => {
    await h?.close();
  });
  const client = () => new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });

  it('without `thinking`: no thinking block, content[0] is the answer, and the reasoning is still billed', async () => {
    const msg = await client().messages.create({ model: REASONING_MODEL, max_tokens: 400, messages: [{ role: 'user', content: 'Why is the sky blue?' }] });
    expect(msg.content.map((b) => b.type)).toEqual(['text']);
    expect(msg.content[0]?.type === 'text' && msg.content[0].text.length > 0).toBe(true);
    await h.settled();
    const [record] = await h.backend.ledger.listUsage(h.accountId, { limit: 1 });
    // Behind an OpenAI-format upstream the model reasons whatever the request says (the simulator's
    // reasoning models always do, as GLM and Qwen do): those tokens are billed though not shown. A Gemini
    // upstream is asked for thoughts only when the client enabled thinking, so it has none to bill.
    if (upstreamFormat === 'openai') expect(record?.usage.reasoning ?? 0).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBe(record?.usage.output);
  });

  it('without `thinking`, streamed: no thinking block is opened, and the first block is text', async () => {
    const stream = client().messages.stream({ model: REASONING_MODEL, max_tokens: 400, messages: [{ role: 'user', content: 'Tell me a story' }] });
    const starts: string[] = [];
    stream.on('streamEvent', (e) => {
      if (e.type === 'content_block_start') starts.push(e.content_block.type);
    });
    const msg = await stream.finalMessage();
    expect(starts).toEqual(['text']);
    expect(msg.content[0]?.type).toBe('text');
  });

  it('with thinking enabled: the thinking block comes first, then the answer', async () => {
    const msg = await client().messages.create({ model: REASONING_MODEL, max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2000 }, messages: [{ role: 'user', content: 'Why is the sky blue?' }] });
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
  });
});

/** The usage record of one request, once settled. */
async function recordOf(h: Harness, requestId: string | null) {
  expect(requestId).toBeTruthy();
  await h.settled();
  const record = (await h.backend.ledger.listUsage(h.accountId, { limit: 100 })).find((r) => r.requestId === requestId);
  expect(record, `usage record of ${requestId}`).toBeDefined();
  return record as NonNullable<typeof record>;
}

// An Anthropic-format upstream that thinks without being asked (some Anthropic-compatible servers do;
// the simulator's `anthropicThinksUnasked`): the client's own format, so the reply is passed through.
describe('a reasoning model behind an Anthropic-format upstream that thinks unasked (same-format pass-through)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'anthropic', simulator: { anthropicThinksUnasked: true } });
  });
  afterAll(async () => {
    await h?.close();
  });
  const client = () => new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
  const ASK = { model: REASONING_MODEL, max_tokens: 4000, messages: [{ role: 'user' as const, content: 'Why is the sky blue?' }] };
  const THINK = { thinking: { type: 'enabled' as const, budget_tokens: 2000 } };

  it('without `thinking`: content[0] is the text, and the charge is that of the same reply with thinking shown', async () => {
    const hidden = await client().messages.create(ASK).withResponse();
    expect(hidden.data.content.map((b) => b.type)).toEqual(['text']);
    expect(hidden.data.content[0]?.type === 'text' && hidden.data.content[0].text.length > 0).toBe(true);
    const shown = await client().messages.create({ ...ASK, ...THINK }).withResponse();
    expect(shown.data.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    // The thinking was generated either way: same output tokens, same charge.
    expect(hidden.data.usage.output_tokens).toBe(shown.data.usage.output_tokens);
    const [a, b] = [await recordOf(h, hidden.response.headers.get('x-request-id')), await recordOf(h, shown.response.headers.get('x-request-id'))];
    expect(a.usage).toEqual(b.usage);
    expect(a.cost).toBe(b.cost);
    expect(a.cost).toBeGreaterThan(0);
  });

  it('with thinking disabled: no thinking block either', async () => {
    const msg = await client().messages.create({ ...ASK, thinking: { type: 'disabled' } });
    expect(msg.content.map((b) => b.type)).toEqual(['text']);
  });

  it('streamed without `thinking`: no thinking block is opened, the text block is index 0, and the SDK assembles it', async () => {
    const stream = client().messages.stream(ASK);
    const events: Array<{ type: string; index?: number }> = [];
    stream.on('streamEvent', (e) => events.push({ type: e.type, ...('index' in e ? { index: e.index } : {}) }));
    const { response } = await stream.withResponse();
    const msg = await stream.finalMessage();
    expect(msg.content.map((b) => b.type)).toEqual(['text']);
    expect(msg.content[0]?.type === 'text' && msg.content[0].text.length > 0).toBe(true);
    const blockEvents = events.filter((e) => e.type.startsWith('content_block_'));
    expect(blockEvents.length).toBeGreaterThan(2);
    for (const e of blockEvents) expect(e.index).toBe(0);
    const streamed = await recordOf(h, response.headers.get('x-request-id'));
    const shown = await client().messages.create({ ...ASK, ...THINK }).withResponse();
    expect(streamed.usage).toEqual((await recordOf(h, shown.response.headers.get('x-request-id'))).usage);
  });

  it('streamed with a tool call after hidden thinking: the tool block is renumbered to index 0', async () => {
    const tool = { name: 'get_weather', description: 'Weather by city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } };
    const stream = client().messages.stream({ ...ASK, tools: [tool], tool_choice: { type: 'tool', name: 'get_weather' }, messages: [{ role: 'user', content: 'Weather in Paris?' }] });
    const indexes: number[] = [];
    stream.on('streamEvent', (e) => {
      if (e.type === 'content_block_start' || e.type === 'content_block_delta' || e.type === 'content_block_stop') indexes.push(e.index);
    });
    const msg = await stream.finalMessage();
    expect(msg.content.map((b) => b.type)).toEqual(['tool_use']);
    expect(new Set(indexes)).toEqual(new Set([0]));
  });

  it('streamed with thinking enabled: the thinking block comes first, as generated', async () => {
    const msg = await client().messages.stream({ ...ASK, ...THINK }).finalMessage();
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
  });
});

// The Responses API: reasoning items only when `reasoning` is set or `include` asks for
// reasoning.encrypted_content. Behind an OpenAI-format upstream the simulator's reasoning models reason
// unless the effort is none; behind an Anthropic-format one that thinks unasked, likewise.
describe.each<UpstreamFormatName>(['openai', 'anthropic'])('the Responses API, a reasoning model behind a %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  let openai: OpenAI;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat, simulator: { anthropicThinksUnasked: true } });
    openai = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });
  const ASK = { model: REASONING_MODEL, max_output_tokens: 4000, input: 'Why is the sky blue?' };

  it('without `reasoning`: no reasoning item, the message first, the reasoning tokens still in usage and billed like a shown one', async () => {
    const hidden = await openai.responses.create(ASK).withResponse();
    expect(hidden.data.output.map((o) => o.type)).toEqual(['message']);
    expect(hidden.data.output_text.length).toBeGreaterThan(0);
    const shown = await openai.responses.create({ ...ASK, reasoning: { effort: 'medium' } }).withResponse();
    expect(shown.data.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    const [a, b] = [await recordOf(h, hidden.response.headers.get('x-request-id')), await recordOf(h, shown.response.headers.get('x-request-id'))];
    expect(a.usage.output).toBe(b.usage.output);
    expect(a.cost).toBe(b.cost);
    // An OpenAI-format upstream says how much of the output was reasoning; it is billed though not shown.
    if (upstreamFormat === 'openai') {
      expect(hidden.data.usage?.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
      expect(a.usage.reasoning).toBe(hidden.data.usage?.output_tokens_details.reasoning_tokens);
    }
  });

  it('with include reasoning.encrypted_content only: the reasoning item is there, with its envelope', async () => {
    const r = await openai.responses.create({ ...ASK, include: ['reasoning.encrypted_content'] });
    expect(r.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    const item = r.output[0];
    expect(item?.type === 'reasoning' && typeof item.encrypted_content === 'string').toBe(true);
  });

  it('streamed without `reasoning`: no reasoning item or summary event, output_index from 0, same charge as shown', async () => {
    const { data: stream, response } = await openai.responses.create({ ...ASK, stream: true }).withResponse();
    const types: string[] = [];
    const indexes: number[] = [];
    let completed: OpenAI.Responses.Response | undefined;
    for await (const e of stream) {
      types.push(e.type);
      if ('output_index' in e) indexes.push(e.output_index);
      if (e.type === 'response.output_item.added') expect(e.item.type).toBe('message');
      if (e.type === 'response.completed') completed = e.response;
    }
    expect(types.filter((t) => t.includes('reasoning'))).toEqual([]);
    expect(new Set(indexes)).toEqual(new Set([0]));
    expect(completed?.output.map((o) => o.type)).toEqual(['message']);
    const hidden = await recordOf(h, response.headers.get('x-request-id'));
    const { data: shownStream, response: shownResponse } = await openai.responses.create({ ...ASK, stream: true, reasoning: { effort: 'medium', summary: 'auto' } }).withResponse();
    const shownTypes: string[] = [];
    for await (const e of shownStream) if (e.type === 'response.output_item.added') shownTypes.push(e.item.type);
    expect(shownTypes).toEqual(['reasoning', 'message']);
    const shown = await recordOf(h, shownResponse.headers.get('x-request-id'));
    expect(hidden.usage).toEqual(shown.usage);
    expect(hidden.cost).toBe(shown.cost);
  });
});

// Reasoning the client was not sent is still the model's: a follow-up through previous_response_id gives
// it back to an OpenAI-format reasoning upstream (DeepSeek, Kimi and the like need it in tool loops).
describe('the Responses API keeps hidden reasoning in the stored context', () => {
  let h: Harness;
  let openai: OpenAI;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'openai' });
    openai = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });
  const WEATHER = { type: 'function' as const, name: 'get_weather', description: 'Weather by city', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };

  it.each([false, true])('a tool turn without `reasoning` (stream: %s): no reasoning item sent, its reasoning sent upstream on the follow-up', async (stream) => {
    const ask = { model: REASONING_MODEL, max_output_tokens: 4000, tools: [WEATHER], tool_choice: 'required' as const, input: 'Weather in Paris?' };
    let first: OpenAI.Responses.Response | undefined;
    if (stream) {
      for await (const e of await openai.responses.create({ ...ask, stream: true })) if (e.type === 'response.completed') first = e.response;
    } else {
      first = await openai.responses.create(ask);
    }
    expect(first?.output.map((o) => o.type)).toEqual(['function_call']);
    const call = first?.output[0];
    if (call?.type !== 'function_call') throw new Error('no function call');
    const before = h.simulator.requests.length;
    const second = await openai.responses.create({ model: REASONING_MODEL, max_output_tokens: 4000, tools: [WEATHER], previous_response_id: first?.id ?? '', input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }] });
    expect(second.output.map((o) => o.type)).toEqual(['message']);
    const sent = h.simulator.requests[before]?.body as { messages: Array<{ role: string; reasoning_content?: string; tool_calls?: unknown[] }> };
    const assistant = sent.messages.find((m) => m.role === 'assistant');
    expect(assistant?.tool_calls).toHaveLength(1);
    expect(assistant?.reasoning_content?.length).toBeGreaterThan(0);
  });
});
