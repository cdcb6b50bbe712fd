// Hostile input through real HTTP (issue 11): a client that trickles its body, asks `100-continue`
// with a bad key, nests JSON 5,000 deep, sends two different keys, a megabyte model name, or a word
// that takes the tokenizer seconds; an upstream that echoes its credential. Each gets a clear error
// in its own wire format, never a 500, never a charge, and no other client is stalled.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import type { UsageRecord } from '../../src/billing/ledger.js';

const UPSTREAM_SECRET = 'upstream-cred-7f3a9c2e5b1d4f6a8e0c';
const MODEL = 'outlaw-1-xploded';
const chat = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };
const anthropic = { model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };

let h: Harness;
let anthropicUpstream: Harness;

beforeAll(async () => {
  h = await startHarness({ upstreamApiKey: UPSTREAM_SECRET, config: { bodyReadTimeoutMs: 400 } });
  anthropicUpstream = await startHarness({ upstreamFormat: 'anthropic', upstreamApiKey: UPSTREAM_SECRET });
});
afterAll(async () => {
  await h.close();
  await anthropicUpstream.close();
});

interface Reply {
  status: number;
  text: string;
  json: { error: { message: string; type: string; code?: string | null } };
}

async function post(path: string, body: unknown, headers: Record<string, string>, harness = h): Promise<Reply> {
  const res = await fetch(`${harness.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Reply['json'];
  try {
    json = JSON.parse(text) as Reply['json'];
  } catch {
    json = { error: { message: '', type: '' } };
  }
  return { status: res.status, text, json };
}

const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

async function balance(harness = h): Promise<number> {
  return (await harness.backend.ledger.balance(harness.accountId)).balance;
}

/**
 * A raw HTTP/1.1 exchange: writes `head` (and then `body` pieces on a schedule), and collects what the
 * server sends until it closes or `waitMs` passes. For what fetch cannot do: expect-continue, trickling.
 */
function raw(port: number, head: string, opts: { trickle?: { piece: string; everyMs: number; times: number }; waitMs: number; bodyAfterContinue?: string }): Promise<{ text: string; firstAt: number }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let firstAt = -1;
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const done = (): void => {
      clearTimeout(deadline);
      clearInterval(timer);
      socket.destroy();
      resolve({ text, firstAt });
    };
    const deadline = setTimeout(done, opts.waitMs);
    socket.on('data', (d) => {
      if (firstAt < 0) firstAt = performance.now() - started;
      text += d.toString('latin1');
      if (opts.bodyAfterContinue !== undefined && text.startsWith('HTTP/1.1 100')) {
        socket.write(opts.bodyAfterContinue);
        opts.bodyAfterContinue = undefined;
      }
    });
    socket.on('close', done);
    socket.on('error', () => undefined);
    socket.write(head);
    if (opts.trickle) {
      let sent = 0;
      const { piece, everyMs, times } = opts.trickle;
      timer = setInterval(() => {
        if (sent++ >= times || socket.destroyed) return clearInterval(timer);
        socket.write(piece);
      }, everyMs);
    }
  });
}

const head = (path: string, headers: Record<string, string>): string =>
  `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

const bodyOf = (text: string): unknown => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4).replace(/^[0-9a-f]+\r\n|\r\n0\r\n\r\n$/g, ''));

describe('the key is checked before the body is read', () => {
  it('refuses `Expect: 100-continue` from an unknown key with 401, never inviting the body', async () => {
    const body = JSON.stringify(chat);
    const unknown = `sk-tg-${'Q'.repeat(43)}`;
    const r = await raw(h.gateway.port, head('/v1/chat/completions', { authorization: `Bearer ${unknown}`, expect: '100-continue', 'content-length': String(body.length) }), { waitMs: 3000 });
    expect(r.text).not.toMatch(/^HTTP\/1\.1 100/);
    expect(r.text).toMatch(/^HTTP\/1\.1 401 /);
    expect(bodyOf(r.text)).toMatchObject({ error: { type: 'authentication_error', code: 'invalid_api_key' } });
  });

  it('invites the body of a known key with 100 Continue and serves it', async () => {
    const body = JSON.stringify(chat);
    const r = await raw(h.gateway.port, head('/v1/chat/completions', { ...bearer(h.key), expect: '100-continue', 'content-length': String(body.length), connection: 'close' }), { waitMs: 5000, bodyAfterContinue: body });
    expect(r.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
  });

  it('refuses `Expect: 100-continue` of a known key whose declared body is over the limit with 413, never inviting it', async () => {
    const r = await raw(h.gateway.port, head('/v1/chat/completions', { ...bearer(h.key), expect: '100-continue', 'content-length': String(64 * 1024 * 1024) }), { waitMs: 3000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(bodyOf(r.text)).toMatchObject({ error: { code: 'request_too_large' } });
  });

  it('answers an unknown key at once, without waiting for a large body that never comes', async () => {
    const r = await raw(h.gateway.port, head('/v1/messages', { 'x-api-key': `sk-tg-${'Z'.repeat(43)}`, 'content-length': String(30 * 1024 * 1024) }), { waitMs: 3000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 401 /);
    expect(r.firstAt).toBeLessThan(2000);
    expect(bodyOf(r.text)).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
  });
});

describe('a body trickled slower than the read deadline', () => {
  it('is cut with 408 in the OpenAI shape, and nothing is charged', async () => {
    await h.settled();
    const before = await balance();
    const r = await raw(h.gateway.port, head('/v1/chat/completions', { ...bearer(h.key), 'content-length': '1000' }), {
      trickle: { piece: ' ', everyMs: 100, times: 50 },
      waitMs: 4000,
    });
    expect(r.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(r.text.toLowerCase()).toContain('connection: close');
    expect(bodyOf(r.text)).toMatchObject({ error: { code: 'request_timeout', message: expect.stringMatching(/not received within 0.4 s/) } });
    expect(await balance()).toBe(before);
  });

  it('is cut with 408 in the Anthropic shape on /v1/messages', async () => {
    const r = await raw(h.gateway.port, head('/v1/messages', { 'x-api-key': h.key, 'content-length': '1000' }), { trickle: { piece: ' ', everyMs: 100, times: 50 }, waitMs: 4000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(r.text)).toMatchObject({ type: 'error', error: { message: expect.stringMatching(/not received within/) } });
  });
});

describe('JSON nested 5,000 levels deep', () => {
  const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);

  it.each([
    ['/v1/chat/completions', `{"model":"${MODEL}","messages":[{"role":"user","content":[{"type":"input_audio","x":${deep(5000)}}]}]}`, 'openai'],
    ['/v1/messages', `{"model":"${MODEL}","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","x":${deep(5000)}}]}]}`, 'anthropic'],
    ['/v1/messages/count_tokens', `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"tools":${deep(5000)}}`, 'anthropic'],
  ])('%s: 400 invalid_json in the caller format, no charge', async (path, body, format) => {
    const before = await balance();
    const r = await post(path, body, bearer(h.key));
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/levels deep/);
    if (format === 'anthropic') expect(r.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    else expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    expect(await balance()).toBe(before);
  });
});

describe('credentials', () => {
  it('refuses Authorization and a different x-api-key together with 401, billing neither', async () => {
    const other = await h.backend.accounts.createKey(h.accountId, { name: 'other' });
    const before = await balance();
    for (const [path, body] of [['/v1/chat/completions', chat], ['/v1/messages', anthropic]] as const) {
      const r = await post(path, body, { authorization: `Bearer ${h.key}`, 'x-api-key': other.secret });
      expect(r.status).toBe(401);
      expect(r.json.error.type).toBe('authentication_error');
      expect(r.json.error.message).toMatch(/two different credentials/);
      expect(r.text).not.toContain(h.key.slice(6, 14));
      expect(r.text).not.toContain(other.secret.slice(6, 14));
    }
    expect(await balance()).toBe(before);
    // Two Authorization headers (Node keeps only the first) or two x-api-key headers with different keys.
    for (const [name, first, second] of [['authorization', `Bearer ${h.key}`, `Bearer ${other.secret}`], ['x-api-key', h.key, other.secret]]) {
      const r = await raw(h.gateway.port, head('/v1/chat/completions', { 'content-length': String(JSON.stringify(chat).length), connection: 'close' }).replace('\r\n\r\n', `\r\n${name}: ${first}\r\n${name}: ${second}\r\n\r\n`) + JSON.stringify(chat), { waitMs: 3000 });
      expect(r.text).toMatch(/^HTTP\/1\.1 401 /);
      expect(bodyOf(r.text)).toMatchObject({ error: { code: 'conflicting_api_keys' } });
    }
    expect(await balance()).toBe(before);
    // The same key in both (Claude Code's apiKeyHelper) is served.
    expect((await post('/v1/chat/completions', chat, { authorization: `Bearer ${h.key}`, 'x-api-key': h.key })).status).toBe(200);
  });

  it('never quotes any part of a key in an error message', async () => {
    const random = h.key.slice('sk-tg-'.length);
    const variants: Record<string, string>[] = [
      { authorization: `${h.key} ${h.key}` }, // the key where the scheme belongs
      { authorization: `${random.slice(0, 20)} x` },
      { authorization: `Basic ${h.key}` },
    ];
    for (const headers of variants) {
      const r = await post('/v1/chat/completions', chat, headers);
      expect(r.status).toBe(401);
      expect(r.text).not.toContain(random.slice(0, 4));
      expect(r.text).not.toContain('sk-tg-');
    }
    // A key pasted into the model field is not quoted back in the 404.
    const misplaced = await post('/v1/chat/completions', { ...chat, model: h.key }, bearer(h.key));
    expect(misplaced.status).toBe(404);
    expect(misplaced.text).not.toContain(random.slice(0, 4));
    const revoked = await h.backend.accounts.createKey(h.accountId, { name: 'revoked' });
    await h.backend.accounts.revokeKey(h.accountId, revoked.record.id);
    h.gateway.authenticator.forget();
    const r = await post('/v1/chat/completions', chat, bearer(revoked.secret));
    expect(r.status).toBe(401);
    expect(r.json.error.code).toBe('revoked_api_key');
    const revokedRandom = revoked.secret.slice('sk-tg-'.length);
    expect(r.text).not.toContain(revokedRandom.slice(0, 4));
    expect(r.text).not.toContain(revokedRandom.slice(-4));
  });
});

describe('upstream error text', () => {
  it('never relays the credential an upstream echoes, in a status error or an in-band stream error', async () => {
    h.simulator.injectFault({ status: 400, message: `Incorrect API key provided: ${UPSTREAM_SECRET}. Also Bearer ${UPSTREAM_SECRET}.`, times: 1 });
    const refused = await post('/v1/chat/completions', chat, bearer(h.key));
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toMatch(/Incorrect API key provided/);
    expect(refused.text).not.toContain(UPSTREAM_SECRET.slice(0, 16));

    h.simulator.injectFault({ errorEventAfterChunks: 2, message: `upstream failed for key ${UPSTREAM_SECRET}`, times: 1 });
    const streamed = await post('/v1/chat/completions', { ...chat, stream: true }, bearer(h.key));
    expect(streamed.text).toMatch(/upstream failed for key/);
    expect(streamed.text).not.toContain(UPSTREAM_SECRET.slice(0, 16));

    for (const fault of [
      { status: 400, message: `invalid x-api-key ${UPSTREAM_SECRET}` },
      { errorEventAfterChunks: 2, message: `stream broke, key sk-ant-api03-${'x'.repeat(24)} and ${UPSTREAM_SECRET}` },
    ]) {
      anthropicUpstream.simulator.injectFault({ ...fault, times: 1 });
      const r = await post('/v1/messages', { ...anthropic, stream: 'errorEventAfterChunks' in fault }, { 'x-api-key': anthropicUpstream.key }, anthropicUpstream);
      expect(r.text).toMatch(/invalid x-api-key|stream broke/);
      expect(r.text).not.toContain(UPSTREAM_SECRET.slice(0, 16));
      expect(r.text).not.toContain('sk-ant-api03');
    }

    // Across formats: the translated in-band error is redacted just the same.
    for (const [harness, path, body, headers] of [
      [h, '/v1/messages', { ...anthropic, stream: true }, { 'x-api-key': h.key }],
      [anthropicUpstream, '/v1/chat/completions', { ...chat, stream: true }, bearer(anthropicUpstream.key)],
    ] as const) {
      harness.simulator.injectFault({ errorEventAfterChunks: 2, message: `translated failure, key ${UPSTREAM_SECRET}`, times: 1 });
      const r = await post(path, body, headers, harness);
      expect(r.text).toMatch(/translated failure/);
      expect(r.text).not.toContain(UPSTREAM_SECRET.slice(0, 16));
    }
  });
});

describe('log lines', () => {
  it('bound a megabyte model name (404 model_not_found, a short log line)', async () => {
    const huge = 'm'.repeat(1024 * 1024);
    const r = await post('/v1/chat/completions', { ...chat, model: huge }, bearer(h.key));
    expect(r.status).toBe(404);
    expect(r.text.length).toBeLessThan(4096);
    await h.gateway.logger.flush();
    const line = h.logLines.find((l) => l.includes('"status":404') && l.includes('mmmmmmmm'));
    expect(line).toBeDefined();
    expect((line as string).length).toBeLessThan(2048);
  });
});

describe('count_tokens of a 300 KB single word', () => {
  it('answers, with every other client served meanwhile; the count is within the byte bound', async () => {
    const word = Array.from({ length: 100_000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join('');
    const counting = post('/v1/messages/count_tokens', { model: MODEL, messages: [{ role: 'user', content: word }] }, { 'x-api-key': h.key });
    let settled = false;
    void counting.then(() => (settled = true));
    // Another client's health checks, sequentially, while the count runs.
    const pings: number[] = [];
    const pingUntil = performance.now() + 1500;
    while (!settled && performance.now() < pingUntil) {
      const t = performance.now();
      const res = await fetch(`${h.baseUrl}/healthz`);
      await res.text();
      pings.push(performance.now() - t);
    }
    const r = await counting;
    expect(r.status).toBe(200);
    const n = (JSON.parse(r.text) as { input_tokens: number }).input_tokens;
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThanOrEqual(Buffer.byteLength(word) + 16);
    // Before, the count held the event loop for ~48 s and no ping was answered until it ended. The
    // tight stall figure (under 20 ms) is in bench/token-count.ts; this bound is loose for shared CI.
    expect(pings.length).toBeGreaterThan(3);
    expect(Math.max(...pings)).toBeLessThan(1000);
  }, 20_000);
});

describe('a stream cut after a 10 MB chunk', () => {
  let evil: Server;
  let cutHarness: Harness;
  const CHUNK = Array.from({ length: 10 * 1024 * 1024 }, (_, i) => String.fromCharCode(97 + ((i * 7919) % 26))).join('');

  beforeAll(async () => {
    // An upstream that sends one 10 MB delta (a single "word") and then drops the connection, so the
    // gateway must count the output itself to settle.
    evil = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 0, model: 'evil', choices: [{ index: 0, delta: { role: 'assistant', content: CHUNK }, finish_reason: null }] })}\n\n`, () => {
          setTimeout(() => res.socket?.destroy(), 20);
        });
      });
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/v1`;
    cutHarness = await startHarness({ models: (models) => models.map((m) => ({ ...m, upstreams: [{ name: 'evil', format: 'openai' as const, baseUrl: url, model: 'evil' }] })) });
  });
  afterAll(async () => {
    await cutHarness.close();
    await new Promise((resolve) => evil.close(resolve));
  });

  it('is settled from a bounded count while health checks keep being answered', async () => {
    const h2 = cutHarness;
    const res = await fetch(`${h2.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(h2.key) },
      body: JSON.stringify({ ...chat, stream: true, max_tokens: 100 }),
    });
    const requestId = res.headers.get('x-request-id') as string;
    const text = await res.text();
    expect(text).toContain('"error"');
    // Settlement (and its count of 10 MB of output) starts now: the pod must keep answering.
    const pings: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t = performance.now();
      const ping = await fetch(`${h2.baseUrl}/healthz`, { signal: AbortSignal.timeout(5000) });
      expect(ping.status).toBe(200);
      pings.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(Math.max(...pings)).toBeLessThan(1000);
    let record: UsageRecord | undefined;
    for (let i = 0; i < 100 && record === undefined; i++) {
      record = (await h2.backend.ledger.listUsage(h2.accountId)).find((r) => r.requestId === requestId);
      if (record === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    expect(record?.status).toBe('upstream_failed');
    expect(record?.usage.output).toBeGreaterThan(0);
    expect(record?.cost).toBeGreaterThan(0);
    expect((await h2.backend.ledger.balance(h2.accountId)).held).toBe(0);
  }, 30_000);
});
