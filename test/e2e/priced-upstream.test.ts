// Only what can be priced goes upstream (issue 37, item 6), through a real gateway to an Anthropic-format
// upstream (the simulator): a beta that adds cost the catalog cannot price (context-1m, fast mode, code
// execution, …) and server tools billed per use (web search, web fetch, code execution) are refused with
// a 400 in the caller's format naming them, before anything is reserved or sent; Claude Code's and the
// SDKs' betas and the tools a client runs itself go through unchanged. The context window bounds the
// hold (the upstream refuses a longer prompt) because the beta that would lift it is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { objectStreamPdf } from '../helpers/pdf-fixtures.js';

const MODEL = 'outlaw-1-xploded';
/** The model with a small context window, to show the window refusal with a small prompt. */
const SMALL = 'outlaw-1-xploded-small';
const SMALL_WINDOW = 4_000;
// What Claude Code 2.1.330 sends on every turn (docs/wire-formats.md D.3), and the SDK examples' betas.
const CLAUDE_CODE_BETAS =
  'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24';
const SDK_BETAS = 'token-counting-2024-11-01, fine-grained-tool-streaming-2025-05-14,prompt-caching-2024-07-31';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    upstreamFormat: 'anthropic',
    models: (models) => [...models, { ...models.find((m) => m.id === MODEL)!, id: SMALL, aliases: [], context: { tokens: SMALL_WINDOW, display: '4K' } }],
  });
});
afterAll(async () => {
  await h?.close();
});

interface Reply {
  status: number;
  json: { type?: string; error?: { type?: string; message?: string; code?: string; param?: string } };
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const auth = path === '/v1/messages' ? { 'x-api-key': h.key, 'anthropic-version': '2023-06-01' } : { authorization: `Bearer ${h.key}` };
  const res = await fetch(`${h.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth, ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Reply['json'] };
}

const message = (extra: Record<string, unknown> = {}) => ({ model: MODEL, max_tokens: 32, messages: [{ role: 'user', content: 'hi' }], ...extra });

/** Runs `send` and checks it reached no upstream and moved no money. */
async function refusedBeforeUpstream(send: () => Promise<Reply>): Promise<Reply> {
  await h.settled();
  const calls = h.simulator.requests.length;
  const before = (await h.backend.ledger.balance(h.accountId)).balance;
  const reply = await send();
  await h.settled();
  expect(h.simulator.requests.length).toBe(calls);
  expect((await h.backend.ledger.balance(h.accountId)).balance).toBe(before);
  return reply;
}

describe('anthropic-beta', () => {
  it.each(['context-1m-2025-08-07', 'fast-mode-2026-02-01', 'code-execution-2025-05-22', 'files-api-2025-04-14', 'some-future-beta-2027-01-01'])(
    '%s (cost the gateway cannot price) is refused: 400 invalid_request_error naming it, nothing sent or charged',
    async (beta) => {
      const r = await refusedBeforeUpstream(() => post('/v1/messages', message(), { 'anthropic-beta': `interleaved-thinking-2025-05-14,${beta}` }));
      expect(r.status).toBe(400);
      expect(r.json.type).toBe('error');
      expect(r.json.error?.type).toBe('invalid_request_error');
      expect(r.json.error?.message).toContain(beta);
      expect(r.json.error?.message).not.toContain('interleaved-thinking-2025-05-14 cannot');
    },
  );

  it("Claude Code's and the SDKs' betas reach the upstream unchanged", async () => {
    for (const betas of [CLAUDE_CODE_BETAS, SDK_BETAS, 'computer-use-2025-01-24']) {
      const r = await post('/v1/messages', message(), { 'anthropic-beta': betas });
      expect(r.status).toBe(200);
      expect(h.simulator.requests[h.simulator.requests.length - 1]!.headers['anthropic-beta']).toBe(betas);
    }
  });
});

describe('server tools', () => {
  it.each([
    { type: 'web_search_20250305', name: 'web_search', max_uses: 5 },
    { type: 'web_fetch_20250910', name: 'web_fetch' },
    { type: 'code_execution_20250825', name: 'code_execution' },
    { type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' },
  ])('$type (billed by the upstream per use) is refused: 400 naming it, nothing sent or charged', async (tool) => {
    const tools = [{ name: 'get_weather', input_schema: { type: 'object', properties: {} } }, tool];
    const r = await refusedBeforeUpstream(() => post('/v1/messages', message({ tools })));
    expect(r.status).toBe(400);
    expect(r.json.error?.type).toBe('invalid_request_error');
    expect(r.json.error?.message).toContain(`tools.1 (${tool.type})`);
  });

  it('tools the client runs (custom, bash, text editor, computer use) go through', async () => {
    const tools = [
      { name: 'get_weather', input_schema: { type: 'object', properties: {} } },
      { type: 'bash_20250124', name: 'bash' },
      { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
      { type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 },
    ];
    const r = await post('/v1/messages', message({ tools }), { 'anthropic-beta': 'computer-use-2025-01-24' });
    expect(r.status).toBe(200);
    expect((h.simulator.requests[h.simulator.requests.length - 1]!.body as { tools: unknown[] }).tools).toHaveLength(4);
  });
});

describe('documents outside the body', () => {
  it('a PDF by URL (its text never crosses the gateway) is refused: 400 naming where it is, nothing sent or charged', async () => {
    const content = [{ type: 'text', text: 'summarise' }, { type: 'document', source: { type: 'url', url: 'https://example.com/report.pdf' } }];
    const r = await refusedBeforeUpstream(() => post('/v1/messages', message({ messages: [{ role: 'user', content }] })));
    expect(r.status).toBe(400);
    expect(r.json.error?.message).toContain('messages.0.content.1');
  });
});

describe('the context window', () => {
  it('a prompt within it is served; the beta that would lift it (context-1m) is refused before anything is sent', async () => {
    const r = await post('/v1/messages', { ...message(), model: SMALL, messages: [{ role: 'user', content: 'x'.repeat(SMALL_WINDOW / 2) }] });
    expect(r.status).toBe(200);
    const lifted = await refusedBeforeUpstream(() =>
      post('/v1/messages', { ...message(), model: SMALL, messages: [{ role: 'user', content: 'hi' }] }, { 'anthropic-beta': 'context-1m-2025-08-07' }),
    );
    expect(lifted.status).toBe(400);
    expect(lifted.json.error?.message).toContain('context-1m-2025-08-07');
  });
});

describe('a PDF to a Gemini upstream', () => {
  let g: Harness;
  beforeAll(async () => {
    // $0.30 per million input tokens: 200 pages at 560 tokens are 33,600 µUSD, the PDF's ~2 KB of bytes ~600.
    g = await startHarness({ upstreamFormat: 'gemini', balanceMicros: 20_000 });
  });
  afterAll(async () => {
    await g?.close();
  });

  it('is reserved by its pages, not its bytes: 200 blank pages in 2 KB do not fit a 20,000 µUSD balance (402, nothing sent)', async () => {
    const pdf = objectStreamPdf(200).toString('base64');
    const res = await fetch(`${g.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': g.key },
      body: JSON.stringify({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf } }, { type: 'text', text: 'summarise' }] }] }),
    });
    const json = (await res.json()) as Reply['json'];
    expect(res.status).toBe(402);
    expect(json.error?.message).toMatch(/worst case is 0\.03\d+ USD/);
    expect(g.simulator.requests).toHaveLength(0);
  });
});
