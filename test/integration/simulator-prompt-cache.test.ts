// The simulator's prompt caching (src/simulator/prompt-cache.ts), which the cache-price tests rely on:
// Anthropic cache_control breakpoints are written once (1 hour when their ttl says so, else 5 minutes)
// and read after; OpenAI prompts under a prompt_cache_key read the longest run of leading messages seen
// before; nothing is cached unless the simulator is started with promptCache.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anthropicInputTokens, openaiInputTokens } from '../../src/simulator/input-tokens.js';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';

let sim: Simulator;
let plain: Simulator;

beforeAll(async () => {
  sim = await startSimulator({ promptCache: true });
  plain = await startSimulator();
});
afterAll(async () => {
  await sim.close();
  await plain.close();
});

const SYSTEM = [{ type: 'text' as const, text: 'Shop rules, long and stable. '.repeat(10), cache_control: { type: 'ephemeral' as const, ttl: '1h' as const } }];
const turn = (text: string) => [{ role: 'user' as const, content: [{ type: 'text' as const, text, cache_control: { type: 'ephemeral' as const } }] }];

describe('Anthropic cache_control breakpoints', () => {
  it('writes each breakpoint once, by its ttl, then reads the longest prefix seen', async () => {
    const client = new Anthropic({ apiKey: 'k', baseURL: sim.anthropicBaseUrl, maxRetries: 0 });
    const systemTokens = anthropicInputTokens({ system: SYSTEM, messages: [] });
    const first = { model: 'sim-chat', max_tokens: 50, system: SYSTEM, messages: turn('First question?') };
    const all = anthropicInputTokens(first);
    const a = await client.messages.create(first);
    expect(a.usage).toMatchObject({
      input_tokens: 0,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: all,
      cache_creation: { ephemeral_1h_input_tokens: systemTokens, ephemeral_5m_input_tokens: all - systemTokens },
    });
    // The same prompt again: all of it read.
    const again = await client.messages.create(first);
    expect(again.usage).toMatchObject({ input_tokens: 0, cache_read_input_tokens: all, cache_creation_input_tokens: 0 });
    // A new question after the same system prompt: the system read, the new turn written for 5 minutes.
    const next = { ...first, messages: turn('Second question, a different one?') };
    const b = await client.messages.create(next);
    const total = anthropicInputTokens(next);
    expect(b.usage).toMatchObject({ input_tokens: 0, cache_read_input_tokens: systemTokens, cache_creation_input_tokens: total - systemTokens });
    expect(b.usage.cache_creation).toEqual({ ephemeral_5m_input_tokens: total - systemTokens, ephemeral_1h_input_tokens: 0 });
    const up = sim.requests.at(-1)!;
    expect({ read: up.cachedInputTokens, w5: up.cacheWrite5mTokens, w1: up.cacheWrite1hTokens, input: up.inputTokens }).toEqual({ read: systemTokens, w5: total - systemTokens, w1: 0, input: total });
  });

  it('caches nothing unless started with promptCache', async () => {
    const client = new Anthropic({ apiKey: 'k', baseURL: plain.anthropicBaseUrl, maxRetries: 0 });
    const body = { model: 'sim-chat', max_tokens: 50, system: SYSTEM, messages: turn('Uncached?') };
    await client.messages.create(body);
    const r = await client.messages.create(body);
    expect(r.usage).toMatchObject({ input_tokens: anthropicInputTokens(body), cache_read_input_tokens: 0, cache_creation_input_tokens: 0 });
  });
});

describe('OpenAI prompt_cache_key', () => {
  it('reads the longest run of leading messages a prompt under the same key had', async () => {
    const client = new OpenAI({ apiKey: 'k', baseURL: sim.openaiBaseUrl, maxRetries: 0 });
    const history: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'system', content: 'Inventory rules. '.repeat(10) }, { role: 'user', content: 'Plugs?' }];
    expect((await client.chat.completions.create({ model: 'sim-chat', messages: history, prompt_cache_key: 'k1' })).usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    const longer = [...history, { role: 'assistant' as const, content: 'Yes.' }, { role: 'user' as const, content: 'Sizes?' }];
    const r = await client.chat.completions.create({ model: 'sim-chat', messages: longer, prompt_cache_key: 'k1' });
    expect(r.usage?.prompt_tokens_details?.cached_tokens).toBe(openaiInputTokens({ messages: history }));
    expect(r.usage?.prompt_tokens).toBe(openaiInputTokens({ messages: longer }));
    // Another key, or none, shares nothing.
    expect((await client.chat.completions.create({ model: 'sim-chat', messages: longer, prompt_cache_key: 'k2' })).usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    expect((await client.chat.completions.create({ model: 'sim-chat', messages: longer })).usage?.prompt_tokens_details?.cached_tokens).toBe(0);
  });
});
