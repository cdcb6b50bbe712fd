// The Responses API from the clients' default providers, unmodified but for the base address and key:
//   - the OpenAI Agents SDK (its default model provider speaks the Responses API) runs an agent with a
//     function tool: the model calls it, the SDK runs it, the model answers;
//   - the AI SDK's default `openai(model)` provider (Responses API) generates text, streams text, and
//     continues a conversation (store defaults to true: it sends item_reference items for its earlier
//     output, which the gateway resolves from the account's store).
// Each request is charged exactly the usage the client was told.
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tdb = useTestDatabase('respclients');
const MODEL = 'outlaw-1-xploded';
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ record: tdb.db });
  // No trace export: the SDK would send traces to OpenAI.
  setTracingDisabled(true);
});
afterAll(async () => {
  await h?.close();
});

/** How many usage records the account has; counted once every answered request is settled. */
async function usageCount(): Promise<number> {
  await h.settled();
  return (await h.backend.ledger.listUsage(h.accountId, { limit: 500 })).length;
}

/** The `count` requests served after `before` records settled, and what they cost in all. */
async function settledSince(before: number, count: number): Promise<number> {
  await h.settled();
  const all = await h.backend.ledger.listUsage(h.accountId, { limit: 500 });
  expect(all.length - before).toBe(count);
  // Newest first.
  return all.slice(0, count).reduce((t, r) => t + r.cost, 0);
}

describe('the Responses API from the clients default providers', () => {
  it('the Agents SDK runs an agent with a function tool', async () => {
    // The SDK bundles its own openai version; the client is the same class.
    setDefaultOpenAIClient(new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 }) as unknown as Parameters<typeof setDefaultOpenAIClient>[0]);
    const calls: string[] = [];
    const weather = tool({
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push(city);
        return `It is 7 degrees in ${city}.`;
      },
    });
    const agent = new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model: MODEL, tools: [weather] });
    const served = h.simulator.requests.length;
    const result = await run(agent, 'What is the weather in Oslo?');
    expect(calls.length).toBe(1);
    expect(typeof result.finalOutput).toBe('string');
    expect((result.finalOutput ?? '').length).toBeGreaterThan(0);
    // Two model turns: the call, then the answer after the tool's output.
    const turns = h.simulator.requests.slice(served);
    expect(turns.length).toBe(2);
    expect(JSON.stringify(turns[1]?.body)).toContain('It is 7 degrees');
  });

  it('the AI SDK generates, streams, and continues a conversation through item references', async () => {
    const openai = createOpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1` });
    const since = await usageCount();
    const first = await generateText({ model: openai(MODEL), prompt: 'Say something short.', maxOutputTokens: 40 });
    expect(first.text.length).toBeGreaterThan(0);
    expect(first.finishReason).toBe('stop');

    const streamed = streamText({ model: openai(MODEL), prompt: 'Tell me more.' });
    let text = '';
    for await (const piece of streamed.textStream) text += piece;
    expect(text.length).toBeGreaterThan(0);
    expect(await streamed.text).toBe(text);

    // A second turn with the first turn's messages: the SDK refers to its stored output by id.
    const second = await generateText({ model: openai(MODEL), messages: [{ role: 'user', content: 'Say something short.' }, ...first.response.messages, { role: 'user', content: 'And again?' }] });
    expect(second.text.length).toBeGreaterThan(0);
    const upstream = h.simulator.requests[h.simulator.requests.length - 1];
    expect(JSON.stringify(upstream?.body)).toContain(first.text.slice(0, 20));

    // Charged exactly what the SDK was told each request used.
    const told = [first.usage, await streamed.usage, second.usage];
    expect(told.every((u) => (u.inputTokens ?? 0) > 0 && (u.outputTokens ?? 0) > 0)).toBe(true);
    const charged = await settledSince(since, 3);
    const price = (u: { inputTokens?: number | undefined; outputTokens?: number | undefined }): number => Math.ceil(((u.inputTokens ?? 0) * 300_000 + (u.outputTokens ?? 0) * 1_000_000) / 1_000_000);
    expect(charged).toBe(told.reduce((t, u) => t + price(u), 0));
  });
});
