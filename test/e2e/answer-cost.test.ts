// The cost of each answer, in the answer (issue 32, item 2): every client format (chat completions,
// messages, Responses) over every upstream format (OpenAI, Anthropic, Gemini), whole and streamed,
// through the official clients. A whole answer has `usage.cost` and the x-tollgate-cost-usd header; a
// stream's final usage event has `usage.cost`. Both are the figure the ledger charged for that request
// id, to the micro-dollar, and the SDKs parse the answers as usual.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatUsd } from '../../src/billing/money.js';
import { usdNumber } from '../../src/billing/answer-cost.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

const MODEL = 'outlaw-1-xploded';
const COST_HEADER = 'x-tollgate-cost-usd';

/** `usage.cost` of an SDK's usage object (the SDKs' types do not know the member; their JSON keeps it). */
const costIn = (usage: unknown): unknown => (typeof usage === 'object' && usage !== null ? (usage as { cost?: unknown }).cost : undefined);

describe.each<UpstreamFormatName>(['openai', 'anthropic', 'gemini'])('over a %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  let openai: OpenAI;
  let anthropic: Anthropic;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat });
    openai = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    anthropic = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The micro-USD the ledger charged the request, once settled. */
  async function charged(requestId: string | null): Promise<number> {
    expect(requestId).toBeTruthy();
    await h.settled();
    const record = (await h.backend.ledger.listUsage(h.accountId, { limit: 100 })).find((r) => r.requestId === requestId);
    expect(record, `usage record of ${requestId}`).toBeDefined();
    expect(record?.cost).toBeGreaterThan(0);
    return record?.cost ?? -1;
  }

  it('chat completions, whole: usage.cost and the header are the charge', async () => {
    const { data, response } = await openai.chat.completions.create({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'What does a tollgate do?' }] }).withResponse();
    expect(data.choices[0]?.message.content?.length).toBeGreaterThan(0);
    const micros = await charged(response.headers.get('x-request-id'));
    expect(costIn(data.usage)).toBe(usdNumber(micros));
    expect(response.headers.get(COST_HEADER)).toBe(formatUsd(micros));
  });

  it('chat completions, streamed with include_usage: the usage chunk has the charge', async () => {
    const { data: stream, response } = await openai.chat.completions
      .create({ model: MODEL, max_tokens: 64, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Stream about tolls.' }] })
      .withResponse();
    let text = '';
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    // Headers leave before the usage is known.
    expect(response.headers.get(COST_HEADER)).toBeNull();
    expect(costIn(usage)).toBe(usdNumber(await charged(response.headers.get('x-request-id'))));
  });

  it('messages, whole: usage.cost and the header are the charge', async () => {
    const { data, response } = await anthropic.messages.create({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'What does a tollgate do?' }] }).withResponse();
    expect(data.content[0]?.type).toBe('text');
    const micros = await charged(response.headers.get('x-request-id'));
    expect(costIn(data.usage)).toBe(usdNumber(micros));
    expect(response.headers.get(COST_HEADER)).toBe(formatUsd(micros));
  });

  it("messages, streamed: message_delta's usage has the charge, and the SDK's final message is whole", async () => {
    const stream = anthropic.messages.stream({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'Stream about tolls.' }] });
    let usage: unknown;
    stream.on('streamEvent', (e) => {
      if (e.type === 'message_delta') usage = e.usage;
    });
    const { response } = await stream.withResponse();
    const message = await stream.finalMessage();
    expect(message.content[0]?.type).toBe('text');
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    expect(costIn(usage)).toBe(usdNumber(await charged(response.headers.get('x-request-id'))));
  });

  it('responses, whole: usage.cost and the header are the charge', async () => {
    const { data, response } = await openai.responses.create({ model: MODEL, max_output_tokens: 64, input: 'What does a tollgate do?' }).withResponse();
    expect(data.output_text.length).toBeGreaterThan(0);
    const micros = await charged(response.headers.get('x-request-id'));
    expect(costIn(data.usage)).toBe(usdNumber(micros));
    expect(response.headers.get(COST_HEADER)).toBe(formatUsd(micros));
  });

  it("responses, streamed: response.completed's usage has the charge", async () => {
    const { data: stream, response } = await openai.responses.create({ model: MODEL, max_output_tokens: 64, input: 'Stream about tolls.', stream: true }).withResponse();
    let usage: unknown;
    for await (const event of stream) if (event.type === 'response.completed') usage = event.response.usage;
    expect(costIn(usage)).toBe(usdNumber(await charged(response.headers.get('x-request-id'))));
  });
});
