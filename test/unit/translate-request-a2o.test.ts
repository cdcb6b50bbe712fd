// Anthropic-format client -> OpenAI-format upstream request translation (docs/wire-formats.md C.1–C.4, C.7, C.8).
import { describe, expect, it } from 'vitest';
import { translateRequest, TranslationError, type TranslationContext } from '../../src/translate/translation.js';

const ctx: TranslationContext = {
  upstreamModel: 'deepseek-x', clientModel: 'claude-opus-5-5', supportsReasoning: true, defaultMaxOutputTokens: 8192, requestId: 'req_a2o',
};
type Msg = Record<string, unknown>;
const a2o = (body: Record<string, unknown>, c: TranslationContext = ctx) =>
  translateRequest({ model: 'claude-opus-5-5', max_tokens: 1024, ...body }, 'anthropic', 'openai', c);
const msgs = (out: Record<string, unknown>) => out.messages as Msg[];

describe('A->O request: roles and system (C.1)', () => {
  it('sets the upstream model name', () => {
    expect(a2o({ messages: [{ role: 'user', content: 'hi' }] }).model).toBe('deepseek-x');
  });

  it('system as a string becomes the leading system message', () => {
    const out = a2o({ system: 'Be terse.', messages: [{ role: 'user', content: 'hi' }] });
    expect(msgs(out)).toEqual([{ role: 'system', content: 'Be terse.' }, { role: 'user', content: 'hi' }]);
  });

  it('system as text blocks is joined with blank lines and loses cache_control', () => {
    const out = a2o({
      system: [{ type: 'text', text: 'A' }, { type: 'text', text: 'B', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msgs(out)[0]).toEqual({ role: 'system', content: 'A\n\nB' });
    expect(JSON.stringify(out)).not.toContain('cache_control');
  });

  it('role:"system" message inside messages stays at the same position (string and block content)', () => {
    const out = a2o({
      messages: [
        { role: 'user', content: 'one' },
        { role: 'system', content: '# Environment' },
        { role: 'assistant', content: 'ok' },
        { role: 'system', content: [{ type: 'text', text: 'reminder' }] },
        { role: 'user', content: 'two' },
      ],
    });
    expect(msgs(out).map((m) => [m.role, m.content])).toEqual([
      ['user', 'one'], ['system', '# Environment'], ['assistant', 'ok'], ['system', 'reminder'], ['user', 'two'],
    ]);
  });

  it('attribution x-anthropic-billing-header system block is stripped', () => {
    const out = a2o({
      system: [{ type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.330.440; cc_entrypoint=sdk-cli;' }, { type: 'text', text: 'You are an agent.' }],
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msgs(out)[0]).toEqual({ role: 'system', content: 'You are an agent.' });
  });

  it('drops cache_control, context_management, output_config and metadata fields for OpenAI upstreams', () => {
    const out = a2o({
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral', scope: 'global' } }] }],
      context_management: { edits: [] },
      output_config: { effort: 'high' },
      metadata: { user_id: 'u1' },
      cache_control: { type: 'ephemeral' },
    });
    expect(Object.keys(out).sort()).toEqual(['max_tokens', 'messages', 'model', 'reasoning_effort', 'user']);
    expect(JSON.stringify(out)).not.toMatch(/cache_control|context_management|output_config|metadata/);
  });

  it('rejects a body without messages with a 400 TranslationError', () => {
    expect(() => translateRequest({ model: 'm', max_tokens: 1 }, 'anthropic', 'openai', ctx)).toThrow(TranslationError);
    expect(() => translateRequest({ model: 'm' }, 'anthropic', 'openai', ctx)).toThrow(expect.objectContaining({ status: 400, param: 'messages' }) as Error);
  });
});

describe('A->O request: content parts (C.2)', () => {
  it('a single text block is sent as a plain string, several as text parts', () => {
    const out = a2o({ messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }] });
    expect(msgs(out)[0]!.content).toEqual([{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }]);
  });

  it('image base64 becomes a data URL, image url stays a URL', () => {
    const out = a2o({
      messages: [{ role: 'user', content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KG' } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      ] }],
    });
    expect(msgs(out)[0]!.content).toEqual([
      { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KG' } },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
    ]);
  });

  it('PDF document base64 becomes an OpenAI file part named after its title (or doc.pdf)', () => {
    const out = a2o({
      messages: [{ role: 'user', content: [
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0' }, title: 'spec.pdf' },
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi1' } },
      ] }],
    });
    expect(msgs(out)[0]!.content).toEqual([
      { type: 'file', file: { filename: 'spec.pdf', file_data: 'data:application/pdf;base64,JVBERi0' } },
      { type: 'file', file: { filename: 'doc.pdf', file_data: 'data:application/pdf;base64,JVBERi1' } },
    ]);
  });

  it('text document becomes a text part prefixed with its title', () => {
    const out = a2o({
      messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'body' }, title: 'notes' }] }],
    });
    expect(msgs(out)[0]!.content).toBe('notes\n\nbody');
  });

  it('a URL document cannot be sent to an OpenAI upstream: 400 naming the block', () => {
    expect(() => a2o({ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://x/a.pdf' } }] }] }))
      .toThrow(expect.objectContaining({ status: 400, param: 'messages.0.content.0' }) as Error);
  });

  it('server-tool blocks (server_tool_use, web_search_tool_result) are dropped', () => {
    const out = a2o({
      messages: [
        { role: 'user', content: 'search' },
        { role: 'assistant', content: [
          { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'q' } },
          { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
          { type: 'text', text: 'found' },
        ] },
      ],
    });
    expect(msgs(out)[1]).toEqual({ role: 'assistant', content: 'found' });
  });
});

describe('A->O request: tools and tool_choice (C.3)', () => {
  const tool = {
    name: 'Bash', description: 'Run', strict: true,
    input_schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { command: { type: 'string' } } },
    cache_control: { type: 'ephemeral' }, input_examples: [{ command: 'ls' }], eager_input_streaming: true, allowed_callers: ['direct'],
  };

  it('tool definitions: $schema, cache_control, input_examples, eager_input_streaming stripped; strict kept', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], tools: [tool] });
    expect(out.tools).toEqual([{
      type: 'function',
      function: { name: 'Bash', description: 'Run', parameters: { type: 'object', properties: { command: { type: 'string' } } }, strict: true },
    }]);
  });

  it('defer_loading placeholder tools and versioned server tools are dropped', () => {
    const out = a2o({
      messages: [{ role: 'user', content: 'x' }],
      tools: [
        tool,
        { name: 'DeferredToolPlaceholder', input_schema: { type: 'object', properties: {} }, defer_loading: true },
        { type: 'web_search_20250305', name: 'web_search', max_uses: 3 },
        { type: 'bash_20250124', name: 'bash' },
      ],
    });
    expect((out.tools as Msg[]).map((t) => (t.function as Msg).name)).toEqual(['Bash']);
  });

  it.each([
    [{ type: 'auto' }, 'auto'],
    [{ type: 'any' }, 'required'],
    [{ type: 'none' }, 'none'],
    [{ type: 'tool', name: 'Bash' }, { type: 'function', function: { name: 'Bash' } }],
  ])('tool_choice %j maps to %j', (choice, expected) => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], tools: [tool], tool_choice: choice });
    expect(out.tool_choice).toEqual(expected);
    expect(out.parallel_tool_calls).toBeUndefined();
  });

  it('tool_choice is not sent when no translatable tool is left (only server tools were given)', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'web_search_20250305', name: 'web_search' }], tool_choice: { type: 'any' } });
    expect(out.tools).toBeUndefined();
    expect(out.tool_choice).toBeUndefined();
  });

  it('disable_parallel_tool_use:true becomes parallel_tool_calls:false', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], tools: [tool], tool_choice: { type: 'auto', disable_parallel_tool_use: true } });
    expect(out.parallel_tool_calls).toBe(false);
  });
});

describe('A->O request: tool calls and results (C.4)', () => {
  const history = [
    { role: 'user', content: 'list and read' },
    { role: 'assistant', content: [
      { type: 'text', text: 'Running.' },
      { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } },
      { type: 'tool_use', id: 'toolu_2', name: 'Read', input: { file_path: '/a' } },
    ] },
  ];

  it('tool_use blocks become tool_calls with ids unchanged and arguments as a JSON string', () => {
    const out = a2o({ messages: history });
    expect(msgs(out)[1]).toEqual({
      role: 'assistant', content: 'Running.',
      tool_calls: [
        { id: 'toolu_1', type: 'function', function: { name: 'Bash', arguments: '{"command":"ls"}' } },
        { id: 'toolu_2', type: 'function', function: { name: 'Read', arguments: '{"file_path":"/a"}' } },
      ],
    });
  });

  it('assistant with only tool calls has content null', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_9', name: 'T', input: {} }] }] });
    expect(msgs(out)[1]!.content).toBeNull();
    expect((msgs(out)[1]!.tool_calls as Msg[])[0]!.function).toEqual({ name: 'T', arguments: '{}' });
  });

  it('several results per turn: tool messages first (order kept), then the user text; is_error gets an "Error: " prefix; arrays joined with \\n', () => {
    const out = a2o({
      messages: [...history, { role: 'user', content: [
        { type: 'text', text: 'continue' },
        { type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.txt' },
        { type: 'tool_result', tool_use_id: 'toolu_2', is_error: true, content: [{ type: 'text', text: 'ENOENT' }, { type: 'text', text: 'no such file' }] },
      ] }],
    });
    expect(msgs(out).slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'toolu_1', content: 'a.txt' },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'Error: ENOENT\nno such file' },
      { role: 'user', content: 'continue' },
    ]);
  });

  it('empty tool_result content is sent as ""', () => {
    const out = a2o({ messages: [...history, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1' }, { type: 'tool_result', tool_use_id: 'toolu_2', content: [] }] }] });
    expect(msgs(out).slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'toolu_1', content: '' },
      { role: 'tool', tool_call_id: 'toolu_2', content: '' },
    ]);
  });

  it('images in tool results are moved to a user message right after the tool messages', () => {
    const out = a2o({
      messages: [...history, { role: 'user', content: [
        { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'screenshot:' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAA' } }] },
        { type: 'tool_result', tool_use_id: 'toolu_2', content: 'ok' },
        { type: 'text', text: 'what do you see?' },
      ] }],
    });
    expect(msgs(out).slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'toolu_1', content: 'screenshot:' },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'ok' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAA' } }, { type: 'text', text: 'what do you see?' }] },
    ]);
  });
});

describe('A->O request: limits and sampling (C.7)', () => {
  it('max_tokens is kept as the client sent it (the gateway clamps separately)', () => {
    expect(a2o({ max_tokens: 128000, messages: [{ role: 'user', content: 'x' }] }).max_tokens).toBe(128000);
  });

  it('stop_sequences -> stop, at most 4', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], stop_sequences: ['a', 'b', 'c', 'd', 'e'] });
    expect(out.stop).toEqual(['a', 'b', 'c', 'd']);
  });

  it('metadata.user_id -> user; temperature and top_p pass; top_k is dropped', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], metadata: { user_id: 'u-1' }, temperature: 0.3, top_p: 0.9, top_k: 5 });
    expect(out).toMatchObject({ user: 'u-1', temperature: 0.3, top_p: 0.9 });
    expect(out.top_k).toBeUndefined();
  });

  it('output_config.format json_schema -> response_format json_schema', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], output_config: { format: { type: 'json_schema', schema } } });
    expect(out.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'output', schema } });
  });

  it('streaming requests ask the OpenAI upstream for include_usage', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], stream: true });
    expect(out).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });
});

describe('A->O request: reasoning (C.8)', () => {
  it.each([[1024, 'low'], [4095, 'low'], [4096, 'medium'], [16383, 'medium'], [16384, 'high'], [60000, 'high']])(
    'thinking.budget_tokens %i -> reasoning_effort %s', (budget, effort) => {
      const out = a2o({ max_tokens: 64000, messages: [{ role: 'user', content: 'x' }], thinking: { type: 'enabled', budget_tokens: budget } });
      expect(out.reasoning_effort).toBe(effort);
    });

  it('adaptive thinking + output_config.effort -> reasoning_effort with the same word', () => {
    const out = a2o({ messages: [{ role: 'user', content: 'x' }], thinking: { type: 'adaptive', display: 'omitted' }, output_config: { effort: 'xhigh' } });
    expect(out.reasoning_effort).toBe('xhigh');
  });

  it('thinking disabled -> no reasoning_effort', () => {
    expect(a2o({ messages: [{ role: 'user', content: 'x' }], thinking: { type: 'disabled' } }).reasoning_effort).toBeUndefined();
  });

  it('models without reasoning support get no reasoning_effort and no reasoning_content', () => {
    const out = a2o({
      messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }, { type: 'text', text: 'ok' }] }],
      thinking: { type: 'enabled', budget_tokens: 2048 },
    }, { ...ctx, supportsReasoning: false });
    expect(out.reasoning_effort).toBeUndefined();
    expect(msgs(out)[1]).toEqual({ role: 'assistant', content: 'ok' });
  });

  it('thinking blocks from history are converted back to reasoning_content; redacted thinking is dropped', () => {
    const out = a2o({
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: [
          { type: 'thinking', thinking: 'Need the weather.', signature: 'tollgate:cmVxXzE' },
          { type: 'redacted_thinking', data: 'opaque' },
          { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Oslo' } },
        ] },
      ],
    });
    expect(msgs(out)[1]).toEqual({
      role: 'assistant', content: null, reasoning_content: 'Need the weather.',
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
    });
  });
});
