// A client speaking the upstream's own format: the upstream gets the client's bytes, layout, escapes
// and unknown fields included, with only the model, the output limit and (OpenAI streams) the usage
// option replaced where they stood. A body that must change inside (a thinking block an Anthropic
// server would reject) is serialised anew instead. The reply comes back as the upstream wrote it, with
// one addition: its usage carries the charge (`cost`, USD), inserted in the usage chunk's own text.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdNumber } from '../../src/billing/answer-cost.js';
import { formatUsd } from '../../src/billing/money.js';
import { countTokens } from '../../src/wire/token-count.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

const MODEL = 'outlaw-1-xploded';
const received: string[] = [];
/** The OpenAI stream's text pieces, and whether it ends with a usage chunk. */
const stream = { pieces: ['ok'], usage: true, malformed: false };

/** An upstream of both formats that keeps every body it is sent, byte for byte. */
async function startRecordingUpstream(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      received.push(text);
      const body = JSON.parse(text) as { model: string; stream?: boolean };
      if (req.url?.endsWith('/chat/completions')) {
        const base = { id: 'up-1', created: 1, model: body.model };
        if (body.stream === true) {
          res.setHeader('content-type', 'text/event-stream');
          const chunk = (delta: object, finish: string | null): string =>
            `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
          res.end(
            chunk({ role: 'assistant', content: '' }, null) +
              stream.pieces.map((p) => chunk({ content: p }, null)).join('') +
              // A whole SSE event whose JSON is cut short, with the id and model text intact.
              (stream.malformed ? `${chunk({ content: 'broken' }, null).slice(0, -6)}\n\n` : '') +
              chunk({}, 'stop') +
              (stream.usage ? `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } })}\n\n` : '') +
              'data: [DONE]\n\n',
          );
          return;
        }
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } }));
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'msg_up', type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 9, output_tokens: 1 } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

for (const format of ['openai', 'anthropic'] as const) {
  describe(`an ${format} client to an ${format}-format upstream`, () => {
    let h: Harness;
    let upstream: { server: Server; url: string };
    beforeAll(async () => {
      upstream = await startRecordingUpstream();
      h = await startHarness({
        models: (models) => models.map((m) => ({ ...m, upstreams: [{ name: 'rec', format, baseUrl: format === 'openai' ? `${upstream.url}/v1` : upstream.url, model: `rec-${m.id}` }] })),
      });
    });
    afterAll(async () => {
      await h.close();
      await new Promise((r) => upstream.server.close(r));
    });

    async function send(text: string): Promise<string> {
      received.length = 0;
      const res = await fetch(`${h.baseUrl}/v1/${format === 'openai' ? 'chat/completions' : 'messages'}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: text,
      });
      const reply = await res.text();
      expect(res.status, reply).toBe(200);
      expect(received).toHaveLength(1);
      return received[0] as string;
    }

    it('answers with the upstream reply, its usage gaining only the charge (cost, USD) and the cost header', async () => {
      const res = await fetch(`${h.baseUrl}/v1/${format === 'openai' ? 'chat/completions' : 'messages'}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const reply = (await res.json()) as { usage: Record<string, unknown> };
      await h.settled();
      const record = (await h.backend.ledger.listUsage(h.accountId, { limit: 100 })).find((u) => u.requestId === res.headers.get('x-request-id'));
      expect(record?.cost).toBeGreaterThan(0);
      const upstreamUsage = format === 'openai' ? { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } : { input_tokens: 9, output_tokens: 1 };
      expect(reply.usage).toEqual({ ...upstreamUsage, cost: usdNumber(record?.cost ?? -1) });
      expect(res.headers.get('x-tollgate-cost-usd')).toBe(formatUsd(record?.cost ?? -1));
    });

    it('sends the client bytes with the model and output limit replaced where they stood', async () => {
      const limitField = format === 'openai' ? 'max_completion_tokens' : 'max_tokens';
      // Pretty-printed, an escape JSON.stringify would not write, a field no decoder knows.
      const text = `{\n  "model":   "${MODEL}",\n  "messages": [ { "role": "user", "content": "caf\\u00e9 \\/ ok" } ],\n  "${limitField}": 64,\n  "x_vendor": {"keep": [1, 2.50, true]}\n}\n`;
      const sent = await send(text);
      // Each member as the client wrote it (only the whitespace between members is not kept).
      expect(sent).toBe(`{"model":"rec-${MODEL}","messages": [ { "role": "user", "content": "caf\\u00e9 \\/ ok" } ],"${limitField}":64,"x_vendor": {"keep": [1, 2.50, true]}\n}`);
    });

    if (format === 'openai') {
      it('merges the usage option into the client stream options, keeping the rest', async () => {
        const sent = await send(`{"stream":true,"stream_options":{"include_usage":false,"x":1},"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"max_completion_tokens":16}`);
        // max_completion_tokens wins and is the only limit forwarded.
        expect(sent).toBe(`{"stream":true,"stream_options":{"include_usage":true,"x":1},"model":"rec-${MODEL}","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":16}`);
      });

      it('relays stream chunks with ids and model rewritten, billing the reported usage, or the relayed text when none comes', async () => {
        const pieces = ['Tollgate', ' relays', ' these', ' chunks', ' as', ' text', ' with', ' "quotes"', ' and \\ backslashes.'];
        const run = async (usage: boolean): Promise<{ text: string; output: number }> => {
          Object.assign(stream, { pieces, usage });
          const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: MODEL, stream: true, stream_options: { include_usage: usage }, messages: [{ role: 'user', content: 'hi' }], max_tokens: 64 }),
          });
          const body = await res.text();
          expect(res.status, body).toBe(200);
          await h.settled();
          const id = res.headers.get('x-request-id');
          const record = (await h.backend.ledger.listUsage(h.accountId, { limit: 100 })).find((u) => u.requestId === id);
          const chunks = body
            .split('\n')
            .filter((l) => l.startsWith('data: {'))
            .map((l) => JSON.parse(l.slice(6)) as { id: string; model: string; choices: Array<{ delta?: { content?: string } }> });
          for (const c of chunks) expect([c.id, c.model]).toEqual([`chatcmpl-${id ?? ''}`, MODEL]);
          const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
          // The usage chunk is the upstream's text with id and model rewritten and one member added:
          // the charge, `"cost":<USD>`, at the end of its usage object. Nothing else changes.
          const usageLines = body.split('\n').filter((l) => l.startsWith('data: {') && l.includes('"usage"'));
          if (usage) {
            expect(usageLines).toEqual([
              `data: ${JSON.stringify({ id: `chatcmpl-${id ?? ''}`, created: 1, model: MODEL, object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10, cost: usdNumber(record?.cost ?? -1) } })}`,
            ]);
          }
          return { text, output: record?.usage.output ?? -1 };
        };
        try {
          // The client reads every piece, ids and model rewritten, whether or not they were parsed.
          const reported = await run(true);
          expect(reported).toEqual({ text: pieces.join(''), output: 1 });
          // No usage from the upstream: the charge counts the text that was relayed.
          const estimated = await run(false);
          expect(estimated.text).toBe(pieces.join(''));
          expect(estimated.output).toBe(await countTokens(pieces));
        } finally {
          Object.assign(stream, { pieces: ['ok'], usage: true });
        }
      });

      it('drops a malformed chunk from the upstream instead of passing it to the client parser', async () => {
        Object.assign(stream, { pieces: ['before', ' after'], malformed: true });
        try {
          const res = await fetch(`${h.baseUrl}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'hi' }], max_tokens: 64 }),
          });
          const body = await res.text();
          expect(res.status).toBe(200);
          const data = body.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]');
          // Every event the client gets parses; the broken one is not among them.
          const texts = data.map((l) => (JSON.parse(l.slice(6)) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '');
          expect(texts.join('')).toBe('before after');
          expect(body).not.toContain('broken');
        } finally {
          Object.assign(stream, { pieces: ['ok'], malformed: false });
        }
      });
    } else {
      it('serialises the body anew when a thinking block must be removed from it', async () => {
        const sent = await send(
          JSON.stringify({
            model: MODEL,
            max_tokens: 64,
            messages: [
              { role: 'user', content: 'hi' },
              { role: 'assistant', content: [{ type: 'thinking', thinking: 'from elsewhere', signature: '' }, { type: 'text', text: 'hello' }] },
              { role: 'user', content: 'again' },
            ],
          }),
        );
        expect(JSON.parse(sent)).toEqual({
          model: `rec-${MODEL}`,
          max_tokens: 64,
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
            { role: 'user', content: 'again' },
          ],
        });
      });
    }
  });
}
