// The official Anthropic SDKs (1.x: Bearer + anthropic-version 2026-10-21; 0.60: x-api-key +
// 2023-06-01) against a real gateway in front of the simulator, with OpenAI- and Anthropic-format
// upstreams. Every scenario also checks the charge against the simulator's own usage.
import Anthropic from '@anthropic-ai/sdk';
import AnthropicV0 from 'anthropic-sdk-v0';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { PNG_BASE64, expectChargesMatchSimulator, mark } from './e2e-support.js';

interface Block {
  type: string;
  text?: string;
  thinking?: string;
  signature?: string;
  id?: string;
  name?: string;
  input?: unknown;
}
interface Msg {
  id: string;
  type: string;
  role: string;
  model: string;
  content: Block[];
  stop_reason: string | null;
  usage: { input_tokens: number; output_tokens: number };
}
type Body = Record<string, unknown>;

/** The two SDK generations behind one shape (their param types differ; the wire does not). */
interface Sdk {
  label: string;
  create(body: Body): Promise<Msg>;
  stream(body: Body): Promise<{ message: Msg; events: { type: string; index?: number }[] }>;
  countTokens(body: Body): Promise<number>;
  errors: {
    APIError: new (...a: never[]) => Error;
    AuthenticationError: new (...a: never[]) => Error;
    BadRequestError: new (...a: never[]) => Error;
    NotFoundError: new (...a: never[]) => Error;
    RateLimitError: new (...a: never[]) => Error;
    InternalServerError: new (...a: never[]) => Error;
  };
  /** 1.x has dedicated classes for these; 0.x raises a plain APIError / InternalServerError. */
  paymentRequired: new (...a: never[]) => Error;
  contentTooLarge: new (...a: never[]) => Error;
  overloaded: new (...a: never[]) => Error;
}

interface StreamLike {
  on(event: 'streamEvent', fn: (e: { type: string; index?: number }) => void): unknown;
  finalMessage(): Promise<unknown>;
}
interface ClientLike {
  messages: {
    create(body: never): Promise<unknown>;
    stream(body: never): StreamLike;
    countTokens(body: never): Promise<{ input_tokens: number }>;
  };
}

function wrap(label: string, client: ClientLike): Omit<Sdk, 'errors' | 'paymentRequired' | 'contentTooLarge' | 'overloaded'> {
  return {
    label,
    create: async (body) => (await client.messages.create(body as never)) as Msg,
    async stream(body) {
      const events: { type: string; index?: number }[] = [];
      const s = client.messages.stream(body as never);
      s.on('streamEvent', (e) => events.push({ type: e.type, ...(e.index === undefined ? {} : { index: e.index }) }));
      const message = (await s.finalMessage()) as Msg;
      return { message, events };
    },
    countTokens: async (body) => (await client.messages.countTokens(body as never)).input_tokens,
  };
}

function sdkV1(h: Harness, key = h.key): Sdk {
  const client = new Anthropic({ apiKey: key, baseURL: h.baseUrl, maxRetries: 0 });
  return {
    ...wrap('@anthropic-ai/sdk 1.x', client as unknown as ClientLike),
    errors: Anthropic,
    paymentRequired: Anthropic.PaymentRequiredError,
    contentTooLarge: Anthropic.ContentTooLargeError,
    overloaded: Anthropic.OverloadedError,
  };
}

function sdkV0(h: Harness, key = h.key): Sdk {
  const client = new AnthropicV0({ apiKey: key, baseURL: h.baseUrl, maxRetries: 0 });
  return {
    ...wrap('@anthropic-ai/sdk 0.60', client as unknown as ClientLike),
    errors: AnthropicV0,
    paymentRequired: AnthropicV0.APIError,
    contentTooLarge: AnthropicV0.APIError,
    overloaded: AnthropicV0.InternalServerError,
  };
}

const SDKS = [sdkV1, sdkV0];
const PLAIN = 'outlaw-1-xploded'; // tools + vision, no reasoning
const REASONING = 'glm-5.3-flash-xploded'; // tools + vision + reasoning
const NO_VISION = 'glm-5.3-xploded';

const WEATHER_TOOLS = [
  {
    name: 'get_weather',
    description: 'Current weather for a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
  {
    name: 'get_time',
    description: 'Local time in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
];

async function caught(p: Promise<unknown>): Promise<Error & { status?: number; error?: unknown }> {
  try {
    await p;
  } catch (err) {
    return err as Error & { status?: number };
  }
  throw new Error('expected the call to fail');
}

function errorType(err: { error?: unknown }): unknown {
  const e = err.error as { error?: { type?: unknown }; type?: unknown } | undefined;
  return e?.error?.type ?? e?.type;
}

describe.each<[UpstreamFormatName, 'memory' | 'redis']>([
  ['openai', 'memory'],
  ['anthropic', 'redis'],
])('Anthropic SDKs through the gateway, %s-format upstream (%s ledger)', (upstreamFormat, ledger) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat, ledger });
  });
  afterAll(async () => {
    await h?.close();
  });

  describe.each(SDKS.map((make) => [make.name, make] as const))('%s', (_name, make) => {
    it('messages.create, non-streaming', async () => {
      const sdk = make(h);
      const m0 = await mark(h);
      const msg = await sdk.create({ model: PLAIN, max_tokens: 256, system: 'Be brief.', messages: [{ role: 'user', content: 'Say hello' }] });
      expect(msg.type).toBe('message');
      expect(msg.role).toBe('assistant');
      expect(msg.model).toBe(PLAIN);
      expect(msg.stop_reason).toBe('end_turn');
      expect(msg.content).toHaveLength(1);
      expect(msg.content[0]!.type).toBe('text');
      expect(msg.content[0]!.text!.length).toBeGreaterThan(0);
      const [rec] = await expectChargesMatchSimulator(h, m0, 1);
      expect(msg.usage.input_tokens).toBe(rec!.usage.input);
      expect(msg.usage.output_tokens).toBe(rec!.usage.output);
    });

    it('messages.stream + finalMessage(), blocks indexed in order', async () => {
      const sdk = make(h);
      const m0 = await mark(h);
      const { message, events } = await sdk.stream({ model: PLAIN, max_tokens: 256, messages: [{ role: 'user', content: 'Tell me a story' }] });
      expect(message.stop_reason).toBe('end_turn');
      expect(message.model).toBe(PLAIN);
      expect(message.content.map((b) => b.type)).toEqual(['text']);
      expect(message.content[0]!.text!.length).toBeGreaterThan(0);
      expect(events[0]!.type).toBe('message_start');
      expect(events[events.length - 1]!.type).toBe('message_stop');
      expect(events.filter((e) => e.type === 'content_block_start').map((e) => e.index)).toEqual([0]);
      const [rec] = await expectChargesMatchSimulator(h, m0, 1);
      expect(message.usage.input_tokens).toBe(rec!.usage.input);
      expect(message.usage.output_tokens).toBe(rec!.usage.output);
    });

    it.each([false, true])('tool use round trip with parallel calls (stream=%s)', async (streamed) => {
      const sdk = make(h);
      const m0 = await mark(h);
      const first: Body = { model: PLAIN, max_tokens: 512, tools: WEATHER_TOOLS, messages: [{ role: 'user', content: 'Weather and time in Oslo, in parallel please' }] };
      const msg = streamed ? (await sdk.stream(first)).message : await sdk.create(first);
      expect(msg.stop_reason).toBe('tool_use');
      const uses = msg.content.filter((b) => b.type === 'tool_use');
      expect(uses.map((u) => u.name)).toEqual(['get_weather', 'get_time']);
      for (const u of uses) {
        expect(u.id).toMatch(/^(toolu_|call_)\w+$/); // the upstream's own id, kept
        expect(u.input).toEqual(expect.objectContaining({ city: expect.any(String) as unknown }));
      }
      const second: Body = {
        ...first,
        messages: [
          ...(first.messages as unknown[]),
          { role: 'assistant', content: msg.content },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: uses[0]!.id, content: 'Sunny, 21 C' },
              { type: 'tool_result', tool_use_id: uses[1]!.id, content: [{ type: 'text', text: 'timezone lookup failed' }], is_error: true },
            ],
          },
        ],
      };
      const reply = streamed ? (await sdk.stream(second)).message : await sdk.create(second);
      expect(reply.stop_reason).toBe('end_turn');
      expect(reply.content.map((b) => b.type)).toEqual(['text']);
      expect(reply.content[0]!.text).toContain('Tool result received');
      // The upstream saw both results, ids kept.
      const upstreamBody = JSON.stringify(h.simulator.requests[h.simulator.requests.length - 1]!.body);
      expect(upstreamBody).toContain(uses[0]!.id!);
      expect(upstreamBody).toContain(uses[1]!.id!);
      await expectChargesMatchSimulator(h, m0, 2);
    });

    it('an image (base64) on a vision model', async () => {
      const sdk = make(h);
      const m0 = await mark(h);
      const msg = await sdk.create({
        model: PLAIN,
        max_tokens: 128,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_BASE64 } }, { type: 'text', text: 'What is this?' }] }],
      });
      expect(msg.content[0]!.type).toBe('text');
      expect(JSON.stringify(h.simulator.requests[h.simulator.requests.length - 1]!.body)).toContain(PNG_BASE64);
      await expectChargesMatchSimulator(h, m0, 1);
    });

    it('an image on a model without vision: 400 invalid_request_error, nothing charged, upstream not called', async () => {
      const sdk = make(h);
      const m0 = await mark(h);
      const before = await h.backend.ledger.balance(h.accountId);
      const err = await caught(
        sdk.create({
          model: NO_VISION,
          max_tokens: 128,
          messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_BASE64 } }, { type: 'text', text: 'What is this?' }] }],
        }),
      );
      expect(err).toBeInstanceOf(sdk.errors.BadRequestError);
      expect(err.status).toBe(400);
      expect(errorType(err)).toBe('invalid_request_error');
      expect(err.message).toMatch(/vision/);
      expect((await h.backend.ledger.balance(h.accountId)).balance).toBe(before.balance);
      await expectChargesMatchSimulator(h, m0, 0);
    });

    it.each([false, true])('thinking on a reasoning model, signature echoed back next turn (stream=%s)', async (streamed) => {
      const sdk = make(h);
      const m0 = await mark(h);
      const first: Body = {
        model: REASONING,
        max_tokens: 4096,
        thinking: { type: 'enabled', budget_tokens: 2048 },
        tools: WEATHER_TOOLS.slice(0, 1),
        messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
      };
      const msg = streamed ? (await sdk.stream(first)).message : await sdk.create(first);
      expect(msg.content[0]!.type).toBe('thinking');
      const thinking = msg.content[0]!;
      expect(thinking.thinking!.length).toBeGreaterThan(0);
      expect(thinking.signature!.length).toBeGreaterThan(0);
      expect(msg.stop_reason).toBe('tool_use');
      const use = msg.content.find((b) => b.type === 'tool_use')!;
      const second: Body = {
        ...first,
        messages: [
          ...(first.messages as unknown[]),
          { role: 'assistant', content: msg.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Rain, 9 C' }] },
        ],
      };
      // Through the Anthropic upstream the simulator checks the signature byte for byte (400 otherwise).
      const reply = streamed ? (await sdk.stream(second)).message : await sdk.create(second);
      expect(reply.stop_reason).toBe('end_turn');
      expect(reply.content.some((b) => b.type === 'text')).toBe(true);
      if (upstreamFormat === 'anthropic') {
        const echoed = h.simulator.requests[h.simulator.requests.length - 1]!.body as { messages: { content: Block[] }[] };
        expect(echoed.messages[1]!.content[0]).toEqual({ type: 'thinking', thinking: thinking.thinking, signature: thinking.signature });
      }
      await expectChargesMatchSimulator(h, m0, 2);
    });

    it('count_tokens: a positive count, no upstream call, no charge', async () => {
      const sdk = make(h);
      const m0 = await mark(h);
      const before = await h.backend.ledger.balance(h.accountId);
      const n = await sdk.countTokens({ model: REASONING, system: 'Be brief.', tools: WEATHER_TOOLS, messages: [{ role: 'user', content: 'What is the weather in Oslo?' }] });
      expect(n).toBeGreaterThan(10);
      const longer = await sdk.countTokens({ model: REASONING, system: 'Be brief.', tools: WEATHER_TOOLS, messages: [{ role: 'user', content: 'What is the weather in Oslo? '.repeat(20) }] });
      expect(longer).toBeGreaterThan(n);
      expect((await h.backend.ledger.balance(h.accountId)).balance).toBe(before.balance);
      expect(h.simulator.requests.length).toBe(m0.simIndex);
      await expectChargesMatchSimulator(h, m0, 0);
    });

    it('401 authentication_error for a wrong key', async () => {
      const sdk = make(h, 'tg-not-a-real-key-000000000000000000');
      const err = await caught(sdk.create({ model: PLAIN, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(sdk.errors.AuthenticationError);
      expect(err.status).toBe(401);
      expect(errorType(err)).toBe('authentication_error');
    });

    it('404 not_found_error for an unknown model', async () => {
      const sdk = make(h);
      const err = await caught(sdk.create({ model: 'claude-nope', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(sdk.errors.NotFoundError);
      expect(err.status).toBe(404);
      expect(errorType(err)).toBe('not_found_error');
      expect(err.message).toContain('claude-nope');
    });

    it('400 invalid_request_error for a missing max_tokens', async () => {
      const sdk = make(h);
      const err = await caught(sdk.create({ model: PLAIN, messages: [{ role: 'user', content: 'hi' }] }));
      expect(err).toBeInstanceOf(sdk.errors.BadRequestError);
      expect(err.status).toBe(400);
      expect(errorType(err)).toBe('invalid_request_error');
      expect(err.message).toContain('max_tokens');
    });

    it.each([
      [429, 'rate_limit_error', 'RateLimitError'],
      [500, 'api_error', 'InternalServerError'],
      [529, 'overloaded_error', 'overloaded'],
    ] as const)('upstream %i -> %s, the right SDK error class, nothing charged', async (status, type, cls) => {
      const sdk = make(h);
      const m0 = await mark(h);
      const before = await h.backend.ledger.balance(h.accountId);
      h.simulator.injectFault({ status, times: 5 });
      try {
        const err = await caught(sdk.create({ model: PLAIN, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }));
        const expected = cls === 'overloaded' ? sdk.overloaded : sdk.errors[cls];
        expect(err).toBeInstanceOf(expected);
        expect(errorType(err)).toBe(type);
        if (status === 529) expect(err.status).toBe(529);
        if (status === 429) expect(err.status).toBe(429);
        if (status === 500) expect(err.status).toBeGreaterThanOrEqual(500);
      } finally {
        h.simulator.clearFaults();
      }
      await expect.poll(async () => (await h.backend.ledger.balance(h.accountId)).balance).toBe(before.balance);
      const all = await h.backend.ledger.listUsage(h.accountId, { limit: 10_000 });
      const recs = all.slice(0, all.length - m0.usageCount);
      for (const r of recs) expect(r.cost).toBe(0);
    });
  });
});

describe('Anthropic SDKs: refusals that need their own gateway', () => {
  let poor: Harness;
  let small: Harness;
  beforeAll(async () => {
    poor = await startHarness({ upstreamFormat: 'anthropic', balanceMicros: 20 });
    small = await startHarness({ upstreamFormat: 'openai', config: { maxBodyBytes: 4096 } });
  });
  afterAll(async () => {
    await poor?.close();
    await small?.close();
  });

  it.each(SDKS.map((make) => [make.name, make] as const))('%s: 402 billing_error with a tiny balance, upstream not called', async (_n, make) => {
    const sdk = make(poor);
    const err = await caught(sdk.create({ model: PLAIN, max_tokens: 1024, messages: [{ role: 'user', content: 'hi' }] }));
    expect(err).toBeInstanceOf(sdk.paymentRequired);
    expect(err.status).toBe(402);
    expect(errorType(err)).toBe('billing_error');
    expect(err.message).toMatch(/balance/i);
    expect(poor.simulator.requests).toHaveLength(0);
    expect((await poor.backend.ledger.balance(poor.accountId)).balance).toBe(20);
  });

  it.each(SDKS.map((make) => [make.name, make] as const))('%s: 413 request_too_large over maxBodyBytes', async (_n, make) => {
    const sdk = make(small);
    const err = await caught(sdk.create({ model: PLAIN, max_tokens: 64, messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }));
    expect(err).toBeInstanceOf(sdk.contentTooLarge);
    expect(err.status).toBe(413);
    expect(errorType(err)).toBe('request_too_large');
    expect(small.simulator.requests).toHaveLength(0);
  });
});
