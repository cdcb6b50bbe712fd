// Keep-alive comments on streams during long upstream silences (an upstream thinking before its first
// token): the raw stream carries `: keepalive` comments while the upstream is silent, and the official
// clients, which ignore SSE comments, still read the whole reply.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

const MODEL = 'outlaw-1-xploded';
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ config: { streamKeepAliveMs: 150 } });
});
afterAll(async () => {
  await h?.close();
});

const silentFirstToken = (): void => h.simulator.injectFault({ firstTokenDelayMs: 700, match: { model: `sim-${MODEL}` } });

describe('stream keep-alives', () => {
  it('comments the silence before the first token, in every client format', async () => {
    const requests: Array<[string, Record<string, string>, object]> = [
      ['/v1/chat/completions', { authorization: `Bearer ${h.key}` }, { model: MODEL, stream: true, messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/messages', { 'x-api-key': h.key, 'anthropic-version': '2023-06-01' }, { model: MODEL, stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/responses', { authorization: `Bearer ${h.key}` }, { model: MODEL, stream: true, input: 'hi' }],
    ];
    for (const [path, headers, body] of requests) {
      silentFirstToken();
      const res = await fetch(`${h.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
      const text = await res.text();
      expect(res.status, path).toBe(200);
      expect(text, path).toMatch(/^: keepalive$/m);
    }
  });

  it('the official clients read through the comments', async () => {
    silentFirstToken();
    const openai = new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    let text = '';
    for await (const chunk of await openai.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'hi' }] })) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    silentFirstToken();
    const anthropic = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const message = await anthropic.messages.stream({ model: MODEL, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
    expect(message.content.length).toBeGreaterThan(0);
  });
});
