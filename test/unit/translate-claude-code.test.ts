// Claude Code (docs/wire-formats.md D.3) against an OpenAI-format reasoning upstream, end to end through the translators.
import AnthropicV0 from 'anthropic-sdk-v0';
import { createParser } from 'eventsource-parser';
import { describe, expect, it } from 'vitest';
import { createStreamTranslator, translateRequest, type SseEvent, type StreamTranslationContext } from '../../src/translate/translation.js';
import { stripGatewayThinking } from '../../src/formats/anthropic-messages/index.js';

type Obj = Record<string, unknown>;
const ctx: StreamTranslationContext = {
  upstreamModel: 'deepseek-reasoner-x', clientModel: 'claude-opus-5-5', supportsReasoning: true, defaultMaxOutputTokens: 8192,
  requestId: 'req_cc1', includeUsage: false, inputTokenEstimate: 5210,
};

// Composed after the D.3 capture: attribution block, cached system blocks, $schema tools, a deferred
// placeholder tool, a mid-conversation system message, thinking + tool_use, cache_control on a tool_result.
const claudeCodeBody = (previousSignature: string): Obj => ({
  model: 'claude-opus-5-5', max_tokens: 128000, stream: true,
  thinking: { type: 'adaptive', display: 'omitted' },
  output_config: { effort: 'medium' },
  context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
  metadata: { user_id: '{"device_id":"d-1","account_uuid":"","session_id":"s-1"}' },
  system: [
    { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.330.440; cc_entrypoint=sdk-cli;' },
    { type: 'text', text: 'You are a Claude agent, built on Anthropic\'s Claude Agent SDK.', cache_control: { type: 'ephemeral' } },
    { type: 'text', text: 'Use the tools to help the user.', cache_control: { type: 'ephemeral' } },
  ],
  tools: [
    { name: 'Bash', description: 'Executes a bash command',
      input_schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object',
        properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command'], additionalProperties: false } },
    { name: 'DeferredToolPlaceholder', description: 'Deferred tools', input_schema: { type: 'object', properties: {} }, defer_loading: true },
  ],
  messages: [
    { role: 'user', content: [{ type: 'text', text: '<system-reminder>Today is Saturday.</system-reminder>' }, { type: 'text', text: 'run echo hello' }] },
    { role: 'system', content: '# Environment\nPlatform: linux' },
    { role: 'assistant', content: [
      { type: 'thinking', thinking: 'I should run the command.', signature: previousSignature },
      { type: 'tool_use', id: 'toolu_01', name: 'Bash', input: { command: 'echo hello', description: 'say hello' } },
    ] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'hello', is_error: false, cache_control: { type: 'ephemeral' } }] },
  ],
});

// What a DeepSeek-style upstream streams back: reasoning, text, a tool call, finish, usage, [DONE].
const upstreamReply = [
  { choices: [{ index: 0, delta: { role: 'assistant', content: null, reasoning_content: '' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { reasoning_content: 'The command printed hello. ' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { reasoning_content: 'Now list files.' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { content: 'It printed `hello`. ' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { content: 'Listing files next.' }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_00_abc', type: 'function', function: { name: 'Bash', arguments: '' } }] }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"command": "ls", ' } }] }, finish_reason: null }] },
  { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"description": "list"}' } }] }, finish_reason: null }] },
  { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
  { choices: [], usage: { prompt_tokens: 5230, completion_tokens: 61, total_tokens: 5291, prompt_tokens_details: { cached_tokens: 5120 }, completion_tokens_details: { reasoning_tokens: 12 } } },
].map((c) => `data: ${JSON.stringify({ id: 'b7c1', object: 'chat.completion.chunk', created: 1763700000, model: 'deepseek-reasoner-x', ...c })}\n\n`).join('') + 'data: [DONE]\n\n';

function sseEvents(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  createParser({ onEvent: (e) => out.push({ ...(e.event ? { event: e.event } : {}), data: e.data }) }).feed(text);
  return out;
}

describe('Claude Code D.3 body translated A->O', () => {
  const out = translateRequest(claudeCodeBody('EqQBCkgIBRABGAI'), 'anthropic', 'openai', ctx);
  const messages = out.messages as Obj[];

  it('keeps only fields an OpenAI-format upstream understands', () => {
    expect(Object.keys(out).sort()).toEqual(['max_tokens', 'messages', 'model', 'reasoning_effort', 'stream', 'stream_options', 'tools', 'user']);
    expect(out).toMatchObject({
      model: 'deepseek-reasoner-x', max_tokens: 128000, stream: true, stream_options: { include_usage: true }, reasoning_effort: 'medium',
      user: '{"device_id":"d-1","account_uuid":"","session_id":"s-1"}',
    });
    expect(JSON.stringify(out)).not.toMatch(/cache_control|context_management|output_config|\$schema|defer_loading|x-anthropic-billing-header/);
  });

  it('system without the attribution block, tools without $schema and without the deferred placeholder', () => {
    expect(messages[0]).toEqual({ role: 'system', content: 'You are a Claude agent, built on Anthropic\'s Claude Agent SDK.\n\nUse the tools to help the user.' });
    expect(out.tools).toEqual([{ type: 'function', function: { name: 'Bash', description: 'Executes a bash command',
      parameters: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command'], additionalProperties: false } } }]);
  });

  it('conversation: user parts, in-place system message, assistant reasoning_content + tool call, tool message', () => {
    expect(messages.slice(1)).toEqual([
      { role: 'user', content: [{ type: 'text', text: '<system-reminder>Today is Saturday.</system-reminder>' }, { type: 'text', text: 'run echo hello' }] },
      { role: 'system', content: '# Environment\nPlatform: linux' },
      { role: 'assistant', content: null, reasoning_content: 'I should run the command.',
        tool_calls: [{ id: 'toolu_01', type: 'function', function: { name: 'Bash', arguments: '{"command":"echo hello","description":"say hello"}' } }] },
      { role: 'tool', tool_call_id: 'toolu_01', content: 'hello' },
    ]);
  });

  it('the streamed reply comes back as a stream Claude Code\'s SDK (0.60) accumulates into thinking, text and tool_use', async () => {
    const t = createStreamTranslator('openai', 'anthropic', ctx);
    let sse = '';
    for (const ev of sseEvents(upstreamReply)) sse += t.push(ev);
    sse += t.finish();

    const client = new AnthropicV0({
      apiKey: 'test-key', baseURL: 'http://127.0.0.1:9', maxRetries: 0,
      fetch: () => Promise.resolve(new Response(sse, { status: 200, headers: { 'content-type': 'text/event-stream' } })),
    });
    const stream = client.messages.stream({ model: 'claude-opus-5-5', max_tokens: 128000, messages: [{ role: 'user', content: 'run echo hello' }] });
    const startUsage: number[] = [];
    stream.on('streamEvent', (e) => { if (e.type === 'message_start') startUsage.push(e.message.usage.input_tokens); });
    const msg = await stream.finalMessage();

    expect(startUsage).toEqual([5210]); // the caller's estimate, not 0
    expect(msg.model).toBe('claude-opus-5-5');
    expect(msg.stop_reason).toBe('tool_use');
    expect(msg.content).toEqual([
      { type: 'thinking', thinking: 'The command printed hello. Now list files.', signature: expect.stringMatching(/^tollgate:/) as string },
      { type: 'text', text: 'It printed `hello`. Listing files next.' },
      { type: 'tool_use', id: 'call_00_abc', name: 'Bash', input: { command: 'ls', description: 'list' } },
    ]);
    expect(msg.usage).toMatchObject({ input_tokens: 110, output_tokens: 61, cache_read_input_tokens: 5120, cache_creation_input_tokens: 0 });
    expect(t.usage).toEqual({ input: 5230, cacheRead: 5120, cacheWrite5m: 0, cacheWrite1h: 0, output: 61, reasoning: 12 });

    // Next turn: Claude Code echoes the gateway-signed thinking block back (after an Anthropic-signed one).
    const next = claudeCodeBody('EqQBCkgIBRABGAI');
    (next.messages as Obj[]).push(
      { role: 'assistant', content: msg.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_00_abc', content: 'a.txt\nb.txt' }] },
    );
    const nextOut = translateRequest(next, 'anthropic', 'openai', ctx);
    expect((nextOut.messages as Obj[]).slice(-2)).toEqual([
      { role: 'assistant', content: 'It printed `hello`. Listing files next.', reasoning_content: 'The command printed hello. Now list files.',
        tool_calls: [{ id: 'call_00_abc', type: 'function', function: { name: 'Bash', arguments: '{"command":"ls","description":"list"}' } }] },
      { role: 'tool', tool_call_id: 'call_00_abc', content: 'a.txt\nb.txt' },
    ]);

    // The same history sent on to a real Anthropic upstream loses the gateway-signed block, keeps Anthropic's own.
    const forwarded = stripGatewayThinking(next);
    const assistants = (forwarded.messages as Obj[]).filter((m) => m.role === 'assistant').map((m) => (m.content as Obj[]).map((b) => b.type));
    expect(assistants).toEqual([['thinking', 'tool_use'], ['text', 'tool_use']]);
  });

  it('stripGatewayThinking returns the same object when there is nothing to strip', () => {
    const body = claudeCodeBody('EqQBCkgIBRABGAI');
    expect(stripGatewayThinking(body)).toBe(body);
  });
});
