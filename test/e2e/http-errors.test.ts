// Every refusal of the core issue through real HTTP: 401 variants, no CORS, 400/404/413 bodies,
// and upstream failures mapped to 502/503/504 — each in the OpenAI error shape, never a charge.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';

let h: Harness;
const chat = { model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }] };

beforeAll(async () => {
  h = await startHarness({ config: { maxBodyBytes: 4096 } });
});
afterAll(async () => h.close());

async function call(path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  const res = await fetch(`${h.baseUrl}${path}`, {
    method: init.method ?? 'POST',
    headers: { 'content-type': 'application/json', ...init.headers },
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : (JSON.parse(text) as { error: { message: string; type: string; code: string; param: string | null } }) };
}

const bearer = (k: string) => ({ authorization: `Bearer ${k}` });

describe('401: the key was not accepted, and the message says why', () => {
  it.each([
    ['no key at all', {}, 'missing_api_key', /No API key/],
    ['unknown key', bearer('sk-tg-' + 'A'.repeat(43)), 'invalid_api_key', /not recognised/],
    ['a missing character', 'MISSING', 'invalid_api_key', /characters|short|missing/i],
    ['Bearer Bearer', 'DOUBLE', 'invalid_api_key', /Bearer" twice/],
    ['stray spaces', 'SPACES', 'invalid_api_key', /stray spaces/],
    ['key in the wrong header', 'WRONG', 'api_key_in_wrong_header', /"api-key" header/],
    ['no scheme', 'NOSCHEME', 'invalid_authorization_header', /no scheme/],
  ])('%s', async (_name, headersOrMarker, code, message) => {
    const key = h.key;
    const variants: Record<string, Record<string, string>> = {
      MISSING: bearer(key.slice(0, -1)),
      DOUBLE: { authorization: `Bearer Bearer ${key}` },
      SPACES: { authorization: `Bearer  ${key}` },
      WRONG: { 'api-key': key },
      NOSCHEME: { authorization: key },
    };
    const headers = typeof headersOrMarker === 'string' ? (variants[headersOrMarker] as Record<string, string>) : headersOrMarker;
    const res = await call('/v1/chat/completions', { headers, body: JSON.stringify(chat) });
    expect(res.status).toBe(401);
    expect(res.body?.error).toMatchObject({ type: 'authentication_error', code });
    expect(res.body?.error.message).toMatch(message);
    expect(JSON.stringify(res.body)).not.toContain(key);
  });

  it('x-api-key is accepted, and a revoked key stops working within 2 seconds', async () => {
    const created = await h.backend.accounts.createKey(h.accountId, { name: 'to-revoke' });
    const ok = await call('/v1/models', { method: 'GET', headers: { 'x-api-key': created.secret } });
    expect(ok.status).toBe(200);
    await h.backend.accounts.revokeKey(h.accountId, created.record.id);
    const revokedAt = Date.now();
    let status = 200;
    let body: Awaited<ReturnType<typeof call>>['body'];
    while (status === 200 && Date.now() - revokedAt < 3000) {
      ({ status, body } = await call('/v1/models', { method: 'GET', headers: bearer(created.secret) }));
      if (status === 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(2000);
    expect(body?.error.code).toBe('revoked_api_key');
  });
});

describe('no CORS', () => {
  it('refuses preflights and cross-origin requests and never sends Access-Control headers', async () => {
    const pre = await call('/v1/chat/completions', { method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
    expect(pre.status).toBe(405);
    const cross = await call('/v1/chat/completions', { headers: { ...bearer(h.key), origin: 'https://evil.example' }, body: JSON.stringify(chat) });
    expect(cross.status).toBe(403);
    const normal = await call('/v1/models', { method: 'GET', headers: bearer(h.key) });
    for (const r of [pre, cross, normal]) {
      expect([...r.headers.keys()].filter((k) => k.startsWith('access-control-'))).toEqual([]);
    }
  });
});

describe('400 / 404 / 413', () => {
  it('malformed JSON is a 400', async () => {
    const res = await call('/v1/chat/completions', { headers: bearer(h.key), body: '{"model": ' });
    expect(res.status).toBe(400);
    expect(res.body?.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
  });
  it('a malformed message names the field', async () => {
    const res = await call('/v1/chat/completions', { headers: bearer(h.key), body: JSON.stringify({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'a' }, { role: 'robot', content: 'b' }] }) });
    expect(res.status).toBe(400);
    expect(res.body?.error.param).toBe('messages[1].role');
  });
  it('an image to a model without vision is refused before any upstream call', async () => {
    const before = h.simulator.requests.length;
    const res = await call('/v1/chat/completions', {
      headers: bearer(h.key),
      body: JSON.stringify({ model: 'glm-5.3-xploded', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }] }),
    });
    expect(res.status).toBe(400);
    expect(res.body?.error.code).toBe('model_not_vision_capable');
    expect(h.simulator.requests.length).toBe(before);
  });
  it('an unknown model is a 404 model_not_found listing the models', async () => {
    const res = await call('/v1/chat/completions', { headers: bearer(h.key), body: JSON.stringify({ ...chat, model: 'gpt-nope' }) });
    expect(res.status).toBe(404);
    expect(res.body?.error).toMatchObject({ code: 'model_not_found', param: 'model' });
    expect(res.body?.error.message).toContain('outlaw-1-xploded');
  });
  it('an unknown /v1 route is a 404 in the OpenAI shape', async () => {
    const res = await call('/v1/embeddings', { headers: bearer(h.key), body: '{}' });
    expect(res.status).toBe(404);
    expect(res.body?.error.type).toBe('invalid_request_error');
  });
  it('the health checks answer GET and HEAD without a key; any other method on them is an API request', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const get = await call(path, { method: 'GET' });
      expect(get.status).toBe(200);
      expect(get.body).toMatchObject({ status: path === '/healthz' ? 'ok' : 'ready' });
      expect((await fetch(`${h.baseUrl}${path}`, { method: 'HEAD' })).status).toBe(200);
      const anonymous = await call(path, { body: '{}' });
      expect(anonymous.status).toBe(401);
      expect(anonymous.body?.error.code).toBe('missing_api_key');
      const keyed = await call(path, { method: 'DELETE', headers: bearer(h.key) });
      expect(keyed.status).toBe(404);
      expect(keyed.body?.error.code).toBe('unknown_url');
    }
  });
  it('a body over the limit is a 413', async () => {
    const res = await call('/v1/chat/completions', { headers: bearer(h.key), body: JSON.stringify({ ...chat, messages: [{ role: 'user', content: 'x'.repeat(5000) }] }) });
    expect(res.status).toBe(413);
    expect(res.body?.error.code).toBe('request_too_large');
  });
});

describe('upstream failures', () => {
  it.each([
    [{ status: 500, times: 2 }, 502, 'upstream_error'],
    [{ status: 503, times: 2 }, 503, 'upstream_overloaded'],
    [{ status: 401, times: 2 }, 502, 'upstream_auth_failed'],
  ])('%o becomes %i', async (fault, status, code) => {
    const before = await h.backend.ledger.balance(h.accountId);
    h.simulator.injectFault({ ...fault, match: { model: 'sim-outlaw-1-xploded' } });
    const res = await call('/v1/chat/completions', { headers: bearer(h.key), body: JSON.stringify(chat) });
    h.simulator.clearFaults();
    expect(res.status).toBe(status);
    expect(res.body?.error.code).toBe(code);
    const after = await h.backend.ledger.balance(h.accountId);
    expect(after).toEqual(before);
  });

  it.each(['openai', 'anthropic'] as const)("an %s upstream's 400 is the client's 400 with the upstream's own message, read by its format, without credentials", async (upstreamFormat) => {
    const g = upstreamFormat === 'openai' ? h : await startHarness({ upstreamFormat });
    try {
      g.simulator.injectFault({ status: 400, message: 'max_tokens is too large (Bearer sk-live-abcdefghijklmnop)', times: 1, match: { model: 'sim-outlaw-1-xploded' } });
      const res = await fetch(`${g.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { ...bearer(g.key), 'content-type': 'application/json' }, body: JSON.stringify(chat) });
      g.simulator.clearFaults();
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('upstream_rejected');
      expect(body.error.message).toContain('rejected the request: max_tokens is too large');
      expect(body.error.message).not.toContain('sk-live-abcdefghijklmnop');
    } finally {
      if (g !== h) await g.close();
    }
  });

  it('an upstream that does not answer in time is a 504', async () => {
    const slow = await startHarness({ models: (models) => models.map((m) => ({ ...m, upstreams: m.upstreams.map((u) => ({ ...u, timeouts: { firstByteMs: 300 } })) })) });
    try {
      slow.simulator.injectFault({ hang: true, times: 2 });
      const res = await fetch(`${slow.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { ...bearer(slow.key), 'content-type': 'application/json' }, body: JSON.stringify(chat) });
      expect(res.status).toBe(504);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
    } finally {
      await slow.close();
    }
  });

  it('an upstream error after the stream began is sent in-band, as the SDK expects', async () => {
    h.simulator.injectFault({ cutAfterChunks: 3, match: { model: 'sim-outlaw-1-xploded' } });
    const res = await fetch(`${h.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { ...bearer(h.key), 'content-type': 'application/json' }, body: JSON.stringify({ ...chat, stream: true }) });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).toMatch(/data: \{"error":\{"message":"The upstream stream ended/);
    expect(text).not.toContain('[DONE]');
  });
});
