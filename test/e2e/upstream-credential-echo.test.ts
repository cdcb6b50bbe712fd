// No upstream credential in any output (issue 37, item 2), as a property: a fake upstream (a real HTTP
// server on loopback) of each format echoes the credential the gateway sent it — whatever its shape, a
// provider's (`AIza…`, `sk-ant-…`, `sk-proj-…`, `xai-…`, `gsk_…`) or none at all — in every place an
// error or a reply can carry it: a status error's message (after up to 1,500 characters, so it may
// straddle the cut the gateway makes), nested fields of that error, response headers, an in-stream error
// event first or mid-stream, and a field of a whole or streamed reply; each body is written in randomly
// split network writes, so the credential may arrive in two reads. Through the chat, messages and
// responses routes, streamed and not, it is found nowhere in what the client receives (status, headers,
// body), nor in the gateway's log lines or its spans (prompt and completion recorded too).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelSpec } from '../../src/catalog/types.js';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import { initTracing, type Tracing } from '../../src/telemetry/tracing.js';
import { EXAMPLE_MODELS, startHarness, type Harness, type HarnessOptions } from '../helpers/gateway-harness.js';

const FORMATS: readonly UpstreamFormatName[] = ['openai', 'anthropic', 'gemini'];
const ROUTES = ['chat', 'messages', 'responses'] as const;
type Route = (typeof ROUTES)[number];
const PLACES = ['status-message', 'status-nested', 'status-headers', 'stream-error-first', 'stream-error-mid', 'reply-field'] as const;
type Place = (typeof PLACES)[number];
/** In every echoed message, before the credential: proves the message itself reached the client. */
const MARKER = 'echo-marker';

interface Echo {
  place: Place;
  /** Characters before the credential in a message (0 to 1,500: across the gateway's 1,000-character cut). */
  prefix: number;
  /** Where each write of the body ends, as fractions of its length. */
  splits: number[];
}

/** What the fake upstream does with the next request, and the credential it was sent. */
let echo: Echo = { place: 'status-message', prefix: 0, splits: [] };
let received: { format: UpstreamFormatName; credential: string | undefined } | undefined;

function credentialOf(format: UpstreamFormatName, req: IncomingMessage): string | undefined {
  const h = format === 'openai' ? req.headers.authorization?.replace(/^Bearer /, '') : req.headers[format === 'anthropic' ? 'x-api-key' : 'x-goog-api-key'];
  return typeof h === 'string' ? h : undefined;
}

const message = (key: string): string => `${MARKER} ${'.'.repeat(echo.prefix)} the key ${key} was refused`;

function errorBody(format: UpstreamFormatName, key: string, nested: boolean): unknown {
  const msg = nested ? `${MARKER} refused: ${JSON.stringify({ request: { auth: { key } } })}` : message(key);
  const extra = nested ? { details: [{ reason: 'API_KEY_INVALID', metadata: { key } }], param: key } : {};
  if (format === 'anthropic') return { type: 'error', error: { type: 'invalid_request_error', message: msg, ...extra } };
  if (format === 'gemini') return { error: { code: 400, message: msg, status: 'INVALID_ARGUMENT', ...extra } };
  return { error: { message: msg, type: 'invalid_request_error', code: null, ...extra } };
}

/** The stream's events before the end: content, then (mid) the error or the reply's field echoing `key`. */
function streamEvents(format: UpstreamFormatName, key: string): string[] {
  const error = errorBody(format, key, false);
  const first = echo.place === 'stream-error-first';
  const withError = echo.place !== 'reply-field';
  if (format === 'openai') {
    const chunk = (delta: object, finish: string | null = null, more: object = {}): string =>
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [{ index: 0, delta, finish_reason: finish }], ...more })}\n\n`;
    if (first) return [`data: ${JSON.stringify(error)}\n\n`];
    const content = [chunk({ role: 'assistant', content: 'Hel' }), chunk({ content: 'lo' })];
    if (withError) return [...content, `data: ${JSON.stringify(error)}\n\n`];
    return [...content, chunk({}, 'stop', { system_fingerprint: key }), `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'up', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })}\n\n`, 'data: [DONE]\n\n'];
  }
  if (format === 'anthropic') {
    const ev = (name: string, data: object): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
    const start = ev('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'up', content: [], stop_reason: null, usage: { input_tokens: 3, output_tokens: 1 } } });
    if (first) return [`event: error\ndata: ${JSON.stringify(error)}\n\n`];
    const content = [start, ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }), ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hello' } })];
    if (withError) return [...content, `event: error\ndata: ${JSON.stringify(error)}\n\n`];
    return [...content, ev('content_block_stop', { index: 0 }), ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null, container: { id: key } }, usage: { output_tokens: 2 } }), ev('message_stop', {})];
  }
  const chunk = (parts: object[], more: object = {}): string => `data: ${JSON.stringify({ candidates: [{ content: { role: 'model', parts } , ...more }], responseId: 'r1', modelVersion: 'up' })}\n\n`;
  if (first) return [`data: ${JSON.stringify(error)}\n\n`];
  const content = [chunk([{ text: 'Hel' }]), chunk([{ text: 'lo' }])];
  if (withError) return [...content, `data: ${JSON.stringify(error)}\n\n`];
  return [...content, `data: ${JSON.stringify({ candidates: [{ content: { role: 'model', parts: [] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2, totalTokenCount: 5 }, modelVersion: key })}\n\n`];
}

function wholeReply(format: UpstreamFormatName, key: string): unknown {
  if (format === 'openai') {
    return { id: 'c1', object: 'chat.completion', created: 1, model: key, system_fingerprint: key, choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } };
  }
  if (format === 'anthropic') {
    return { id: 'msg_1', type: 'message', role: 'assistant', model: key, container: { id: key }, content: [{ type: 'text', text: 'Hello' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 3, output_tokens: 1 } };
  }
  return { candidates: [{ content: { role: 'model', parts: [{ text: 'Hello' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 1, totalTokenCount: 4 }, modelVersion: key, responseId: key };
}

/** `text` written in pieces at `echo.splits`, each write flushed on its own. */
async function writeSplit(res: ServerResponse, text: string): Promise<void> {
  const bytes = Buffer.from(text);
  const cuts = [...new Set(echo.splits.map((f) => Math.floor(f * bytes.length)))].filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b);
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    res.write(bytes.subarray(from, cut));
    from = cut;
    await new Promise((r) => setTimeout(r, 1));
  }
  res.end();
}

async function answer(format: UpstreamFormatName, req: IncomingMessage, res: ServerResponse): Promise<void> {
  for await (const _ of req) void _;
  const key = credentialOf(format, req) ?? 'no-credential-sent';
  received = { format, credential: credentialOf(format, req) };
  const stream = format === 'gemini' ? (req.url ?? '').includes(':streamGenerateContent') : undefined;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (echo.place.startsWith('status-')) {
    if (echo.place === 'status-headers') Object.assign(headers, { 'x-echo-key': key, 'www-authenticate': `Bearer ${key}`, 'retry-after': key });
    res.writeHead(400, headers);
    await writeSplit(res, JSON.stringify(errorBody(format, key, echo.place === 'status-nested')));
    return;
  }
  const streamed = stream ?? (req.headers.accept ?? '').includes('text/event-stream');
  if (!streamed) {
    res.writeHead(200, headers);
    await writeSplit(res, JSON.stringify(wholeReply(format, key)));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  await writeSplit(res, streamEvents(format, key).join(''));
}

function startFakeUpstream(): Promise<Server> {
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    const format = FORMATS.find((f) => url.startsWith(`/${f}/`));
    if (format === undefined) {
      res.writeHead(404).end();
      return;
    }
    void answer(format, req, res).catch(() => res.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const KEY_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-'.split('');
const keyBody = (n: number): fc.Arbitrary<string> => fc.array(fc.constantFrom(...KEY_CHARS), { minLength: n, maxLength: n }).map((a) => a.join(''));
/** A credential: a provider's shape, or none (only the value the gateway sent can find it then). */
const credential = fc.tuple(fc.constantFrom('AIza', 'sk-ant-api03-', 'sk-proj-', 'xai-', 'gsk_', 'opaque.', ''), keyBody(40)).map(([prefix, body]) => ({ key: prefix + body, body }));

const ROUTE_REQUEST: Record<Route, (model: string, stream: boolean) => { path: string; body: unknown }> = {
  chat: (model, stream) => ({ path: '/v1/chat/completions', body: { model, stream, messages: [{ role: 'user', content: 'hi' }] } }),
  messages: (model, stream) => ({ path: '/v1/messages', body: { model, stream, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] } }),
  responses: (model, stream) => ({ path: '/v1/responses', body: { model, stream, store: false, max_output_tokens: 64, input: 'hi' } }),
};

let fake: Server;
let h: Harness;
let tracing: Tracing;
const exporter = new InMemorySpanExporter();
// The harness resolves the upstream secret from these options on every request (secrets rotate live).
const options: HarnessOptions = { upstreamApiKey: 'placeholder-credential' };

beforeAll(async () => {
  fake = await startFakeUpstream();
  const base = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  tracing = initTracing({ env: { TOLLGATE_TRACE_CONTENT: 'on' }, spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const template = EXAMPLE_MODELS.find((m) => !m.capabilities.reasoning) ?? EXAMPLE_MODELS[0]!;
  Object.assign(options, {
    tracing,
    models: (models: ModelSpec[]): ModelSpec[] => [
      ...models,
      ...FORMATS.map((format) => ({
        ...template,
        id: `echo-${format}`,
        aliases: [],
        upstreams: [{ name: `fake-${format}`, format, baseUrl: `${base}/${format}${format === 'openai' ? '/v1' : ''}`, model: 'up', credentialsSecretRef: { name: 'upstream', key: 'token' } }],
      })),
    ],
  });
  h = await startHarness(options);
});
afterAll(async () => {
  await h?.close();
  await tracing?.shutdown();
  await new Promise((r) => fake?.close(r));
});

/** Everything the client got: status line, every header, the body. */
async function send(route: Route, format: UpstreamFormatName, stream: boolean): Promise<{ status: number; all: string; body: string }> {
  const { path, body } = ROUTE_REQUEST[route](`echo-${format}`, stream);
  const res = await fetch(`${h.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${h.key}` }, body: JSON.stringify(body) });
  const text = await res.text();
  const headers = [...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n');
  return { status: res.status, all: `${res.status}\n${headers}\n\n${text}`, body: text };
}

/** The credential, or any 12 characters of its random part, in `text`. */
function leaks(text: string, key: string, body: string): string | undefined {
  if (text.includes(key)) return key;
  for (let i = 0; i + 12 <= body.length; i++) if (text.includes(body.slice(i, i + 12))) return body.slice(i, i + 12);
  return undefined;
}

describe('an upstream echoing the credential it was sent', () => {
  for (const format of FORMATS) {
    for (const route of ROUTES) {
      it(`${format} upstream, ${route} route: the credential is nowhere in the answer, the logs or the spans`, async () => {
        await fc.assert(
          fc.asyncProperty(
            credential,
            fc.constantFrom(...PLACES),
            fc.nat(1500),
            fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 6 }),
            fc.boolean(),
            async ({ key, body }, place, prefix, splits, streamWhole) => {
              echo = { place, prefix, splits };
              received = undefined;
              options.upstreamApiKey = key;
              const stream = place.startsWith('stream-') || streamWhole;
              const logsBefore = h.logLines.length;
              exporter.reset();
              const got = await send(route, format, stream);
              await h.settled();
              await h.gateway.logger.flush();
              // The fake upstream was called with this credential, in this format's place for it.
              expect(received).toEqual({ format, credential: key });
              expect(got.status).toBeLessThan(500);
              // What the upstream said reached the client (without the credential).
              if (place === 'reply-field') expect(got.body).toMatch(/Hel/);
              else expect(got.body).toContain(MARKER);
              expect(leaks(got.all, key, body), `client answer (${place}, stream ${stream})`).toBeUndefined();
              expect(leaks(h.logLines.slice(logsBefore).join('\n'), key, body), 'log lines').toBeUndefined();
              const spans = exporter.getFinishedSpans().map((s) => JSON.stringify({ name: s.name, attributes: s.attributes, status: s.status, events: s.events }));
              expect(spans.length).toBeGreaterThan(0);
              expect(leaks(spans.join('\n'), key, body), 'spans').toBeUndefined();
            },
          ),
          { numRuns: 24 },
        );
      }, 60_000);
    }
  }
});
