// An upstream whose usage report cannot be billed by (negative, missing or non-numeric counts) or is
// absurd. Delivered output is never free: an unbillable report is treated like no report (the charge is
// estimated from what was relayed), and an absurd one is clamped to the hold instead of throwing (on
// 7339c82 both settled at zero: the counts were taken as 0, and 1e30 threw in the cost arithmetic so
// nothing was settled until the reaper returned the whole hold).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { costMicros, formatUsd } from '../../src/billing/money.js';
import { usdNumber } from '../../src/billing/answer-cost.js';
import { countTokens } from '../../src/wire/token-count.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

const REPLY = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');

interface Lie {
  openai: Record<string, unknown> | undefined;
  anthropic: Record<string, unknown> | undefined;
}
let lie: Lie = { openai: undefined, anthropic: undefined };

/** A fake upstream that answers with REPLY and whatever usage the test sets. */
async function startLyingUpstream(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const parsed = JSON.parse(body) as { model: string; stream?: boolean };
      res.setHeader('content-type', 'application/json');
      if (req.url?.endsWith('/chat/completions')) {
        res.end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 1, model: parsed.model, choices: [{ index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }], ...(lie.openai === undefined ? {} : { usage: lie.openai }) }));
      } else {
        res.end(JSON.stringify({ id: 'msg_x', type: 'message', role: 'assistant', model: parsed.model, content: [{ type: 'text', text: REPLY }], stop_reason: 'end_turn', stop_sequence: null, ...(lie.anthropic === undefined ? {} : { usage: lie.anthropic }) }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

for (const format of ['openai', 'anthropic'] as const) {
  describe(`usage from an ${format}-format upstream`, () => {
    let h: Harness;
    let upstream: { server: Server; url: string };
    beforeAll(async () => {
      upstream = await startLyingUpstream();
      h = await startHarness({
        models: (models) =>
          models.map((m) => ({ ...m, upstreams: [{ name: 'liar', format, baseUrl: format === 'openai' ? `${upstream.url}/v1` : upstream.url, model: `liar-${m.id}` }] })),
      });
    });
    afterAll(async () => {
      await h.close();
      await new Promise((r) => upstream.server.close(r));
    });

    /** The answer, and the cost it reported (usage.cost) when its body has a usage object. */
    const reportedCost = new Map<Response, unknown>();
    async function call(): Promise<Response> {
      const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'outlaw-1-xploded', max_tokens: 500, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { usage?: { cost?: unknown } };
      reportedCost.set(res, body.usage?.cost);
      return res;
    }

    async function chargeOf(res: Response): Promise<number> {
      const id = res.headers.get('x-request-id') ?? '';
      let charged = -1;
      await vi.waitFor(async () => {
        const rec = (await h.backend.ledger.listUsage(h.accountId, { limit: 1000 })).find((r) => r.requestId === id);
        expect(rec).toBeDefined();
        charged = rec?.cost ?? -1;
      });
      // The answer reported the very charge: estimated or clamped to the hold alike (issue 32, item 2).
      expect(res.headers.get('x-tollgate-cost-usd')).toBe(formatUsd(charged));
      expect(reportedCost.get(res)).toBe(usdNumber(charged));
      const audit = await h.backend.ledger.audit(h.accountId);
      expect(audit.difference).toBe(0);
      expect(audit.holdsOutstanding).toBe(0);
      return charged;
    }

    const pricing = () => h.catalog.current().byId.get('outlaw-1-xploded')!.pricing;
    const unbillable: Array<[string, Record<string, unknown>]> =
      format === 'openai'
        ? [
            ['negative counts', { prompt_tokens: -5, completion_tokens: -100, total_tokens: -105 }],
            ['a missing completion count', { prompt_tokens: 12 }],
            ['non-numeric counts', { prompt_tokens: '12', completion_tokens: 'lots' }],
          ]
        : [
            ['negative counts', { input_tokens: -5, output_tokens: -100 }],
            ['a missing output count', { input_tokens: 12 }],
            ['non-numeric counts', { input_tokens: '12', output_tokens: null }],
          ];

    for (const [what, usage] of unbillable) {
      it(`${what}: estimated from the relayed text, never zero`, async () => {
        lie = format === 'openai' ? { openai: usage, anthropic: undefined } : { openai: undefined, anthropic: usage };
        const charged = await chargeOf(await call());
        const outputOnly = costMicros({ input: 0, output: await countTokens([REPLY]), cachedInput: 0, reasoning: 0 }, pricing());
        expect(outputOnly).toBeGreaterThan(0);
        expect(charged).toBeGreaterThanOrEqual(outputOnly);
      });
    }

    it('an absurd figure (1e30 output tokens) is clamped to the hold and settled, and flagged', async () => {
      lie = format === 'openai' ? { openai: { prompt_tokens: 10, completion_tokens: 1e30 }, anthropic: undefined } : { openai: undefined, anthropic: { input_tokens: 10, output_tokens: 1e30 } };
      const before = await h.backend.ledger.balance(h.accountId);
      const res = await call();
      const charged = await chargeOf(res);
      expect(charged).toBeGreaterThan(0);
      const after = await h.backend.ledger.balance(h.accountId);
      expect(before.balance - after.balance).toBe(charged);
      expect(h.logLines.some((l) => l.includes('usage_oversized') && l.includes(res.headers.get('x-request-id') ?? '?'))).toBe(true);
    });
  });
}
