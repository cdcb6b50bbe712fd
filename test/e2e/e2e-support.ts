// Shared checks for the end-to-end tests: charges against the simulator's own usage, SSE reading.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { expect, vi } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import type { SimulatedRequest } from '../../src/simulator/server.js';
import type { Harness } from '../helpers/gateway-harness.js';

/** A tiny PNG (1x1, red), base64: enough for the vision checks. */
export const PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';

const COMPLETION_PATHS = new Set(['/v1/messages', '/v1/chat/completions', '/chat/completions']);
/** Gemini names the model in the path: /v1beta/models/{model}:generateContent or :streamGenerateContent. */
const GEMINI_COMPLETION = /^\/v1beta\/models\/[^/]+:(?:generateContent|streamGenerateContent)$/;
const isCompletion = (path: string): boolean => COMPLETION_PATHS.has(path) || GEMINI_COMPLETION.test(path);

export interface Mark {
  simIndex: number;
  usageCount: number;
}

export async function mark(h: Harness): Promise<Mark> {
  // Counted once everything answered so far is settled, or a late settlement would count as new.
  await h.settled();
  return { simIndex: h.simulator.requests.length, usageCount: (await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 })).length };
}

/** What the simulator itself reported for one completion call, priced with the catalog model's pricing. */
export function simulatorCost(h: Harness, r: SimulatedRequest): number {
  const id = (r.model ?? '').replace(/^sim-/, '');
  const model = h.catalog.current().byId.get(id);
  if (model === undefined) throw new Error(`no catalog model for simulator model ${String(r.model)}`);
  return costMicros(
    { input: r.inputTokens, output: r.outputTokensSent, cachedInput: r.cachedInputTokens, cacheWrite5m: r.cacheWrite5mTokens, cacheWrite1h: r.cacheWrite1hTokens, reasoning: 0 },
    model.pricing,
  );
}

/**
 * Every gateway request since `since` settled at exactly the simulator's usage: one usage record per
 * completion call the simulator answered, with the same cost to the micro-dollar. Returns the records.
 */
export async function expectChargesMatchSimulator(h: Harness, since: Mark, expectedCalls: number) {
  const calls = h.simulator.requests.slice(since.simIndex).filter((r) => isCompletion(r.path));
  expect(calls).toHaveLength(expectedCalls);
  await h.settled();
  await vi.waitFor(async () => {
    const all = await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 });
    expect(all.length - since.usageCount).toBe(expectedCalls);
  });
  const records = (await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 })).slice(0, expectedCalls).reverse();
  // Settlement order follows response order, and the scenarios here call one at a time.
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!;
    await vi.waitFor(() => expect(call.finished || call.aborted).toBe(true));
    const rec = records[i]!;
    expect(rec.model).toBe((call.model ?? '').replace(/^sim-/, ''));
    expect({ input: rec.usage.input, output: rec.usage.output }).toEqual({ input: call.inputTokens, output: call.outputTokensSent });
    expect({ read: rec.usage.cachedInput, write5m: rec.usage.cacheWrite5m ?? 0, write1h: rec.usage.cacheWrite1h ?? 0 }).toEqual({
      read: call.cachedInputTokens,
      write5m: call.cacheWrite5mTokens,
      write1h: call.cacheWrite1hTokens,
    });
    expect(rec.cost).toBe(simulatorCost(h, call));
  }
  return records;
}

export interface SseEvent {
  event: string | undefined;
  data: string;
}

export async function readSse(res: Response): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  const parser = createParser({ onEvent: (e: EventSourceMessage) => events.push({ event: e.event, data: e.data }) });
  const text = await res.text();
  parser.feed(text);
  return events;
}

/** Polls `probe` every 20 ms until it returns a value, or throws naming `what` after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Content pieces in the SSE text so far: OpenAI `"content":"…"` deltas or Anthropic `"text":"…"` ones. */
export function contentPieces(format: 'openai' | 'anthropic', sse: string): number {
  return (sse.match(format === 'openai' ? /"content":"[^"]/g : /"text":"[^"]/g) ?? []).length;
}

/**
 * Reads a streamed response until `count` non-empty content pieces have arrived, and hands back the
 * reader, still open, for the test to cut the stream (abort, kill the gateway) where it likes.
 */
export async function readUntilContent(res: Response, count: number, format: 'openai' | 'anthropic' = 'openai'): Promise<ReadableStreamDefaultReader<Uint8Array>> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let seen = '';
  while (contentPieces(format, seen) < count) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended after ${contentPieces(format, seen)} of ${count} content pieces, before the test cut it`);
    seen += decoder.decode(value, { stream: true });
  }
  return reader;
}
