// A Claude Code request (docs/wire-formats.md D.3) replayed byte-for-byte-alike through the gateway to an
// OpenAI-format and an Anthropic-format upstream: the streamed answer must be what Claude Code parses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamFormatName } from '../../src/formats/index.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { expectChargesMatchSimulator, mark, readSse, type SseEvent } from './e2e-support.js';

const MODEL = 'glm-5.3-flash-xploded'; // reasons, tools, vision
const BETAS =
  'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24';

const TOOLS = [
  {
    name: 'Bash',
    description: 'Executes a bash command in a persistent shell session.',
    input_schema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { command: { type: 'string', description: 'The command to execute' }, description: { type: 'string' } },
      required: ['command'],
      additionalProperties: false,
    },
  },
  { name: 'DeferredToolPlaceholder', description: 'Loaded on demand.', input_schema: { type: 'object', properties: {} }, defer_loading: true },
];

const SYSTEM = [
  { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.330.440; cc_entrypoint=sdk-cli;' },
  { type: 'text', text: 'You are a Claude agent, built on the Claude Agent SDK.', cache_control: { type: 'ephemeral' } },
  { type: 'text', text: 'Use the tools available to you to assist the user. Keep answers short.', cache_control: { type: 'ephemeral' } },
];

function claudeCodeHeaders(key: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json',
    'anthropic-version': '2023-06-01',
    'anthropic-beta': BETAS,
    authorization: `Bearer ${key}`,
    'anthropic-dangerous-direct-browser-access': 'true',
    'user-agent': 'claude-cli/2.1.330 (external, sdk-cli)',
    'x-app': 'cli',
    'x-claude-code-session-id': '3f1c9a52-6f0e-4d7e-9a43-1f2b3c4d5e6f',
    'x-stainless-retry-count': '0',
    'x-stainless-timeout': '600',
  };
}

function commonBody(): Record<string, unknown> {
  return {
    model: MODEL,
    max_tokens: 128000,
    stream: true,
    thinking: { type: 'adaptive', display: 'omitted' },
    output_config: { effort: 'medium' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    metadata: { user_id: JSON.stringify({ device_id: 'd3v1c3', account_uuid: '', session_id: '3f1c9a52' }) },
    system: SYSTEM,
    tools: TOOLS,
  };
}

const FIRST_USER = {
  role: 'user',
  content: [
    { type: 'text', text: '<system-reminder>Today is a Saturday.</system-reminder>' },
    { type: 'text', text: 'run echo hello' },
  ],
};
const ENV_MESSAGE = { role: 'system', content: '# Environment\nWorking directory: /work\nPlatform: linux' };

interface Rebuilt {
  blocks: Record<string, unknown>[];
  stopReason: unknown;
  inputTokens: number;
  outputTokens: number;
}

/** Checks the B.4 event grammar strictly and rebuilds the message the way the SDK accumulates it. */
function checkSequence(events: SseEvent[]): Rebuilt {
  const named = events.filter((e) => e.event !== 'ping');
  for (const e of events) expect(e.event, `every event has its event: line (${e.data})`).toBeDefined();
  const data = named.map((e) => JSON.parse(e.data) as Record<string, unknown> & { type: string });
  named.forEach((e, i) => expect(data[i]!.type).toBe(e.event));
  expect(data[0]!.type).toBe('message_start');
  expect(data.filter((d) => d.type === 'message_start')).toHaveLength(1);
  const start = data[0]!.message as { content: unknown[]; model: string; usage: { input_tokens: number; output_tokens: number }; stop_reason: unknown };
  expect(start.content).toEqual([]);
  expect(start.model).toBe(MODEL);
  expect(start.stop_reason).toBeNull();
  expect(start.usage.input_tokens).toBeGreaterThan(0);
  expect(data[data.length - 1]!.type).toBe('message_stop');
  const deltaAt = data.findIndex((d) => d.type === 'message_delta');
  expect(deltaAt).toBe(data.length - 2);
  const final = data[deltaAt] as unknown as { delta: { stop_reason: unknown }; usage: { output_tokens: number; input_tokens?: number } };

  const blocks: Record<string, unknown>[] = [];
  const partial: string[] = [];
  let open = -1;
  for (const d of data.slice(1, deltaAt)) {
    const index = d.index as number;
    if (d.type === 'content_block_start') {
      expect(open).toBe(-1); // never interleaved
      expect(index).toBe(blocks.length); // 0, 1, 2 ... in start order
      blocks.push({ ...(d.content_block as Record<string, unknown>) });
      partial.push('');
      open = index;
    } else if (d.type === 'content_block_delta') {
      expect(index).toBe(open);
      const delta = d.delta as Record<string, string | undefined>;
      const block = blocks[index]!;
      if (delta.type === 'text_delta') block.text = (block.text as string) + delta.text;
      else if (delta.type === 'thinking_delta') block.thinking = (block.thinking as string) + delta.thinking;
      else if (delta.type === 'signature_delta') block.signature = delta.signature;
      else if (delta.type === 'input_json_delta') partial[index] = (partial[index] ?? '') + (delta.partial_json ?? '');
      else throw new Error(`unexpected delta ${delta.type}`);
    } else if (d.type === 'content_block_stop') {
      expect(index).toBe(open);
      const block = blocks[index]!;
      if (block.type === 'tool_use') block.input = JSON.parse(partial[index]!) as unknown; // must be valid JSON
      open = -1;
    } else {
      throw new Error(`unexpected event ${d.type} between message_start and message_delta`);
    }
  }
  expect(open).toBe(-1);
  expect(blocks.length).toBeGreaterThan(0);
  return { blocks, stopReason: final.delta.stop_reason, inputTokens: final.usage.input_tokens ?? start.usage.input_tokens, outputTokens: final.usage.output_tokens };
}

describe.each<UpstreamFormatName>(['openai', 'anthropic'])('Claude Code replay (D.3), %s-format upstream', (upstreamFormat) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ upstreamFormat, ledger: upstreamFormat === 'anthropic' ? 'redis' : 'memory' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function send(messages: unknown[]): Promise<Response> {
    return fetch(`${h.baseUrl}/v1/messages?beta=true`, {
      method: 'POST',
      headers: claudeCodeHeaders(h.key),
      body: JSON.stringify({ ...commonBody(), messages }),
    });
  }

  it('streams a correct answer for the first turn and the tool-result turn, charged exactly', async () => {
    const m0 = await mark(h);
    // Turn 1: the model thinks and calls Bash. (The system message leads here: the OpenAI-format
    // simulator only calls tools when the last message is a user turn, see the report.)
    const res1 = await send([ENV_MESSAGE, FIRST_USER]);
    expect(res1.status).toBe(200);
    expect(res1.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res1.headers.get('request-id')).toBeTruthy();
    const turn1 = checkSequence(await readSse(res1));
    expect(turn1.stopReason).toBe('tool_use');
    expect(turn1.blocks.map((b) => b.type)).toEqual(['thinking', 'tool_use']);
    const [thinking, toolUse] = turn1.blocks as [Record<string, string>, Record<string, unknown>];
    expect(thinking.signature!.length).toBeGreaterThan(0);
    expect(toolUse.name).toBe('Bash');
    expect(toolUse.input).toEqual(expect.objectContaining({ command: expect.any(String) as unknown }));

    // What the upstream received: no $schema for OpenAI upstreams, betas forwarded to Anthropic ones.
    const up1 = h.simulator.requests[h.simulator.requests.length - 1]!;
    if (upstreamFormat === 'anthropic') {
      expect(up1.headers['anthropic-beta']).toBe(BETAS);
      expect(up1.headers['anthropic-version']).toBe('2023-06-01');
    } else {
      expect(JSON.stringify(up1.body)).not.toContain('$schema');
      expect(JSON.stringify(up1.body)).not.toContain('x-anthropic-billing-header');
    }

    // Turn 2: Claude Code echoes thinking + tool_use and sends the tool result (with cache_control).
    const res2 = await send([
      FIRST_USER,
      ENV_MESSAGE,
      { role: 'assistant', content: turn1.blocks },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUse.id, content: 'hello', is_error: false, cache_control: { type: 'ephemeral' } }] },
    ]);
    expect(res2.status).toBe(200);
    const turn2 = checkSequence(await readSse(res2));
    expect(turn2.stopReason).toBe('end_turn');
    expect(turn2.blocks.some((b) => b.type === 'text' && typeof b.text === 'string' && b.text.includes('Tool result received'))).toBe(true);

    const records = await expectChargesMatchSimulator(h, m0, 2);
    expect(turn1.inputTokens).toBe(records[0]!.usage.input);
    expect(turn1.outputTokens).toBe(records[0]!.usage.output);
    expect(turn2.inputTokens).toBe(records[1]!.usage.input);
    expect(turn2.outputTokens).toBe(records[1]!.usage.output);
  });

  it('count_tokens?beta=true answers for the same body without an upstream call', async () => {
    const m0 = await mark(h);
    const body = commonBody();
    delete body.max_tokens;
    delete body.stream;
    const res = await fetch(`${h.baseUrl}/v1/messages/count_tokens?beta=true`, {
      method: 'POST',
      headers: claudeCodeHeaders(h.key),
      body: JSON.stringify({ ...body, messages: [FIRST_USER, ENV_MESSAGE] }),
    });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { input_tokens: number };
    expect(json.input_tokens).toBeGreaterThan(50);
    expect(h.simulator.requests.length).toBe(m0.simIndex);
  });
});
