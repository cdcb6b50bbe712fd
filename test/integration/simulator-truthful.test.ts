// The simulator as a truthful stand-in on the paths a client may try: structured outputs that validate
// against the requested schema, logprobs when asked, reasoning exactly for reasoning models, and knobs
// that are validated and bounded (an oversized sim_reply_tokens used to take the whole process down).
import Anthropic from '@anthropic-ai/sdk';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SIM_REPLY_TOKENS } from '../../src/simulator/exchange.js';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';
import { countTokens } from '../../src/simulator/tokenizer.js';

let sim: Simulator;
let openai: OpenAI;
let anthropic: Anthropic;
const reasoning = new Set<string>(['sim-thinker']);

beforeAll(async () => {
  sim = await startSimulator({ reasoningModels: reasoning });
  openai = new OpenAI({ apiKey: 'k', baseURL: sim.openaiBaseUrl, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'k', baseURL: sim.url, maxRetries: 0 });
});
afterAll(() => sim.close());

function validator(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true });
  ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
  ajv.addFormat('date', /^\d{4}-\d{2}-\d{2}$/);
  ajv.addFormat('email', /^[^@\s]+@[^@\s]+\.[^@\s]+$/);
  ajv.addFormat('uri', /^[a-z][a-z0-9+.-]*:\/\/\S+$/i);
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  return ajv;
}

// Schemas of the shapes structured-output clients send: strict objects, nested arrays with bounds,
// enums and consts, unions, local $refs, formats and lengths, numeric ranges, allOf.
const SCHEMAS: Record<string, Record<string, unknown>> = {
  strict: { type: 'object', properties: { a: { type: 'string' }, n: { type: 'integer' } }, required: ['a', 'n'], additionalProperties: false },
  nested: {
    type: 'object',
    properties: {
      items: { type: 'array', minItems: 3, maxItems: 5, items: { type: 'object', properties: { id: { type: 'integer', minimum: 10, maximum: 12 }, tag: { enum: ['x', 'y'] } }, required: ['id', 'tag'], additionalProperties: false } },
      kind: { const: 'report' },
      score: { type: 'number', exclusiveMinimum: 5, maximum: 9 },
    },
    required: ['items', 'kind', 'score'],
    additionalProperties: false,
  },
  refs: {
    type: 'object',
    $defs: { person: { type: 'object', properties: { email: { type: 'string', format: 'email' }, born: { type: 'string', format: 'date' } }, required: ['email', 'born'], additionalProperties: false } },
    properties: { owner: { $ref: '#/$defs/person' }, id: { type: 'string', format: 'uuid' }, when: { type: 'string', format: 'date-time' }, site: { type: 'string', format: 'uri' } },
    required: ['owner', 'id', 'when', 'site'],
    additionalProperties: false,
  },
  unions: {
    type: 'object',
    properties: { v: { anyOf: [{ type: 'null' }, { type: 'string', minLength: 12, maxLength: 14 }] }, w: { type: ['integer', 'null'], multipleOf: 7, minimum: 8 } },
    required: ['v', 'w'],
    additionalProperties: false,
  },
  allOf: { allOf: [{ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, { properties: { b: { type: 'boolean' } }, required: ['b'] }] },
};

describe('structured outputs validate against the schema', () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`chat completions, ${name}: streamed and not`, async () => {
      const check = validator().compile(schema);
      const response_format = { type: 'json_schema' as const, json_schema: { name, schema, strict: true } };
      const res = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'Fill it in.' }], response_format });
      const content = res.choices[0]?.message.content ?? '';
      const value: unknown = JSON.parse(content);
      expect(check(value), JSON.stringify(check.errors)).toBe(true);
      expect(res.usage?.completion_tokens).toBe(countTokens(content));
      let streamed = '';
      const s = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'Fill it in.' }], response_format, stream: true });
      for await (const chunk of s) streamed += chunk.choices[0]?.delta.content ?? '';
      expect(streamed).toBe(content);
    });

    it(`messages output_config.format, ${name}`, async () => {
      const check = validator().compile(schema);
      const res = await anthropic.messages.create({
        model: 'sim-chat',
        max_tokens: 1024,
        messages: [{ role: 'user', content: 'Fill it in.' }],
        output_config: { format: { type: 'json_schema', schema } },
      } as Anthropic.MessageCreateParamsNonStreaming);
      const block = res.content.find((b) => b.type === 'text');
      const value: unknown = JSON.parse(block?.type === 'text' ? block.text : '');
      expect(check(value), JSON.stringify(check.errors)).toBe(true);
    });
  }

  it('json_object mode answers a JSON object', async () => {
    const res = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'JSON please' }], response_format: { type: 'json_object' } });
    const value: unknown = JSON.parse(res.choices[0]?.message.content ?? '');
    expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
  });

  it('a reply cut by max_tokens says so (length), as a constrained model cut short would', async () => {
    const res = await openai.chat.completions.create({ model: 'sim-chat', max_tokens: 3, messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'n', schema: SCHEMAS.nested } } });
    expect(res.choices[0]?.finish_reason).toBe('length');
    expect(res.usage?.completion_tokens).toBe(3);
  });
});

describe('logprobs', () => {
  it('are filled per output token, with top_logprobs led by the chosen token', async () => {
    const res = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 3 });
    const content = res.choices[0]?.logprobs?.content ?? [];
    expect(content.length).toBe(res.usage?.completion_tokens);
    expect(content.map((c) => c.token).join('')).toBe(res.choices[0]?.message.content);
    for (const c of content) {
      expect(c.logprob).toBeLessThan(0);
      expect(c.bytes).toEqual([...Buffer.from(c.token, 'utf8')]);
      expect(c.top_logprobs).toHaveLength(3);
      expect(c.top_logprobs[0]?.token).toBe(c.token);
      const probs = c.top_logprobs.map((t) => t.logprob);
      expect([...probs].sort((a, b) => b - a)).toEqual(probs);
    }
    const plain = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }] });
    expect(plain.choices[0]?.logprobs).toBeNull();
  });

  it('are streamed on each content chunk', async () => {
    const s = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 1, stream: true });
    let tokens = 0;
    let text = '';
    for await (const chunk of s) {
      const c = chunk.choices[0];
      if (c?.delta.content) {
        text += c.delta.content;
        expect(c.logprobs?.content?.[0]?.token).toBe(c.delta.content);
        tokens += 1;
      }
    }
    expect(tokens).toBe(countTokens(text));
  });

  it('top_logprobs out of range or without logprobs is a 400, as upstream', async () => {
    await expect(openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 21 })).rejects.toMatchObject({ status: 400 });
    await expect(openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }], top_logprobs: 2 })).rejects.toMatchObject({ status: 400 });
  });
});

describe('reasoning follows the reasoning models', () => {
  it('reasoning models reason (reasoning_content, thinking blocks); others do not; the set is read live', async () => {
    const think = await openai.chat.completions.create({ model: 'sim-thinker', messages: [{ role: 'user', content: 'hi' }] });
    const message = think.choices[0]?.message as unknown as { reasoning_content?: string };
    expect(message.reasoning_content?.length ?? 0).toBeGreaterThan(0);
    expect(think.usage?.completion_tokens_details?.reasoning_tokens).toBeGreaterThan(0);
    const plain = await openai.chat.completions.create({ model: 'sim-plain', messages: [{ role: 'user', content: 'hi' }] });
    expect((plain.choices[0]?.message as unknown as { reasoning_content?: string }).reasoning_content).toBeUndefined();

    const msg = await anthropic.messages.create({ model: 'sim-thinker', max_tokens: 512, thinking: { type: 'enabled', budget_tokens: 256 }, messages: [{ role: 'user', content: 'hi' }] });
    expect(msg.content[0]?.type).toBe('thinking');

    reasoning.add('sim-plain');
    try {
      const now = await openai.chat.completions.create({ model: 'sim-plain', messages: [{ role: 'user', content: 'hi' }] });
      expect((now.choices[0]?.message as unknown as { reasoning_content?: string }).reasoning_content?.length ?? 0).toBeGreaterThan(0);
    } finally {
      reasoning.delete('sim-plain');
    }
  });
});

describe('knobs are validated and bounded', () => {
  it('an oversized sim_reply_tokens is a 400 in the endpoint format, and the simulator serves on', async () => {
    const huge = { model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }], sim_reply_tokens: 2_000_000_000 };
    const res = await fetch(`${sim.openaiBaseUrl}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(huge) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(`at most ${MAX_SIM_REPLY_TOKENS}`);
    const a = await fetch(`${sim.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...huge, max_tokens: 10 }) });
    expect(a.status).toBe(400);
    expect(((await a.json()) as { type: string }).type).toBe('error');
    const ok = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }], sim_reply_tokens: 5 } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(ok.usage?.completion_tokens).toBe(5);
  });

  it('a fault with an absurd delay is refused', async () => {
    const res = await fetch(`${sim.url}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delayMs: 1e12 }) });
    expect(res.status).toBe(400);
  });
});
