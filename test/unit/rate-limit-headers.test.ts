// The rate-limit headers of each client format, as their SDKs and tools parse them: OpenAI's reset is a
// duration ("20ms", "1s", "59.5s", "1m0s"), Anthropic's an RFC 3339 time never before the reset; a
// limit that is not set sends no header.
import { describe, expect, it } from 'vitest';
import { anthropicRateLimitHeaders } from '../../src/formats/anthropic-messages/rate-limit-headers.js';
import { openaiRateLimitHeaders, openaiResetDuration } from '../../src/formats/openai-chat/rate-limit-headers.js';
import { rateLimitStateOf } from '../../src/billing/rate-limit-state.js';
import { decodeReserveReply } from '../../src/billing/script-replies.js';
import { bucketsOf } from '../../src/billing/buckets.js';

describe('rate-limit headers', () => {
  it("OpenAI's reset durations", () => {
    expect([0, 20, 999, 1000, 1001, 59_500, 60_000, 61_250, 600_000].map(openaiResetDuration)).toEqual([
      '0ms', '20ms', '999ms', '1s', '1.001s', '59.5s', '1m0s', '1m1.25s', '10m0s',
    ]);
  });

  it('OpenAI: requests and tokens, only the limits that are set', () => {
    expect(openaiRateLimitHeaders({ requests: { limit: 60, remaining: 59 }, resetMs: 1_500 })).toEqual({
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-remaining-requests': '59',
      'x-ratelimit-reset-requests': '1.5s',
    });
    expect(Object.keys(openaiRateLimitHeaders({ tokens: { limit: 100, remaining: 0 }, resetMs: 10 }))).toEqual([
      'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens',
    ]);
  });

  it('Anthropic: RFC 3339 resets, rounded up to the second, and the token families', () => {
    const now = Date.UTC(2026, 10, 26, 12, 0, 0, 400);
    const h = anthropicRateLimitHeaders({ requests: { limit: 5, remaining: 4 }, tokens: { limit: 1000, remaining: 10 }, resetMs: 59_600 }, now);
    expect(h['anthropic-ratelimit-requests-reset']).toBe('2026-11-26T12:01:00Z');
    expect(h['anthropic-ratelimit-requests-remaining']).toBe('4');
    for (const kind of ['tokens', 'input-tokens', 'output-tokens']) {
      expect(h[`anthropic-ratelimit-${kind}-limit`]).toBe('1000');
      expect(h[`anthropic-ratelimit-${kind}-remaining`]).toBe('10');
    }
    expect(anthropicRateLimitHeaders({ resetMs: 5 }, now)).toEqual({});
  });

  it("reads the reserve script's rate-limit figures by bucket; none set is no state", () => {
    // Buckets in declaration order: balance, lifetime cap, monthly cap, requests, tokens, in flight.
    const buckets = bucketsOf({ keyId: 'k1' });
    const figures = (rpm: number, reqs: number, conc: number, inFlight: number): number[] => [1000, 10, -1, 0, -1, 0, rpm, reqs, -1, 0, conc, inFlight];
    const admitted = (f: number[]): ReturnType<typeof decodeReserveReply> => decodeReserveReply([1, 'g', 7, 0, 2500, ...f], buckets);
    const state = (r: ReturnType<typeof decodeReserveReply>) => (r.kind === 'admitted' ? rateLimitStateOf(r.readings, r.resetMs) : undefined);
    expect(state(admitted(figures(10, 7, 2, 1)))).toEqual({ requests: { limit: 10, remaining: 3 }, concurrency: { limit: 2, inFlight: 1 }, resetMs: 2500 });
    expect(state(admitted(figures(-1, 0, -1, 0)))).toBeUndefined();
    // A retried reservation of a request already held reports no figures.
    expect(state(decodeReserveReply([1, 'g', 7, 0], buckets))).toBeUndefined();
  });
});
