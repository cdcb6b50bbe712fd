// Edges of /v1/messages seen through the official SDK 1.x: failures after the stream started, upstream
// errors before it, tool_choice variants, a forged thinking signature, request ids and the 402 hint.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { expectChargesMatchSimulator, mark, readSse } from './e2e-support.js';

const PLAIN = 'outlaw-1-xploded';
const REASONING = 'glm-5.3-flash-xploded';
const TOOLS = [
  { name: 'get_weather', description: 'Weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } },
  { name: 'get_time', description: 'Time', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } },
];

describe.each<UpstreamFormatName>(['openai', 'anthropic'])('SDK 1.x edges, %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  let client: Anthropic;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat });
    client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([
    ['an in-band upstream error event', { errorEventAfterChunks: 6 }],
    ['an upstream socket cut', { cutAfterChunks: 6 }],
  ] as const)('%s mid-stream becomes an SSE error event; the SDK throws; the partial output is charged', async (_label, fault) => {
    const m0 = await mark(h);
    h.simulator.injectFault({ ...fault, times: 1 });
    const stream = client.messages.stream({ model: PLAIN, max_tokens: 300, messages: [{ role: 'user', content: 'Tell me a long story' }] });
    let text = '';
    stream.on('text', (t) => (text += t));
    const err = await stream.finalMessage().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(text.length).toBeGreaterThan(0);
    const sim = h.simulator.requests[h.simulator.requests.length - 1]!;
    await expect.poll(async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 })).length).toBe(m0.usageCount + 1);
    const [rec] = await h.backend.ledger.listUsage(h.accountId, { limit: 1 });
    expect(rec!.status).toBe('upstream_failed');
    // Output relayed before the failure is what the simulator sent, token for token.
    expect(rec!.usage.output).toBe(sim.outputTokensSent);
    expect(rec!.usage.input).toBeGreaterThan(0);
  });

  it('a malformed upstream event is skipped; the stream completes and is charged exactly', async () => {
    const m0 = await mark(h);
    h.simulator.injectFault({ malformedAfterChunks: 4, times: 1 });
    const res = await fetch(`${h.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: PLAIN, max_tokens: 300, stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] }),
    });
    const events = await readSse(res);
    for (const e of events) {
      expect(e.event).toBeDefined();
      expect(() => JSON.parse(e.data) as unknown).not.toThrow();
    }
    expect(events[events.length - 1]!.event).toBe('message_stop');
    const msg = await client.messages.stream({ model: PLAIN, max_tokens: 300, messages: [{ role: 'user', content: 'Tell me a story' }] }).finalMessage();
    expect(msg.stop_reason).toBe('end_turn');
    await expectChargesMatchSimulator(h, m0, 2);
  });

  it('an upstream 529 on a streaming request is an HTTP error, not a 200 stream', async () => {
    h.simulator.injectFault({ status: 529, times: 5 });
    try {
      const res = await fetch(`${h.baseUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': h.key, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: PLAIN, max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(529);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      const body = (await res.json()) as { type: string; error: { type: string; message: string } };
      expect(body.type).toBe('error');
      expect(body.error.type).toBe('overloaded_error');
    } finally {
      h.simulator.clearFaults();
    }
  });

  it.each([
    [{ type: 'any' }, 'tool_use', ['get_weather', 'get_time']],
    [{ type: 'tool', name: 'get_time' }, 'tool_use', ['get_time']],
    [{ type: 'none' }, 'end_turn', []],
    [{ type: 'auto', disable_parallel_tool_use: true }, 'tool_use', ['get_weather']],
  ] as const)('tool_choice %j', async (choice, stop, names) => {
    const m0 = await mark(h);
    const msg = await client.messages.create({
      model: PLAIN,
      max_tokens: 300,
      tools: TOOLS,
      tool_choice: choice as Anthropic.ToolChoice,
      messages: [{ role: 'user', content: 'Weather and time in Oslo, in parallel' }],
    });
    expect(msg.stop_reason).toBe(stop);
    expect(msg.content.filter((b) => b.type === 'tool_use').map((b) => (b as { name: string }).name)).toEqual(names);
    await expectChargesMatchSimulator(h, m0, 1);
  });

  it.each([false, true])('a reply cut by max_tokens stops with max_tokens (stream=%s), charged exactly', async (streamed) => {
    const m0 = await mark(h);
    const body = { model: PLAIN, max_tokens: 5, messages: [{ role: 'user' as const, content: 'Tell me a long story' }] };
    const msg = streamed ? await client.messages.stream(body).finalMessage() : await client.messages.create(body);
    expect(msg.stop_reason).toBe('max_tokens');
    expect(msg.usage.output_tokens).toBe(5);
    await expectChargesMatchSimulator(h, m0, 1);
  });

  it('a tool without arguments arrives as input {} (stream and not)', async () => {
    const tools = [{ name: 'now', description: 'The time', input_schema: { type: 'object' as const, properties: {} } }];
    const body = { model: PLAIN, max_tokens: 100, tools, messages: [{ role: 'user' as const, content: 'What time is it?' }] };
    const a = await client.messages.create(body);
    const b = await client.messages.stream(body).finalMessage();
    for (const m of [a, b]) {
      expect(m.stop_reason).toBe('tool_use');
      const use = m.content.find((x) => x.type === 'tool_use') as { input: unknown } | undefined;
      expect(use?.input).toEqual({});
    }
  });

  // Only an Anthropic upstream signs thinking, so only it can tell an edited thinking block; for an
  // OpenAI-format upstream the gateway's signature is a marker, not a MAC, and the edit goes through.
  const forgedTitle =
    upstreamFormat === 'anthropic'
      ? 'a forged thinking signature is refused with 400 invalid_request_error, nothing charged'
      : 'an edited thinking block goes to an OpenAI-format upstream (no signature to check) and is charged';
  it(forgedTitle, async () => {
    await h.settled();
    const before = (await h.backend.ledger.balance(h.accountId)).balance;
    const first = await client.messages.create({ model: REASONING, max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Think about it' }] });
    const thinking = first.content.find((b) => b.type === 'thinking') as { thinking: string; signature: string };
    expect(thinking).toBeDefined();
    await h.settled();
    const spent = (await h.backend.ledger.balance(h.accountId)).balance;
    expect(spent).toBeLessThan(before);
    const forged = { ...thinking, thinking: `${thinking.thinking} (edited)` };
    const result = await client.messages
      .create({
        model: REASONING,
        max_tokens: 2000,
        thinking: { type: 'enabled', budget_tokens: 1024 },
        messages: [
          { role: 'user', content: 'Think about it' },
          { role: 'assistant', content: [{ type: 'thinking', ...forged }, ...first.content.filter((b) => b.type === 'text')] },
          { role: 'user', content: 'And again' },
        ],
      })
      .then(
        (reply) => reply,
        (e: unknown) => e,
      );
    if (upstreamFormat === 'openai') {
      expect(result).not.toBeInstanceOf(Error);
      expect((result as Anthropic.Message).stop_reason).toBe('end_turn');
      await expect.poll(async () => (await h.backend.ledger.balance(h.accountId)).balance).toBeLessThan(spent);
      return;
    }
    expect(result).toBeInstanceOf(Anthropic.BadRequestError);
    expect((result as InstanceType<typeof Anthropic.APIError>).error).toEqual(expect.objectContaining({ type: 'error', error: expect.objectContaining({ type: 'invalid_request_error' }) as unknown }));
    expect((result as Error).message).toMatch(/signature/i);
    await expect.poll(async () => (await h.backend.ledger.balance(h.accountId)).balance).toBe(spent);
  });

  it('a text document and a URL image reach the upstream, charged exactly', async () => {
    const m0 = await mark(h);
    const doc = 'Clause 7. Pets are allowed on the balcony only. ';
    const msg = await client.messages.create({
      model: PLAIN,
      max_tokens: 64,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: doc } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
            { type: 'text', text: 'Summarise.' },
          ],
        },
      ],
    });
    expect(msg.stop_reason).toBe('end_turn');
    const sent = JSON.stringify(h.simulator.requests[h.simulator.requests.length - 1]!.body);
    expect(sent).toContain('Pets are allowed on the balcony');
    expect(sent).toContain('https://example.com/cat.png');
    await expectChargesMatchSimulator(h, m0, 1);
  });

  it('request ids: request-id and x-request-id headers, ?beta=true and unknown query parameters ignored', async () => {
    const res = await fetch(`${h.baseUrl}/v1/messages?beta=true&foo=bar`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${h.key}`, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: PLAIN, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('request-id');
    expect(id).toBeTruthy();
    expect(res.headers.get('x-request-id')).toBe(id);
    const { data, response } = await client.messages.create({ model: PLAIN, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(data.type).toBe('message');
    expect(response.headers.get('request-id')).toBeTruthy();
  });

  it('streamed events all carry event: lines and message_start reports input tokens > 0', async () => {
    const res = await fetch(`${h.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: REASONING, max_tokens: 2000, stream: true, thinking: { type: 'enabled', budget_tokens: 1024 }, tools: TOOLS, messages: [{ role: 'user', content: 'Weather in Oslo, in parallel with the time' }] }),
    });
    const events = await readSse(res);
    for (const e of events) expect(e.event).toBeDefined();
    const start = JSON.parse(events[0]!.data) as { message: { usage: { input_tokens: number } } };
    expect(start.message.usage.input_tokens).toBeGreaterThan(0);
    const starts = events.filter((e) => e.event === 'content_block_start').map((e) => JSON.parse(e.data) as { index: number; content_block: { type: string } });
    expect(starts.map((s) => s.index)).toEqual([0, 1, 2]);
    expect(starts.map((s) => s.content_block.type)).toEqual(['thinking', 'tool_use', 'tool_use']);
    const deltaTypes = new Set(events.filter((e) => e.event === 'content_block_delta').map((e) => (JSON.parse(e.data) as { delta: { type: string } }).delta.type));
    expect([...deltaTypes].sort()).toEqual(['input_json_delta', 'signature_delta', 'thinking_delta']);
  });
});

describe('402 on /v1/messages carries the hint', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'anthropic', balanceMicros: 5_000 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a max_tokens too large for the balance: 402 billing_error with max_tokens_hint that then fits', async () => {
    const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    // An explicit timeout: SDK 1.x refuses a non-streaming 128k max_tokens call otherwise.
    const err = await client.messages.create({ model: PLAIN, max_tokens: 128_000, messages: [{ role: 'user', content: 'hi' }] }, { timeout: 30_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Anthropic.PaymentRequiredError);
    const body = (err as InstanceType<typeof Anthropic.APIError>).error as { error: { type: string; max_tokens_hint?: number } };
    expect(body.error.type).toBe('billing_error');
    const hint = body.error.max_tokens_hint;
    expect(hint).toBeGreaterThan(0);
    const m0 = await mark(h);
    const ok = await client.messages.create({ model: PLAIN, max_tokens: hint!, messages: [{ role: 'user', content: 'hi' }] }, { timeout: 30_000 });
    expect(ok.type).toBe('message');
    await expectChargesMatchSimulator(h, m0, 1);
  });
});

describe('count_tokens agrees with what an Anthropic-format upstream reports', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'anthropic' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const DOC = 'Clause 1. The tenant pays rent monthly. '.repeat(50);
  it.each([
    ['text, system and tools', { system: [{ type: 'text', text: 'Be brief.' }], tools: TOOLS, messages: [{ role: 'user', content: 'What is the weather in Oslo?' }] }],
    ['an image and a tool result', { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } }, { type: 'text', text: 'What is this?' }] }] }],
    ['a text document', { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: DOC } }, { type: 'text', text: 'Summarise the lease.' }] }] }],
  ] as const)('%s', async (_label, body) => {
    const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const counted = await client.messages.countTokens({ model: PLAIN, ...(body as unknown as Omit<Anthropic.MessageCountTokensParams, 'model'>) });
    const m0 = await mark(h);
    const msg = await client.messages.create({ model: PLAIN, max_tokens: 50, ...(body as unknown as Omit<Anthropic.MessageCreateParamsNonStreaming, 'model' | 'max_tokens'>) });
    await expectChargesMatchSimulator(h, m0, 1);
    expect(counted.input_tokens).toBe(msg.usage.input_tokens);
  });
});

describe.each<UpstreamFormatName>(['openai', 'anthropic'])('streaming is relayed event by event, %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat, simulator: { tokenDelayMs: 20 } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the first text delta reaches the SDK long before the reply ends', async () => {
    const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    // One request first, so a slow machine's start-up (tokenizer load) is not measured as buffering.
    await client.messages.create({ model: PLAIN, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    const started = performance.now();
    let firstText: number | undefined;
    const stream = client.messages.stream({ model: PLAIN, max_tokens: 300, messages: [{ role: 'user', content: 'Tell me a story' }] });
    stream.on('text', () => (firstText ??= performance.now() - started));
    const msg = await stream.finalMessage();
    const total = performance.now() - started;
    expect(msg.stop_reason).toBe('end_turn');
    // 24 tokens 20 ms apart: about 460 ms of generation; a buffered relay would deliver all at the end.
    expect(total).toBeGreaterThan(400);
    expect(firstText!).toBeLessThan(total / 2);
  });

  it('an upstream 400 reaches the client as invalid_request_error with the upstream message', async () => {
    const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    h.simulator.injectFault({ status: 400, message: 'prompt is too long: 2000000 tokens > 1000000 maximum', times: 1 });
    const err = await client.messages.create({ model: PLAIN, max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    const body = (err as InstanceType<typeof Anthropic.APIError>).error as { type: string; error: { type: string; message: string } };
    expect(body.type).toBe('error');
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toContain('prompt is too long');
  });
});

describe('client gone mid-stream and header forwarding', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat: 'anthropic', simulator: { tokenDelayMs: 30 } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('anthropic-version and anthropic-beta reach the Anthropic upstream unchanged, for both SDK generations', async () => {
    const v1 = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0, defaultHeaders: { 'anthropic-beta': 'interleaved-thinking-2025-05-14' } });
    await v1.messages.create({ model: PLAIN, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    const sent1 = h.simulator.requests[h.simulator.requests.length - 1]!;
    const res = await fetch(`${h.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': h.key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: PLAIN, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    const sent0 = h.simulator.requests[h.simulator.requests.length - 1]!;
    expect(sent1.headers['anthropic-beta']).toBe('interleaved-thinking-2025-05-14');
    expect(sent1.headers['anthropic-version']).toMatch(/^20\d\d-\d\d-\d\d$/);
    expect(sent1.headers['anthropic-version']).not.toBe('2023-06-01');
    expect(sent0.headers['anthropic-version']).toBe('2023-06-01');
    // The client's key never goes upstream.
    expect(JSON.stringify(sent1.headers)).not.toContain(h.key);
  });

  it('a client that leaves mid-stream cancels the upstream call and pays only for what was sent', async () => {
    const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const m0 = await mark(h);
    const stream = client.messages.stream({ model: PLAIN, max_tokens: 300, messages: [{ role: 'user', content: 'Tell me a long story' }] });
    let pieces = 0;
    stream.on('text', () => {
      if (++pieces === 3) stream.abort();
    });
    await stream.done().catch(() => undefined);
    const sim = await h.simulator.waitForRequest((r) => r.id > m0.simIndex && (r.aborted || r.finished), 5000);
    expect(sim.aborted).toBe(true);
    await expect.poll(async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 })).length).toBe(m0.usageCount + 1);
    const [rec] = await h.backend.ledger.listUsage(h.accountId, { limit: 1 });
    expect(rec!.status).toBe('client_cancelled');
    expect(rec!.usage.output).toBeGreaterThanOrEqual(3);
    expect(rec!.usage.output).toBeLessThanOrEqual(sim.outputTokensSent);
    expect(rec!.usage.output).toBeLessThan(24);
    expect(rec!.usage.input).toBe(sim.inputTokens);
  });
});

describe.each<UpstreamFormatName>(['openai', 'anthropic'])('the SDK beta namespace (?beta=true, betas header), %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('beta.messages.create / stream / countTokens work, and an unknown model is 404 on count_tokens too', async () => {
    const client = new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 });
    const m0 = await mark(h);
    const betas = ['interleaved-thinking-2025-05-14'];
    const msg = await client.beta.messages.create({ model: REASONING, max_tokens: 3000, betas, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'hi' }] });
    expect(msg.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    const streamed = await client.beta.messages.stream({ model: REASONING, max_tokens: 3000, betas, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
    expect(streamed.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    const up = h.simulator.requests[h.simulator.requests.length - 1]!;
    if (upstreamFormat === 'anthropic') expect(up.headers['anthropic-beta']).toBe(betas[0]);
    const counted = await client.beta.messages.countTokens({ model: REASONING, betas, messages: [{ role: 'user', content: 'hi' }] });
    expect(counted.input_tokens).toBeGreaterThan(0);
    await expectChargesMatchSimulator(h, m0, 2);
    const err = await client.messages.countTokens({ model: 'claude-nope', messages: [{ role: 'user', content: 'hi' }] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
  });
});
