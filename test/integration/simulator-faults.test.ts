import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type FaultSpec, type Simulator } from '../../src/simulator/server.js';

let sim: Simulator;
let openai: OpenAI;
let anthropic: Anthropic;
const user = [{ role: 'user' as const, content: 'hello' }];

beforeAll(async () => {
  sim = await startSimulator();
  openai = new OpenAI({ apiKey: 'k', baseURL: sim.openaiBaseUrl, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'k', baseURL: sim.anthropicBaseUrl, maxRetries: 0 });
});
afterEach(() => sim.clearFaults());
afterAll(() => sim.close());

const chat = (body: object) =>
  fetch(`${sim.openaiBaseUrl}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'sim-chat', messages: user, ...body }) });
const messages = (body: object) =>
  fetch(`${sim.url}/v1/messages`, { method: 'POST', body: JSON.stringify({ model: 'sim-chat', max_tokens: 100, messages: user, ...body }) });
const postFault = (f: FaultSpec) => fetch(`${sim.url}/_sim/faults`, { method: 'POST', body: JSON.stringify(f) });

describe('simulator injected faults', () => {
  it('status faults answer in each format, once by default, matched by model and path', async () => {
    sim.injectFault({ status: 429, match: { path: '/v1/chat/completions' } });
    await expect(openai.chat.completions.create({ model: 'sim-chat', messages: user })).rejects.toBeInstanceOf(OpenAI.RateLimitError);
    await expect(openai.chat.completions.create({ model: 'sim-chat', messages: user })).resolves.toMatchObject({ object: 'chat.completion' });

    sim.injectFault({ status: 529, times: 2, match: { model: 'sim-busy' } });
    await expect(anthropic.messages.create({ model: 'sim-chat', max_tokens: 5, messages: user })).resolves.toMatchObject({ type: 'message' });
    for (let i = 0; i < 2; i++) {
      const err = await anthropic.messages.create({ model: 'sim-busy', max_tokens: 5, messages: user }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      expect(err).toMatchObject({ status: 529, error: { type: 'error', error: { type: 'overloaded_error' } } });
    }
    await expect(anthropic.messages.create({ model: 'sim-busy', max_tokens: 5, messages: user })).resolves.toMatchObject({ type: 'message' });

    for (const status of [500, 503]) {
      sim.injectFault({ status, message: 'boom' });
      const res = await chat({});
      expect(res.status).toBe(status);
      expect(await res.json()).toMatchObject({ error: { message: 'boom', type: status === 500 ? 'server_error' : 'service_unavailable_error' } });
    }
    sim.injectFault({ status: 500 });
    const res = await messages({ stream: true });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ type: 'error', error: { type: 'api_error', message: 'Simulated upstream error 500' } });
  });

  it('faults can be set and cleared over HTTP with the same JSON, and bad specs are refused', async () => {
    expect((await postFault({ status: 503, times: 0 })).status).toBe(200);
    expect((await chat({})).status).toBe(503);
    expect((await chat({})).status).toBe(503); // times 0 = until cleared
    expect((await fetch(`${sim.url}/_sim/faults`, { method: 'DELETE' })).status).toBe(200);
    expect((await chat({})).status).toBe(200);
    const bad = await fetch(`${sim.url}/_sim/faults`, { method: 'POST', body: '{"status":"x"}' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toBe('status must be a number');
    expect(sim.requests.some((r) => r.path.startsWith('/_sim'))).toBe(false);
  });

  it('delayMs holds the response headers back', async () => {
    await postFault({ delayMs: 250 });
    const t0 = Date.now();
    const res = await chat({});
    expect(Date.now() - t0).toBeGreaterThanOrEqual(240);
    expect(res.status).toBe(200);
  });

  it('cutAfterChunks destroys the socket mid-stream (and before any reply when not streaming)', async () => {
    sim.injectFault({ cutAfterChunks: 3 });
    const res = await chat({ stream: true });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let got = '';
    const err = await (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return undefined;
        got += Buffer.from(value).toString();
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error); // the chunked body ends without its terminator
    expect(got.split('\n\n').filter(Boolean)).toHaveLength(3); // role chunk + 2 tokens arrived
    expect(got).not.toContain('[DONE]');
    const rec = sim.requests.at(-1)!;
    await sim.waitForRequest((r) => r === rec && r.status === 200 && !r.finished, 1000);
    expect(rec).toMatchObject({ outputTokensSent: 2, finished: false, aborted: false });

    sim.injectFault({ cutAfterChunks: 0 });
    await expect(messages({})).rejects.toThrow();
  });

  it('stalls hold an accepted reply where a test wants to end it: after the headers, mid-body, after N events; cutMidBody drops a whole reply halfway', async () => {
    // After the headers: the 200 is out, no body byte yet; then the reply carries on.
    sim.injectFault({ stallAt: 'headers', stallMs: 300 });
    const headersFirst = chat({});
    const held = await sim.waitForRequest((r) => r.stalled, 2000);
    expect({ status: held.status, finished: held.finished, outputTokensSent: held.outputTokensSent }).toEqual({ status: 200, finished: false, outputTokensSent: 0 });
    const whole = await headersFirst;
    expect(((await whole.json()) as { object: string }).object).toBe('chat.completion');
    expect(held).toMatchObject({ stalled: false, finished: true });

    // Mid-body: half the JSON is out; a client that gives up meanwhile ends the stall at once.
    sim.injectFault({ stallAt: 'mid-body', stallMs: 10_000 });
    const abort = new AbortController();
    const midBody = fetch(`${sim.openaiBaseUrl}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'sim-chat', messages: user }), signal: abort.signal });
    const half = await sim.waitForRequest((r) => r.stalled && r.id > held.id, 2000);
    const partial = await midBody;
    abort.abort();
    await expect(partial.text()).rejects.toThrow();
    await sim.waitForRequest((r) => r === half && r.aborted && !r.stalled, 2000);
    expect(half.outputTokensSent).toBe(0);

    // After N events of a stream: the role chunk and two tokens, then the hold.
    sim.injectFault({ stallAfterChunks: 3, stallMs: 200 });
    const streamed = await chat({ stream: true });
    const paused = await sim.waitForRequest((r) => r.stalled && r.id > half.id, 2000);
    expect(paused.outputTokensSent).toBe(2);
    expect(await streamed.text()).toContain('[DONE]');

    // cutMidBody: a 200 and half a body, then the connection is gone.
    sim.injectFault({ cutMidBody: true });
    const cut = await messages({});
    expect(cut.status).toBe(200);
    await expect(cut.text()).rejects.toThrow();
    expect(sim.requests.at(-1)).toMatchObject({ status: 200, finished: false, outputTokensSent: 0 });

    const bad = await postFault({ stallAt: 'later' } as unknown as FaultSpec);
    expect(bad.status).toBe(400);
    // The aborted request above would answer later tests' look-ups of the first aborted one.
    sim.clearLog();
  });

  it('malformedAfterChunks injects a non-JSON data line that the SDK rejects', async () => {
    sim.injectFault({ malformedAfterChunks: 2 });
    const text = await (await chat({ stream: true })).text();
    expect(text).toContain('data: {not json\n\n');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);

    sim.injectFault({ malformedAfterChunks: 2 });
    const stream = await openai.chat.completions.create({ model: 'sim-chat', messages: user, stream: true });
    await expect(
      (async () => {
        for await (const _ of stream);
      })(),
    ).rejects.toThrow();
  });

  it('errorEventAfterChunks sends an in-band error in each format and ends the stream', async () => {
    sim.injectFault({ errorEventAfterChunks: 4, message: 'upstream overloaded' });
    const stream = await openai.chat.completions.create({ model: 'sim-chat', messages: user, stream: true });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const c of stream) seen.push(c.choices[0]?.delta.content ?? '');
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err).toMatchObject({ message: 'upstream overloaded', status: undefined });
    expect(seen).toHaveLength(4);

    sim.injectFault({ errorEventAfterChunks: 3 });
    const raw = await (await messages({ stream: true })).text();
    expect(raw.endsWith('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Simulated upstream failure"}}\n\n')).toBe(true);

    sim.injectFault({ errorEventAfterChunks: 3 });
    const e2 = await anthropic.messages.stream({ model: 'sim-chat', max_tokens: 100, messages: user }).finalMessage().catch((e: unknown) => e);
    expect(e2).toBeInstanceOf(Anthropic.APIError);
    expect(e2).toMatchObject({ error: { error: { type: 'overloaded_error' } } });
  });

  it('hang never answers; the client timeout is recorded as an abort', async () => {
    sim.injectFault({ hang: true });
    const err = await openai.chat.completions.create({ model: 'sim-chat', messages: user }, { timeout: 200 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    const rec = await sim.waitForRequest((r) => r.aborted, 2000);
    expect(rec).toMatchObject({ status: 0, finished: false, outputTokensSent: 0 });
  });
});

describe('simulator pacing, aborts and request records', () => {
  it('paces the first token and the following ones, per simulator and per request', async () => {
    const slow = await startSimulator({ firstTokenDelayMs: 150, tokenDelayMs: 10 });
    try {
      const t0 = Date.now();
      const res = await fetch(`${slow.openaiBaseUrl}/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'm', messages: user, stream: true, sim_reply_tokens: 10 }),
      });
      const reader = res.body!.getReader();
      let text = '';
      let firstContentAt = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
        if (!firstContentAt && text.includes('"delta":{"content":" ')) firstContentAt = Date.now() - t0;
      }
      expect(firstContentAt).toBeGreaterThanOrEqual(140);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(150 + 9 * 10 - 10);
    } finally {
      await slow.close();
    }
    sim.injectFault({ firstTokenDelayMs: 200 });
    const t1 = Date.now();
    await anthropic.messages.create({ model: 'sim-chat', max_tokens: 5, messages: user });
    expect(Date.now() - t1).toBeGreaterThanOrEqual(190);
  });

  it('detects a client abort mid-stream and stops generating', async () => {
    sim.clearLog();
    const ac = new AbortController();
    const res = await fetch(`${sim.url}/v1/messages`, {
      method: 'POST',
      signal: ac.signal,
      body: JSON.stringify({ model: 'sim-chat', max_tokens: 1000, stream: true, sim_reply_tokens: 200, messages: user }),
    });
    sim.injectFault({ tokenDelayMs: 20 }); // (applies to the next request below)
    const paced = await fetch(`${sim.openaiBaseUrl}/chat/completions`, {
      method: 'POST',
      signal: ac.signal,
      body: JSON.stringify({ model: 'sim-chat', stream: true, sim_reply_tokens: 200, messages: user }),
    });
    const reader = paced.body!.getReader();
    let got = '';
    while ((got.match(/"content":" /g) ?? []).length < 3) got += Buffer.from((await reader.read()).value!).toString();
    ac.abort();
    await res.text().catch(() => undefined);
    const rec = await sim.waitForRequest((r) => r.path === '/v1/chat/completions' && r.aborted, 2000);
    const sent = rec.outputTokensSent;
    expect(sent).toBeGreaterThanOrEqual(3);
    expect(sent).toBeLessThan(200);
    await new Promise((r) => setTimeout(r, 100));
    expect(rec.outputTokensSent).toBe(sent);
    expect(rec.finished).toBe(false);
  });

  it('records headers (credential, traceparent), requires an API key when configured, and can run without a log', async () => {
    const keyed = await startSimulator({ apiKey: 'sk-upstream-secret', log: false });
    try {
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const ok = await fetch(`${sim.openaiBaseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer abc', traceparent },
        body: JSON.stringify({ model: 'sim-chat', messages: user }),
      });
      expect(ok.status).toBe(200);
      const rec = await sim.waitForRequest((r) => r.headers.traceparent === traceparent);
      expect(rec.headers.authorization).toBe('Bearer abc');

      const denied = await new Anthropic({ apiKey: 'wrong', baseURL: keyed.anthropicBaseUrl, maxRetries: 0 }).messages
        .create({ model: 'm', max_tokens: 5, messages: user })
        .catch((e: unknown) => e);
      expect(denied).toBeInstanceOf(Anthropic.AuthenticationError);
      const good = new OpenAI({ apiKey: 'sk-upstream-secret', baseURL: keyed.openaiBaseUrl, maxRetries: 0 });
      await expect(good.chat.completions.create({ model: 'm', messages: user })).resolves.toMatchObject({ object: 'chat.completion' });
      expect(keyed.requests).toHaveLength(0);
    } finally {
      await keyed.close();
    }
    sim.clearLog();
    expect(sim.requests).toHaveLength(0);
    await expect(sim.waitForRequest(() => true, 50)).rejects.toThrow(/no matching simulator request/);
  });
});
