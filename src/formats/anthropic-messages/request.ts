/** Anthropic Messages request body <-> internal request (docs/wire-formats.md B.2, C.1–C.8). */
import {
  arr,
  isRecord,
  num,
  str,
  TranslationError,
  type ContentPart,
  type ImagePart,
  type InternalMessage,
  type InternalRequest,
  type JsonObject,
  type ReasoningEffort,
  type ReasoningRequest,
  type TextPart,
  type ToolChoice,
  type ToolDefinition,
} from '../../representation/index.js';
import { isAnthropicSignature } from './thinking-signature.js';

const EFFORTS = new Set(['low', 'medium', 'high', 'xhigh', 'max']);

// ---------------------------------------------------------------- decode (Anthropic client -> internal)

export function decodeAnthropicRequest(body: unknown): InternalRequest {
  if (!isRecord(body)) throw new TranslationError(400, 'Request body must be a JSON object.');
  const model = str(body.model);
  if (!model) throw new TranslationError(400, 'model: field required', 'model');
  if (!Array.isArray(body.messages)) throw new TranslationError(400, 'messages: field required', 'messages');

  const req: InternalRequest = {
    model,
    system: decodeSystem(body.system),
    messages: body.messages.map((m, i) => decodeMessage(m, i)),
    tools: decodeTools(body.tools),
    stop: arr(body.stop_sequences).filter((s): s is string => typeof s === 'string'),
    stream: body.stream === true,
  };
  const maxTokens = num(body.max_tokens);
  if (maxTokens !== undefined) req.maxOutputTokens = maxTokens;
  const temperature = num(body.temperature);
  if (temperature !== undefined) req.temperature = temperature;
  const topP = num(body.top_p);
  if (topP !== undefined) req.topP = topP;
  decodeToolChoice(body.tool_choice, req);
  const reasoning = decodeThinking(body.thinking, body.output_config);
  if (reasoning) req.reasoning = reasoning;
  const format = isRecord(body.output_config) ? body.output_config.format : undefined;
  if (isRecord(format) && format.type === 'json_schema' && isRecord(format.schema)) {
    req.responseFormat = { type: 'json_schema', schema: format.schema };
  }
  const user = isRecord(body.metadata) ? str(body.metadata.user_id) : undefined;
  if (user) req.user = user;
  return req;
}

function decodeSystem(system: unknown): string[] {
  if (typeof system === 'string') return system === '' ? [] : [system];
  return arr(system).flatMap((b) => (isRecord(b) && typeof b.text === 'string' ? [b.text] : []));
}

function decodeMessage(m: unknown, i: number): InternalMessage {
  if (!isRecord(m)) throw new TranslationError(400, `messages.${i}: must be an object`, `messages.${i}`);
  const role = m.role;
  if (role !== 'user' && role !== 'assistant' && role !== 'system') {
    throw new TranslationError(400, `messages.${i}.role: must be "user", "assistant" or "system"`, `messages.${i}.role`);
  }
  if (typeof m.content === 'string') return { role, content: [{ type: 'text', text: m.content }] };
  const content: ContentPart[] = [];
  arr(m.content).forEach((b, j) => content.push(...decodeBlock(b, `messages.${i}.content.${j}`)));
  return { role, content };
}

function decodeImage(source: unknown, param: string): ImagePart {
  if (isRecord(source) && source.type === 'base64' && typeof source.data === 'string') {
    return { type: 'image', source: { kind: 'base64', mediaType: str(source.media_type) ?? 'image/png', data: source.data } };
  }
  if (isRecord(source) && source.type === 'url' && typeof source.url === 'string') {
    return { type: 'image', source: { kind: 'url', url: source.url } };
  }
  throw new TranslationError(400, `${param}: this image source cannot be sent to the selected model (use base64 or url)`, param);
}

function decodeBlock(b: unknown, param: string): ContentPart[] {
  if (!isRecord(b)) return [];
  switch (b.type) {
    case 'text':
      return [{ type: 'text', text: str(b.text) ?? '' }];
    case 'image':
      return [decodeImage(b.source, param)];
    case 'document':
      return decodeDocument(b, param);
    case 'tool_use':
      return [{ type: 'tool_call', id: str(b.id) ?? '', name: str(b.name) ?? '', input: isRecord(b.input) ? b.input : {} }];
    case 'tool_result':
      return [{
        type: 'tool_result',
        toolCallId: str(b.tool_use_id) ?? '',
        isError: b.is_error === true,
        content: decodeToolResultContent(b.content, param),
      }];
    case 'thinking': {
      const sig = str(b.signature);
      return [{ type: 'thinking', text: str(b.thinking) ?? '', ...(sig ? { signature: sig } : {}) }];
    }
    case 'redacted_thinking':
      return [{ type: 'thinking', text: str(b.data) ?? '', redacted: true }];
    default:
      // Server-tool blocks (server_tool_use, web_search_tool_result, …) have no equivalent elsewhere.
      return [];
  }
}

function decodeDocument(b: JsonObject, param: string): ContentPart[] {
  const title = str(b.title);
  const src = b.source;
  if (isRecord(src) && src.type === 'base64' && typeof src.data === 'string') {
    return [{ type: 'document', source: { kind: 'base64', mediaType: str(src.media_type) ?? 'application/pdf', data: src.data }, ...(title ? { title } : {}) }];
  }
  if (isRecord(src) && src.type === 'text' && typeof src.data === 'string') {
    return [{ type: 'document', source: { kind: 'text', text: src.data }, ...(title ? { title } : {}) }];
  }
  if (isRecord(src) && src.type === 'content') {
    return arr(src.content).flatMap((c, k) => decodeBlock(c, `${param}.source.content.${k}`));
  }
  throw new TranslationError(400, `${param}: documents for this model must be base64 PDF or text sources`, param);
}

function decodeToolResultContent(content: unknown, param: string): Array<TextPart | ImagePart> {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  const out: Array<TextPart | ImagePart> = [];
  arr(content).forEach((c, k) => {
    for (const part of decodeBlock(c, `${param}.content.${k}`)) {
      if (part.type === 'text' || part.type === 'image') out.push(part);
      else if (part.type === 'document' && part.source.kind === 'text') out.push({ type: 'text', text: part.source.text });
    }
  });
  return out;
}

function decodeTools(tools: unknown): ToolDefinition[] {
  const out: ToolDefinition[] = [];
  for (const t of arr(tools)) {
    if (!isRecord(t) || typeof t.name !== 'string') continue;
    // Versioned server/client tools (web_search_20250305, bash_20250124, …) have no schema to translate.
    if (t.type !== undefined && t.type !== 'custom') continue;
    // Tool-search placeholders only make sense to Anthropic's own tool search.
    if (t.defer_loading === true) continue;
    const { $schema: _schema, ...parameters } = isRecord(t.input_schema) ? t.input_schema : { type: 'object', properties: {} };
    const def: ToolDefinition = { name: t.name, parameters };
    const description = str(t.description);
    if (description !== undefined) def.description = description;
    if (typeof t.strict === 'boolean') def.strict = t.strict;
    out.push(def);
  }
  return out;
}

function decodeToolChoice(tc: unknown, req: InternalRequest): void {
  if (!isRecord(tc)) return;
  let choice: ToolChoice | undefined;
  if (tc.type === 'auto') choice = { type: 'auto' };
  else if (tc.type === 'any') choice = { type: 'any' };
  else if (tc.type === 'none') choice = { type: 'none' };
  else if (tc.type === 'tool' && typeof tc.name === 'string') choice = { type: 'tool', name: tc.name };
  if (choice) req.toolChoice = choice;
  if (tc.disable_parallel_tool_use === true) req.parallelToolCalls = false;
}

export function decodeThinking(thinking: unknown, outputConfig: unknown): ReasoningRequest | undefined {
  const effortRaw = isRecord(outputConfig) ? str(outputConfig.effort) : undefined;
  const effort = effortRaw && EFFORTS.has(effortRaw) ? (effortRaw as ReasoningEffort) : undefined;
  if (!isRecord(thinking)) return effort ? { mode: 'enabled', effort } : undefined;
  if (thinking.type === 'disabled') return { mode: 'disabled' };
  if (thinking.type === 'enabled' || thinking.type === 'adaptive' || thinking.type === 'between_tools') {
    const budget = num(thinking.budget_tokens);
    return { mode: 'enabled', ...(budget !== undefined ? { budgetTokens: budget } : {}), ...(effort ? { effort } : {}) };
  }
  return undefined;
}

// ---------------------------------------------------------------- encode (internal -> Anthropic upstream)

export interface AnthropicEncodeOptions {
  /** Whether the upstream model supports extended thinking. */
  supportsReasoning: boolean;
  /** Output cap used when the client sent none (Anthropic requires max_tokens). */
  defaultMaxOutputTokens: number;
}

const EFFORT_BUDGET: Record<ReasoningEffort, number> = {
  none: 0, minimal: 1024, low: 2048, medium: 8192, high: 16384, xhigh: 32000, max: 64000,
};

export function encodeAnthropicRequest(req: InternalRequest, opts: AnthropicEncodeOptions): JsonObject {
  if (req.choices !== undefined && req.choices > 1) {
    throw new TranslationError(400, 'n: this model returns one choice per request; send n=1 or omit n', 'n');
  }
  const maxTokens = req.maxOutputTokens ?? opts.defaultMaxOutputTokens;
  const out: JsonObject = { model: req.model, max_tokens: maxTokens };

  const { system, messages } = encodeConversation(req);
  if (system.length > 0) out.system = system.map((text) => ({ type: 'text', text }));
  out.messages = messages;

  if (req.tools.length > 0) {
    out.tools = req.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      input_schema: t.parameters,
    }));
  }

  const thinking = encodeThinking(req, opts, maxTokens);
  const forced = req.tools.length > 0 && (req.toolChoice?.type === 'any' || req.toolChoice?.type === 'tool');
  // Anthropic: "Thinking may not be enabled when tool_choice forces tool use" -> the forced choice wins.
  // Nor may it be on when the assistant turn of an unfinished tool loop lacks its thinking block (an
  // OpenAI client that did not keep thinking_blocks, e.g. a streamed reply): Anthropic would answer 400.
  if (thinking && !forced && !(thinking.type === 'enabled' && toolLoopLacksThinking(messages))) out.thinking = thinking;

  if ((req.toolChoice || req.parallelToolCalls === false) && req.tools.length > 0) {
    const choice: JsonObject = { ...(req.toolChoice ?? { type: 'auto' }) };
    if (req.parallelToolCalls === false && choice.type !== 'none') choice.disable_parallel_tool_use = true;
    out.tool_choice = choice;
  }
  if (req.stop.length > 0) out.stop_sequences = req.stop;
  // Anthropic only accepts temperature with thinking off; its range is 0..1 (OpenAI's is 0..2).
  if (req.temperature !== undefined && !out.thinking) out.temperature = Math.min(1, Math.max(0, req.temperature));
  if (req.topP !== undefined && !out.thinking) out.top_p = req.topP;
  if (req.user) out.metadata = { user_id: req.user };
  if (req.responseFormat) out.output_config = { format: { type: 'json_schema', schema: req.responseFormat.schema } };
  if (req.stream) out.stream = true;
  return out;
}

/** The last assistant turn called tools but does not start with a (signed or redacted) thinking block. */
function toolLoopLacksThinking(messages: JsonObject[]): boolean {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'assistant') continue;
    const blocks = Array.isArray(m.content) ? (m.content as JsonObject[]) : [];
    if (!blocks.some((b) => b.type === 'tool_use')) return false;
    const first = blocks[0];
    return !(first !== undefined && (first.type === 'thinking' || first.type === 'redacted_thinking'));
  }
  return false;
}

function encodeThinking(req: InternalRequest, opts: AnthropicEncodeOptions, maxTokens: number): JsonObject | undefined {
  const r = req.reasoning;
  if (!r || !opts.supportsReasoning) return undefined;
  if (r.mode === 'disabled' || r.effort === 'none') return { type: 'disabled' };
  // Budget must be >= 1024 and below max_tokens; without room for it, thinking stays off.
  const wanted = r.budgetTokens ?? EFFORT_BUDGET[r.effort ?? 'medium'];
  const budget = Math.min(Math.max(1024, wanted), maxTokens - 1);
  if (budget < 1024) return undefined;
  return { type: 'enabled', budget_tokens: budget };
}

/** Leading system messages go top-level; later ones are folded into the next user turn. */
function encodeConversation(req: InternalRequest): { system: string[]; messages: JsonObject[] } {
  const system = [...req.system];
  const turns: Array<{ role: 'user' | 'assistant'; blocks: JsonObject[] }> = [];
  for (const m of req.messages) {
    if (m.role === 'system') {
      const text = m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n\n');
      if (turns.length === 0) {
        if (text) system.push(text);
        continue;
      }
      if (text) pushTurn(turns, 'user', [{ type: 'text', text: `<system-reminder>\n${text}\n</system-reminder>` }]);
      continue;
    }
    const blocks = m.content.flatMap(encodeBlock);
    if (blocks.length > 0) pushTurn(turns, m.role, blocks);
  }
  return {
    system,
    messages: turns.map((t) => ({ role: t.role, content: t.role === 'user' ? orderUserBlocks(t.blocks) : t.blocks })),
  };
}

/** Consecutive same-role messages become one turn (Anthropic would merge them anyway). */
function pushTurn(turns: Array<{ role: 'user' | 'assistant'; blocks: JsonObject[] }>, role: 'user' | 'assistant', blocks: JsonObject[]): void {
  const last = turns[turns.length - 1];
  if (last && last.role === role) last.blocks.push(...blocks);
  else turns.push({ role, blocks });
}

/** tool_result blocks first, one per tool id (Anthropic rejects duplicates and results after text). */
function orderUserBlocks(blocks: JsonObject[]): JsonObject[] {
  const seen = new Set<unknown>();
  const results: JsonObject[] = [];
  const rest: JsonObject[] = [];
  for (const b of blocks) {
    if (b.type !== 'tool_result') rest.push(b);
    else if (!seen.has(b.tool_use_id)) {
      seen.add(b.tool_use_id);
      results.push(b);
    }
  }
  return [...results, ...rest];
}

function encodeImage(p: ImagePart): JsonObject {
  return p.source.kind === 'base64'
    ? { type: 'image', source: { type: 'base64', media_type: p.source.mediaType, data: p.source.data } }
    : { type: 'image', source: { type: 'url', url: p.source.url } };
}

function encodeBlock(p: ContentPart): JsonObject[] {
  switch (p.type) {
    case 'text':
      return p.text === '' ? [] : [{ type: 'text', text: p.text }];
    case 'image':
      return [encodeImage(p)];
    case 'document':
      return p.source.kind === 'base64'
        ? [{ type: 'document', source: { type: 'base64', media_type: p.source.mediaType, data: p.source.data }, ...(p.title ? { title: p.title } : {}) }]
        : [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: p.source.text }, ...(p.title ? { title: p.title } : {}) }];
    case 'tool_call':
      return [{ type: 'tool_use', id: p.id, name: p.name, input: p.input }];
    case 'tool_result': {
      const content = p.content.map((c) => (c.type === 'text' ? { type: 'text', text: c.text } : encodeImage(c)));
      return [{ type: 'tool_result', tool_use_id: p.toolCallId, ...(content.length > 0 ? { content } : {}), ...(p.isError ? { is_error: true } : {}) }];
    }
    case 'thinking':
      // Only blocks Anthropic signed itself may go back to Anthropic (else 400 invalid signature).
      if (p.redacted) return [{ type: 'redacted_thinking', data: p.text }];
      return isAnthropicSignature(p.signature) ? [{ type: 'thinking', thinking: p.text, signature: p.signature }] : [];
  }
}

/**
 * For Anthropic-format bodies forwarded as-is to an Anthropic upstream: removes thinking blocks the
 * gateway signed (or that carry no signature), which Anthropic would reject with 400. They appear
 * when a conversation moved from an OpenAI-format upstream to an Anthropic one. Returns the same
 * object when there is nothing to strip (no copy on the hot path).
 */
export function stripGatewayThinking(body: JsonObject): JsonObject {
  if (!Array.isArray(body.messages)) return body;
  const isForeign = (b: unknown): boolean => isRecord(b) && b.type === 'thinking' && !isAnthropicSignature(str(b.signature));
  const needs = body.messages.some((m) => isRecord(m) && m.role === 'assistant' && Array.isArray(m.content) && m.content.some(isForeign));
  if (!needs) return body;
  return {
    ...body,
    messages: body.messages.map((m) =>
      isRecord(m) && m.role === 'assistant' && Array.isArray(m.content) ? { ...m, content: m.content.filter((b) => !isForeign(b)) } : m),
  };
}
