// What an Anthropic-format upstream is sent of a client's own Anthropic request: only what the gateway
// can price. The reservation and the charge know tokens at the catalog's prices; a beta that adds a
// billed unit of its own (a server tool's per-use fee, long-context or fast-mode prices, files or
// containers whose content never crosses the gateway) would be served and never charged. Such betas,
// server tools and documents given by URL are refused with a 400 naming them (the catalog has no per-use
// prices to reserve them at).

import { isRecord, TranslationError, type JsonObject } from '../../representation/index.js';

/**
 * The `anthropic-beta` values passed on: each changes nothing about what a request costs beyond the
 * tokens the reservation bounds and the usage reports. Anything else (context-1m-…, fast-mode-…,
 * code-execution-…, mcp-client-…, files-api-…, skills-…, compact-…, advisor-tool-…, and any name not
 * listed) is refused. Claude Code's and the Anthropic SDKs' defaults are all here.
 */
export const COST_NEUTRAL_BETAS: ReadonlyMap<string, string> = new Map([
  // Claude Code (docs/wire-formats.md D.3) sends the first ten on every turn.
  ['claude-code-20250219', 'names the client; no billed unit'],
  ['interleaved-thinking-2025-05-14', 'thinking between tool calls: output tokens, within the max_tokens reserved'],
  ['context-management-2025-06-27', 'server-side clearing of old tool results and thinking: only removes input'],
  ['per-turn-control-2026-07-01', 'per-turn request controls carried in the body (measured); no billed unit of its own'],
  ['mid-conversation-tool-changes-2026-07-01', 'tools may change between turns: every definition is in the body (measured)'],
  ['thinking-token-count-2026-05-13', 'token estimates in thinking deltas: reporting only'],
  ['advanced-tool-use-2025-11-20', 'defer_loading and input_examples (in the body); its billed tools (tool search, code execution) are server tools, refused by type'],
  ['effort-2025-11-24', 'output_config.effort: how much of max_tokens the model spends'],
  ['token-counting-2024-11-01', 'count_tokens, answered by the gateway itself'],
  ['fine-grained-tool-streaming-2025-05-14', 'how tool input is streamed: the same tokens'],
  // Older or GA features whose cost is tokens the reservation already bounds.
  ['token-efficient-tools-2025-02-19', 'fewer output tokens for tool calls'],
  ['dev-full-thinking-2025-05-14', 'thinking shown in full: it is billed in full either way'],
  ['prompt-caching-2024-07-31', 'cache writes and reads: priced by the catalog (cacheWrite5m, cacheRead), the dearest reserved'],
  ['extended-cache-ttl-2025-04-11', 'one-hour cache writes: priced by the catalog (cacheWrite1h), the dearest reserved'],
  ['pdfs-2024-09-25', 'PDF documents: reserved by their pages (page images) and bytes (text)'],
  ['output-128k-2025-02-19', 'a larger max_tokens: the reservation covers the max_tokens sent'],
  ['output-300k-2026-03-24', 'a larger max_tokens: the reservation covers the max_tokens sent'],
  ['model-context-window-exceeded-2025-08-26', 'a stop reason instead of an error at the window: output within max_tokens'],
  ['structured-outputs-2025-11-13', 'a response schema, in the body (measured); no billed unit of its own'],
  // Computer use runs on the client; its system prompt and tool definition are reserved (TOOL_PROMPT_TOKENS).
  ['computer-use-2024-10-22', 'a client-run tool: tokens, its added prompt reserved'],
  ['computer-use-2025-01-24', 'a client-run tool: tokens, its added prompt reserved'],
  ['computer-use-2025-11-24', 'a client-run tool: tokens, its added prompt reserved'],
]);

/**
 * Tool types the client runs itself (billed as the tokens of their calls and results, like any tool):
 * Anthropic's bash, text editor, computer use and memory tools. Any other typed tool is a server tool,
 * run (and billed per use, or by the content it brings into the prompt) by the upstream.
 */
const CLIENT_TOOL_TYPE = /^(?:custom|(?:bash|text_editor|computer|memory)_\d+)$/;

/** The betas of an `anthropic-beta` header the gateway cannot price. */
export function unpricedBetas(header: string | undefined): string[] {
  if (header === undefined) return [];
  return header
    .split(',')
    .map((b) => b.trim())
    .filter((b) => b !== '' && !COST_NEUTRAL_BETAS.has(b));
}

/** Server tools among a request's tools: [position, type]. */
export function serverTools(tools: unknown): Array<[number, string]> {
  if (!Array.isArray(tools)) return [];
  const found: Array<[number, string]> = [];
  tools.forEach((t: unknown, i) => {
    if (isRecord(t) && typeof t.type === 'string' && !CLIENT_TOOL_TYPE.test(t.type)) found.push([i, t.type]);
  });
  return found;
}

/** Documents whose content is not in the body (a PDF by URL, a Files API id): their text cannot be bounded. */
export function documentsOutsideBody(messages: unknown): string[] {
  const found: string[] = [];
  const visit = (content: unknown, at: string): void => {
    if (!Array.isArray(content)) return;
    content.forEach((block: unknown, j) => {
      if (!isRecord(block)) return;
      const source = block.source;
      if (block.type === 'document' && isRecord(source) && (source.type === 'url' || source.type === 'file')) found.push(`${at}.${j}`);
      if (block.type === 'tool_result') visit(block.content, `${at}.${j}.content`);
    });
  };
  if (Array.isArray(messages)) messages.forEach((m: unknown, i) => isRecord(m) && visit(m.content, `messages.${i}.content`));
  return found;
}

/** Refuses (a 400 naming them) the betas, server tools and outside documents of a request the gateway could not charge for. */
export function refuseUnpriced(body: JsonObject, betaHeader: string | undefined): void {
  const betas = unpricedBetas(betaHeader);
  if (betas.length > 0) {
    throw new TranslationError(
      400,
      `anthropic-beta: ${betas.join(', ')} cannot be served through this gateway: it adds cost the gateway cannot price. Send only betas that change nothing about the cost (${[...COST_NEUTRAL_BETAS.keys()].join(', ')}).`,
      'anthropic-beta',
    );
  }
  const tools = serverTools(body.tools);
  if (tools.length > 0) {
    const [first] = tools as [[number, string]];
    throw new TranslationError(
      400,
      `tools: ${tools.map(([i, type]) => `tools.${i} (${type})`).join(', ')} ${tools.length === 1 ? 'is a server tool' : 'are server tools'}, billed by the upstream per use, which this gateway cannot charge for; use tools the client runs (custom tools, bash, text editor, computer use, memory).`,
      `tools.${first[0]}.type`,
    );
  }
  const outside = documentsOutsideBody(body.messages);
  if (outside.length > 0) {
    throw new TranslationError(
      400,
      `${outside.join(', ')}: a document by URL or file id is read by the upstream, not sent through the gateway, so its cost cannot be bounded; send the PDF as base64 data.`,
      outside[0] ?? null,
    );
  }
}
