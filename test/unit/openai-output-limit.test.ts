// The output limit of a chat-completions request: the one the reservation covers is the one, and the
// only one, the OpenAI-format upstream receives — whichever of max_tokens / max_completion_tokens the
// client sent, both or neither.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../src/catalog/snapshot.js';
import { worstCase } from '../../src/reserve/worst-case.js';
import { decodeChatRequest } from '../../src/decode/chat-request.js';
import { openaiChatUpstreamRequest } from '../../src/translate/pairs/openai-to-openai.js';
import { chatCompletionPlan } from '../../src/http/routes/chat-completions.js';

const MODEL: CatalogModel = {
  id: 'm', displayName: 'M', kind: 'Abliterated', contextWindow: 100_000, contextDisplay: '100K',
  pricing: { input: 1_000_000, output: 4_000_000, display: { input: '', output: '' } },
  supportsTools: true, supportsVision: true, supportsReasoning: true, abliterated: true,
  defaultMaxOutputTokens: 2048, aliases: [], created: 0, upstreams: [], source: 'test',
};

type Body = Record<string, unknown>;

/** What the gateway reserves for and what it sends upstream, for one client body. */
function reserveAndForward(extra: Body): { reserved: number; amount: number; upstream: Body } {
  const decoded = decodeChatRequest({ model: 'm', messages: [{ role: 'user', content: 'hello' }], ...extra });
  const bound = worstCase(chatCompletionPlan(decoded, MODEL, 'req').footprint, MODEL);
  const upstream = openaiChatUpstreamRequest(decoded, 'upstream-m', bound.outputTokens) as Body;
  return { reserved: bound.outputTokens, amount: bound.amount, upstream };
}

function amountFor(maxOutputTokens: number): number {
  return reserveAndForward({ max_tokens: maxOutputTokens }).amount;
}

describe('chat-completions output limit: reserved = forwarded', () => {
  it('both sent, max_completion_tokens smaller: reserves it and forwards only it', () => {
    const r = reserveAndForward({ max_completion_tokens: 100, max_tokens: 4000 });
    expect(r.reserved).toBe(100);
    expect(r.amount).toBe(amountFor(100));
    expect(r.upstream.max_completion_tokens).toBe(100);
    expect('max_tokens' in r.upstream).toBe(false);
  });

  it('both sent, max_completion_tokens larger: it still wins, and max_tokens is not forwarded', () => {
    const r = reserveAndForward({ max_completion_tokens: 4000, max_tokens: 100 });
    expect(r.reserved).toBe(4000);
    expect(r.amount).toBe(amountFor(4000));
    expect(r.upstream.max_completion_tokens).toBe(4000);
    expect('max_tokens' in r.upstream).toBe(false);
  });

  it('only max_tokens: forwarded as max_tokens', () => {
    const r = reserveAndForward({ max_tokens: 300 });
    expect(r.reserved).toBe(300);
    expect(r.upstream.max_tokens).toBe(300);
    expect('max_completion_tokens' in r.upstream).toBe(false);
  });

  it('a null max_completion_tokens beside max_tokens: max_tokens binds and the null is dropped', () => {
    const r = reserveAndForward({ max_completion_tokens: null, max_tokens: 300 });
    expect(r.reserved).toBe(300);
    expect(r.upstream.max_tokens).toBe(300);
    expect('max_completion_tokens' in r.upstream).toBe(false);
  });

  it('neither: the model default is reserved and sent as max_tokens', () => {
    const r = reserveAndForward({});
    expect(r.reserved).toBe(2048);
    expect(r.upstream.max_tokens).toBe(2048);
    expect('max_completion_tokens' in r.upstream).toBe(false);
  });

  it('a limit past the context window is reserved and forwarded at the window', () => {
    const r = reserveAndForward({ max_completion_tokens: 250_000 });
    expect(r.reserved).toBe(100_000);
    expect(r.upstream.max_completion_tokens).toBe(100_000);
  });

  it('keeps the rest of the body, renames the model and asks for the usage chunk when streaming', () => {
    const r = reserveAndForward({ max_completion_tokens: 10, max_tokens: 20, stream: true, stream_options: { include_usage: false }, temperature: 0.2 });
    expect(r.upstream).toEqual({
      model: 'upstream-m', messages: [{ role: 'user', content: 'hello' }], max_completion_tokens: 10,
      stream: true, stream_options: { include_usage: true }, temperature: 0.2,
    });
  });

  it('for any mix of the two fields, exactly one limit goes upstream and it is the reserved one', () => {
    const limit = fc.oneof(fc.constant(undefined), fc.constant(null), fc.integer({ min: 1, max: 300_000 }));
    fc.assert(
      fc.property(limit, limit, (completion, legacy) => {
        const extra: Body = {};
        if (completion !== undefined) extra.max_completion_tokens = completion;
        if (legacy !== undefined) extra.max_tokens = legacy;
        const r = reserveAndForward(extra);
        const sent = ['max_tokens', 'max_completion_tokens'].filter((f) => f in r.upstream);
        expect(sent).toHaveLength(1);
        expect(r.upstream[sent[0] as string]).toBe(r.reserved);
        const expected = typeof completion === 'number' ? completion : typeof legacy === 'number' ? legacy : MODEL.defaultMaxOutputTokens;
        expect(r.reserved).toBe(Math.min(expected, MODEL.contextWindow));
        if (typeof completion === 'number') expect(sent[0]).toBe('max_completion_tokens');
      }),
      { numRuns: 300 },
    );
  });

  it('the upstream body is the same on a retry to a second upstream', () => {
    const decoded = decodeChatRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 50, max_tokens: 60 });
    const bound = worstCase(chatCompletionPlan(decoded, MODEL, 'req').footprint, MODEL);
    const first = openaiChatUpstreamRequest(decoded, 'a', bound.outputTokens) as Body;
    const second = openaiChatUpstreamRequest(decoded, 'b', bound.outputTokens) as Body;
    expect(first).toEqual({ ...second, model: 'a' });
    expect(second.max_completion_tokens).toBe(50);
  });
});
