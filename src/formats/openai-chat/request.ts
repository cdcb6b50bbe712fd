/** OpenAI chat-completions request body <-> internal request (docs/wire-formats.md A.2, A.3, C.1–C.8). */
import {
  arr,
  isRecord,
  num,
  parseArguments,
  parseDataUrl,
  str,
  toDataUrl,
  TranslationError,
  type ContentPart,
  type ImagePart,
  type InternalMessage,
  type InternalRequest,
  type JsonObject,
  type ReasoningEffort,
  type ReasoningRequest,
  type TextPart,
  type ThinkingPart,
  type ToolCallPart,
  type ToolDefinition,
  type ToolResultPart,
} from '../../representation/index.js';

const EFFORTS = new Set(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']);
const MAX_STOP_SEQUENCES = 4;
// Decoding OpenAI requests only happens for Anthropic upstreams, which accept these four.
const ANTHROPIC_IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);
const BILLING_HEADER = 'x-anthropic-billing-header:';

// ---------------------------------------------------------------- decode (OpenAI client -> internal)

export function decodeOpenAIRequest(body: unknown): InternalRequest {
  if (!isRecord(body)) throw new TranslationError(400, 'Request body must be a JSON object.');
  const model = str(body.model);
  if (!model) throw new TranslationError(400, 'you must provide a model parameter', 'model');
  if (!Array.isArray(body.messages)) throw new TranslationError(400, "Missing required parameter: 'messages'.", 'messages');

  const req: InternalRequest = { model, system: [], messages: [], tools: [], stop: [], stream: body.stream === true };
  body.messages.forEach((m, i) => decodeMessage(m, i, req));

  const tools = decodeTools(body.tools, body.functions);
  req.tools = tools;
  decodeToolChoice(body.tool_choice ?? legacyFunctionCall(body.function_call), req);
  if (typeof body.parallel_tool_calls === 'boolean') req.parallelToolCalls = body.parallel_tool_calls;

  const maxTokens = num(body.max_completion_tokens) ?? num(body.max_tokens);
  if (maxTokens !== undefined) req.maxOutputTokens = maxTokens;
  const temperature = num(body.temperature);
  if (temperature !== undefined) req.temperature = temperature;
  const topP = num(body.top_p);
  if (topP !== undefined) req.topP = topP;
  if (typeof body.stop === 'string') req.stop = [body.stop];
  else req.stop = arr(body.stop).filter((s): s is string => typeof s === 'string');
  const n = num(body.n);
  if (n !== undefined) req.choices = n;
  const reasoning = decodeReasoning(body);
  if (reasoning) req.reasoning = reasoning;
  const rf = body.response_format;
  if (isRecord(rf) && rf.type === 'json_schema' && isRecord(rf.json_schema) && isRecord(rf.json_schema.schema)) {
    req.responseFormat = { type: 'json_schema', schema: rf.json_schema.schema, ...(typeof rf.json_schema.name === 'string' ? { name: rf.json_schema.name } : {}) };
  }
  const user = str(body.user) ?? str(body.safety_identifier);
  if (user) req.user = user;
  return req;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  return arr(content)
    .flatMap((p) => (isRecord(p) && (p.type === 'text' || p.type === 'refusal') ? [str(p.text) ?? str(p.refusal) ?? ''] : []))
    .join('\n');
}

function decodeMessage(m: unknown, i: number, req: InternalRequest): void {
  const param = `messages[${i}]`;
  if (!isRecord(m)) throw new TranslationError(400, `${param}: must be an object`, param);
  switch (m.role) {
    case 'system':
    case 'developer': {
      const text = textOf(m.content);
      // Before the first conversation turn it is the system prompt; later it stays in place.
      if (req.messages.length === 0) {
        if (text) req.system.push(text);
      } else {
        req.messages.push({ role: 'system', content: [{ type: 'text', text }] });
      }
      return;
    }
    case 'user':
      req.messages.push({ role: 'user', content: decodeUserContent(m.content, param) });
      return;
    case 'assistant':
      req.messages.push(decodeAssistant(m));
      return;
    case 'tool':
    case 'function': {
      const id = m.role === 'tool' ? str(m.tool_call_id) : str(m.name);
      if (!id) throw new TranslationError(400, `${param}.tool_call_id: field required`, `${param}.tool_call_id`);
      const text = textOf(m.content);
      const result: ToolResultPart = { type: 'tool_result', toolCallId: id, isError: false, content: text ? [{ type: 'text', text }] : [] };
      req.messages.push({ role: 'user', content: [result] });
      return;
    }
    default:
      throw new TranslationError(400, `${param}.role: unsupported role ${JSON.stringify(m.role)}`, `${param}.role`);
  }
}

function decodeUserContent(content: unknown, param: string): ContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return arr(content).flatMap((p, j): ContentPart[] => {
    const where = `${param}.content[${j}]`;
    if (!isRecord(p)) return [];
    switch (p.type) {
      case 'text':
        return [{ type: 'text', text: str(p.text) ?? '' }];
      case 'image_url': {
        const url = isRecord(p.image_url) ? str(p.image_url.url) : str(p.image_url);
        if (!url) throw new TranslationError(400, `${where}.image_url.url: field required`, where);
        const image = imageFromUrl(url);
        if (image.source.kind === 'base64' && !ANTHROPIC_IMAGE_TYPES.has(image.source.mediaType)) {
          throw new TranslationError(400, `${where}: image type ${image.source.mediaType} is not supported (use jpeg, png, gif or webp)`, where);
        }
        return [image];
      }
      case 'input_audio':
        throw new TranslationError(400, `${where}: audio input is not supported by this model`, where);
      case 'file': {
        const file = isRecord(p.file) ? p.file : {};
        const data = str(file.file_data) ? parseDataUrl(file.file_data as string) : undefined;
        if (!data) throw new TranslationError(400, `${where}: only inline file_data (base64 data URL) is supported for this model`, where);
        const title = str(file.filename);
        return [{ type: 'document', source: { kind: 'base64', mediaType: data.mediaType, data: data.data }, ...(title ? { title } : {}) }];
      }
      default:
        return [];
    }
  });
}

function imageFromUrl(url: string): ImagePart {
  const data = parseDataUrl(url);
  return data
    ? { type: 'image', source: { kind: 'base64', mediaType: data.mediaType, data: data.data } }
    : { type: 'image', source: { kind: 'url', url } };
}

function decodeAssistant(m: JsonObject): InternalMessage {
  const content: ContentPart[] = [];
  // LiteLLM-style signed thinking blocks survive an OpenAI-client round trip; plain reasoning text does not.
  const blocks = arr(m.thinking_blocks).filter(isRecord);
  if (blocks.length > 0) {
    for (const b of blocks) {
      if (b.type === 'redacted_thinking' && typeof b.data === 'string') content.push({ type: 'thinking', text: b.data, redacted: true });
      else if (typeof b.thinking === 'string') content.push({ type: 'thinking', text: b.thinking, ...(typeof b.signature === 'string' ? { signature: b.signature } : {}) });
    }
  } else {
    const reasoning = str(m.reasoning_content) ?? str(m.reasoning);
    if (reasoning) content.push({ type: 'thinking', text: reasoning });
  }
  const text = textOf(m.content);
  if (text) content.push({ type: 'text', text });
  for (const tc of arr(m.tool_calls)) {
    if (!isRecord(tc)) continue;
    const fn = isRecord(tc.function) ? tc.function : {};
    content.push({ type: 'tool_call', id: str(tc.id) ?? '', name: str(fn.name) ?? '', input: parseArguments(fn.arguments) });
  }
  if (isRecord(m.function_call)) {
    const fn = m.function_call;
    content.push({ type: 'tool_call', id: str(fn.name) ?? '', name: str(fn.name) ?? '', input: parseArguments(fn.arguments) });
  }
  return { role: 'assistant', content };
}

function decodeTools(tools: unknown, functions: unknown): ToolDefinition[] {
  const out: ToolDefinition[] = [];
  const add = (fn: JsonObject): void => {
    if (typeof fn.name !== 'string') return;
    const def: ToolDefinition = { name: fn.name, parameters: isRecord(fn.parameters) ? fn.parameters : { type: 'object', properties: {} } };
    if (typeof fn.description === 'string') def.description = fn.description;
    if (typeof fn.strict === 'boolean') def.strict = fn.strict;
    out.push(def);
  };
  arr(tools).forEach((t, i) => {
    if (!isRecord(t)) return;
    if (t.type === 'function' && isRecord(t.function)) add(t.function);
    else throw new TranslationError(400, `tools[${i}]: only function tools are supported for this model`, `tools[${i}]`);
  });
  arr(functions).forEach((f) => { if (isRecord(f)) add(f); });
  return out;
}

function legacyFunctionCall(fc: unknown): unknown {
  if (isRecord(fc)) return { type: 'function', function: fc };
  return fc;
}

function decodeToolChoice(tc: unknown, req: InternalRequest): void {
  if (tc === 'auto') req.toolChoice = { type: 'auto' };
  else if (tc === 'required') req.toolChoice = { type: 'any' };
  else if (tc === 'none') req.toolChoice = { type: 'none' };
  else if (isRecord(tc) && tc.type === 'function' && isRecord(tc.function) && typeof tc.function.name === 'string') {
    req.toolChoice = { type: 'tool', name: tc.function.name };
  } else if (isRecord(tc) && tc.type === 'allowed_tools' && isRecord(tc.allowed_tools)) {
    const allowed = new Set(arr(tc.allowed_tools.tools).flatMap((t) =>
      isRecord(t) && isRecord(t.function) && typeof t.function.name === 'string' ? [t.function.name] : []));
    req.tools = req.tools.filter((t) => allowed.has(t.name));
    req.toolChoice = tc.allowed_tools.mode === 'required' ? { type: 'any' } : { type: 'auto' };
  } else if (isRecord(tc)) {
    throw new TranslationError(400, 'tool_choice: unsupported tool choice for this model', 'tool_choice');
  }
}

function decodeReasoning(body: JsonObject): ReasoningRequest | undefined {
  const effort = str(body.reasoning_effort) ?? (isRecord(body.reasoning) ? str(body.reasoning.effort) : undefined);
  if (effort && EFFORTS.has(effort)) {
    return effort === 'none' ? { mode: 'disabled' } : { mode: 'enabled', effort: effort as ReasoningEffort };
  }
  if (isRecord(body.reasoning)) {
    if (body.reasoning.enabled === false) return { mode: 'disabled' };
    const budget = num(body.reasoning.max_tokens);
    if (budget !== undefined) return { mode: 'enabled', budgetTokens: budget };
    if (body.reasoning.enabled === true) return { mode: 'enabled' };
  }
  return undefined;
}

// ---------------------------------------------------------------- encode (internal -> OpenAI upstream)

export interface OpenAIEncodeOptions {
  /** Whether the upstream model accepts reasoning_effort and reasoning_content in history. */
  supportsReasoning: boolean;
}

/** Budget thresholds follow common gateway practice (merge.dev): <4096 low, <16384 medium, else high. */
export function effortForBudget(budget: number): ReasoningEffort {
  if (budget < 4096) return 'low';
  if (budget < 16384) return 'medium';
  return 'high';
}

export function encodeOpenAIRequest(req: InternalRequest, opts: OpenAIEncodeOptions): JsonObject {
  const messages: JsonObject[] = [];
  // Claude Code's attribution block changes per session and means nothing to another model.
  const system = req.system.filter((t) => !t.startsWith(BILLING_HEADER));
  if (system.length > 0) messages.push({ role: 'system', content: system.join('\n\n') });
  for (const m of req.messages) messages.push(...encodeMessage(m, opts));

  const out: JsonObject = { model: req.model, messages };
  if (req.tools.length > 0) {
    out.tools = req.tools.map((t) => ({
      type: 'function',
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.parameters,
        ...(t.strict !== undefined ? { strict: t.strict } : {}),
      },
    }));
  }
  // OpenAI rejects tool_choice without tools (e.g. when only untranslatable server tools were sent).
  if (req.toolChoice && req.tools.length > 0) {
    const c = req.toolChoice;
    out.tool_choice = c.type === 'any' ? 'required' : c.type === 'tool' ? { type: 'function', function: { name: c.name } } : c.type;
  }
  if (req.parallelToolCalls === false && req.tools.length > 0) out.parallel_tool_calls = false;
  if (req.maxOutputTokens !== undefined) out.max_tokens = req.maxOutputTokens;
  if (req.temperature !== undefined) out.temperature = req.temperature;
  if (req.topP !== undefined) out.top_p = req.topP;
  if (req.stop.length > 0) out.stop = req.stop.slice(0, MAX_STOP_SEQUENCES);
  const effort = encodeEffort(req.reasoning, opts);
  if (effort) out.reasoning_effort = effort;
  if (req.responseFormat) {
    out.response_format = { type: 'json_schema', json_schema: { name: req.responseFormat.name ?? 'output', schema: req.responseFormat.schema } };
  }
  if (req.user) out.user = req.user;
  if (req.choices !== undefined) out.n = req.choices;
  if (req.stream) out.stream = true;
  return out;
}

function encodeEffort(r: ReasoningRequest | undefined, opts: OpenAIEncodeOptions): ReasoningEffort | undefined {
  if (!r || !opts.supportsReasoning || r.mode === 'disabled') return undefined;
  if (r.effort) return r.effort;
  return r.budgetTokens !== undefined ? effortForBudget(r.budgetTokens) : undefined;
}

function encodeUserPart(p: ContentPart): JsonObject[] {
  switch (p.type) {
    case 'text':
      return [{ type: 'text', text: p.text }];
    case 'image':
      return [imagePart(p)];
    case 'document':
      if (p.source.kind === 'text') return [{ type: 'text', text: p.title ? `${p.title}\n\n${p.source.text}` : p.source.text }];
      return [{ type: 'file', file: { filename: p.title ?? 'doc.pdf', file_data: toDataUrl(p.source.mediaType, p.source.data) } }];
    default:
      return [];
  }
}

function imagePart(p: ImagePart): JsonObject {
  const url = p.source.kind === 'base64' ? toDataUrl(p.source.mediaType, p.source.data) : p.source.url;
  return { type: 'image_url', image_url: { url } };
}

/** A lone text part is sent as a plain string (what every OpenAI-compatible server accepts). */
function contentValue(parts: JsonObject[]): string | JsonObject[] {
  const only = parts[0];
  if (parts.length === 1 && only && only.type === 'text') return only.text as string;
  return parts;
}

function encodeMessage(m: InternalMessage, opts: OpenAIEncodeOptions): JsonObject[] {
  if (m.role === 'system') {
    return [{ role: 'system', content: m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n\n') }];
  }
  if (m.role === 'assistant') return [encodeAssistant(m.content, opts)];

  // User turn: tool results become tool messages first; images from them and the remaining parts
  // follow in one user message (OpenAI tool messages carry text only).
  const out: JsonObject[] = [];
  const userParts: JsonObject[] = [];
  for (const p of m.content) {
    if (p.type === 'tool_result') {
      const text = p.content.flatMap((c: TextPart | ImagePart) => (c.type === 'text' ? [c.text] : [])).join('\n');
      out.push({ role: 'tool', tool_call_id: p.toolCallId, content: p.isError ? `Error: ${text}` : text });
      for (const c of p.content) if (c.type === 'image') userParts.push(imagePart(c));
    }
  }
  for (const p of m.content) if (p.type !== 'tool_result') userParts.push(...encodeUserPart(p));
  if (userParts.length > 0) out.push({ role: 'user', content: contentValue(userParts) });
  return out;
}

function encodeAssistant(parts: ContentPart[], opts: OpenAIEncodeOptions): JsonObject {
  const text = parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
  const calls = parts.filter((p): p is ToolCallPart => p.type === 'tool_call');
  const reasoning = parts.filter((p): p is ThinkingPart => p.type === 'thinking' && !p.redacted).map((p) => p.text).join('');
  const msg: JsonObject = { role: 'assistant', content: text === '' && calls.length > 0 ? null : text };
  if (calls.length > 0) {
    msg.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } }));
  }
  // Reasoning upstreams (DeepSeek, Kimi, …) require their earlier reasoning back during tool loops.
  if (opts.supportsReasoning && reasoning !== '') msg.reasoning_content = reasoning;
  return msg;
}
