// Thinking only when asked (issue 32, item 6): a Messages client that does not enable thinking gets no
// thinking block, as Anthropic's own API behaves (the common `message.content[0].text` then reads the
// answer), whole or streamed; one that enables thinking gets it first. The reasoning is billed either
// way: it is output the upstream generated. Official @anthropic-ai/sdk client, a reasoning model served
// by an OpenAI-format upstream and by a Gemini one (the bundled simulator), over loopback.
import Anthropic from '@anthropic-ai/sdk';
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
