/**
 * OpenAI Responses request body -> internal request (shared/responses-api.md §2, §7.1, §7.2, §8.2).
 * Prior items (previous_response_id, item_reference) are resolved by the caller and handed in, so this
 * stays pure. Hosted tools we cannot run are dropped and listed; a request that depends on one is a 400.
 */
import {
  arr,
  isRecord,
  num,
  parseArguments,
  parseDataUrl,
  str,
  TranslationError,
  type ContentPart,
  type InternalMessage,
  type InternalRequest,
  type JsonObject,
  type ReasoningEffort,
  type ToolDefinition,
} from '../../representation/index.js';
import { openEnvelope } from './reasoning-envelope.js';

const EFFORTS = new Set(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']);
/** Tools OpenAI runs itself (or specially typed client tools) that a chat/Anthropic upstream cannot. */
const HOSTED = new Set([
  'web_search', 'web_search_preview', 'web_search_preview_2025_03_11', 'file_search', 'code_interpreter', 'computer_use_preview', 'computer',
  'image_generation', 'mcp', 'tool_search', 'programmatic_tool_calling', 'local_shell', 'shell', 'apply_patch', 'custom',
]);
/** History items only an earlier OpenAI response could have produced: noise here. */
const HOSTED_ITEMS = /^(web_search_call|file_search_call|computer_call(_output)?|code_interpreter_call|image_generation_call|local_shell_call(_output)?|shell_call(_output)?|apply_patch_call(_output)?|mcp_.*|tool_search_(call|output)|program(_output)?|compaction(_trigger)?|custom_tool_call(_output)?)$/;

export interface DecodedResponsesRequest {
  internal: InternalRequest;
  /** Hosted tools declared but not served (dropped; named in a response header). */
  droppedTools: string[];
  /** Flattened upstream tool name -> the namespace and member name the client knows. */
  namespaces: Map<string, { namespace: string; name: string }>;
  /** What the response echoes. */
  echo: {
    instructions: string | null;
    tools: unknown[];
    toolChoice: unknown;
    parallelToolCalls: boolean;
    temperature: number | null;
    topP: number | null;
    metadata: Record<string, string>;
    reasoning: { effort: string | null; summary: string | null };
    text: unknown;
    maxOutputTokens: number | null;
    user: string | null;
  };
  store: boolean;
  previousResponseId: string | null;
  /** Reasoning text goes out as summaries (reasoning.summary was asked for). */
  wantSummary: boolean;
  /** `include` has reasoning.encrypted_content. */
  wantEncryptedReasoning: boolean;
  /**
   * The response has reasoning items: the request set `reasoning` (an effort other than none, or a
   * summary) or `include` asks for reasoning.encrypted_content. Without, reasoning is billed, not sent.
   */
  wantReasoning: boolean;
  /** The client's input items, normalised (ids kept), as stored for input_items and item references. */
  inputItems: JsonObject[];
}

export interface ResponsesDecodeContext {
  /** Items this response continues from (previous_response_id's stored context), oldest first. */
  priorItems: JsonObject[];
  /** Stored item by id (item_reference), for this account only. */
  resolveItem(id: string): JsonObject | undefined;
  /** Key of the reasoning envelope, and the provider family of the upstream this request goes to. */
  envelopeKey: Buffer;
  accountTag: string;
}

const flatName = (namespace: string, name: string): string => `${namespace}__${name}`.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64);

function schemaOf(parameters: unknown): Record<string, unknown> {
  if (!isRecord(parameters)) return { type: 'object', properties: {} };
  const { $schema: _drop, ...rest } = parameters;
  return rest;
}

function decodeTools(raw: unknown, out: DecodedResponsesRequest): ToolDefinition[] {
  const tools: ToolDefinition[] = [];
  const fn = (t: JsonObject, i: number, namespace?: string): void => {
    const name = str(t.name);
    if (!name) throw new TranslationError(400, `tools[${i}].name is required for a function tool.`, `tools[${i}].name`);
    const upstreamName = namespace === undefined ? name : flatName(namespace, name);
    if (namespace !== undefined) out.namespaces.set(upstreamName, { namespace, name });
    tools.push({ name: upstreamName, ...(str(t.description) ? { description: str(t.description) as string } : {}), parameters: schemaOf(t.parameters), ...(typeof t.strict === 'boolean' ? { strict: t.strict } : {}) });
  };
  arr(raw).forEach((t, i) => {
    if (!isRecord(t)) throw new TranslationError(400, `tools[${i}] must be an object.`, `tools[${i}]`);
    const type = str(t.type) ?? '';
    if (type === 'function') fn(t, i);
    else if (type === 'namespace') {
      const ns = str(t.name) ?? 'tools';
      arr(t.tools).forEach((m) => {
        if (isRecord(m) && m.type === 'function') fn(m, i, ns);
        else if (isRecord(m)) out.droppedTools.push(`${ns}.${str(m.name) ?? str(m.type) ?? '?'}`);
      });
    } else if (HOSTED.has(type)) out.droppedTools.push(type === 'custom' ? `custom:${str(t.name) ?? '?'}` : type);
    else throw new TranslationError(400, `tools[${i}].type '${type}' is not supported; use function tools.`, `tools[${i}].type`);
  });
  return tools;
}

function decodeToolChoice(raw: unknown, req: InternalRequest, out: DecodedResponsesRequest): void {
  if (raw === undefined || raw === null || raw === 'auto') return;
  if (raw === 'none') req.toolChoice = { type: 'none' };
  else if (raw === 'required') {
    if (req.tools.length === 0 && out.droppedTools.length > 0) {
      throw new TranslationError(400, `tool_choice "required" needs a tool, and the only tools declared (${out.droppedTools.join(', ')}) are run by OpenAI itself, which this gateway cannot do.`, 'tool_choice');
    }
    req.toolChoice = { type: 'any' };
  } else if (isRecord(raw)) {
    const type = str(raw.type) ?? '';
    if (type === 'function') {
      const name = str(raw.name) ?? '';
      if (!req.tools.some((t) => t.name === name)) throw new TranslationError(400, `tool_choice names '${name}', which is not among the function tools.`, 'tool_choice');
      req.toolChoice = { type: 'tool', name };
    } else if (type === 'allowed_tools') req.toolChoice = raw.mode === 'required' ? { type: 'any' } : { type: 'auto' };
    else throw new TranslationError(400, `tool_choice forces the '${type}' tool, which OpenAI runs itself and this gateway cannot serve.`, 'tool_choice');
  } else throw new TranslationError(400, 'tool_choice must be "auto", "none", "required" or an object.', 'tool_choice');
}

/** Message content parts -> internal parts (text, images, PDFs / text files). */
function decodeParts(content: unknown, where: string): ContentPart[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  const parts: ContentPart[] = [];
  arr(content).forEach((p, j) => {
    if (!isRecord(p)) return;
    const type = str(p.type);
    if (type === 'input_text' || type === 'output_text' || type === 'text') {
      const text = str(p.text) ?? '';
      if (text !== '') parts.push({ type: 'text', text });
    } else if (type === 'refusal') {
      const text = str(p.refusal) ?? '';
      if (text !== '') parts.push({ type: 'text', text });
    } else if (type === 'input_image') {
      const url = str(p.image_url);
      if (url === undefined) throw new TranslationError(400, `${where}.content[${j}]: only image_url images are supported (file_id needs OpenAI's file store).`, `${where}.content[${j}]`);
      const data = parseDataUrl(url);
      parts.push({ type: 'image', source: data === undefined ? { kind: 'url', url } : { kind: 'base64', mediaType: data.mediaType, data: data.data } });
    } else if (type === 'input_file') {
      const data = parseDataUrl(str(p.file_data) ?? '');
      if (data === undefined) throw new TranslationError(400, `${where}.content[${j}]: send files as file_data (a data: URL); file_id and file_url are not supported.`, `${where}.content[${j}]`);
      parts.push(
        data.mediaType.startsWith('text/')
          ? { type: 'document', source: { kind: 'text', text: Buffer.from(data.data, 'base64').toString('utf8') }, ...(str(p.filename) ? { title: str(p.filename) as string } : {}) }
          : { type: 'document', source: { kind: 'base64', mediaType: data.mediaType, data: data.data }, ...(str(p.filename) ? { title: str(p.filename) as string } : {}) },
      );
    }
  });
  return parts;
}

/** One item list (prior context, then this request's input) -> system text and messages. */
function decodeItems(items: JsonObject[], req: InternalRequest, ctx: ResponsesDecodeContext, out: DecodedResponsesRequest): void {
  let assistant: InternalMessage | undefined;
  const push = (m: InternalMessage): void => {
    req.messages.push(m);
    assistant = m.role === 'assistant' ? m : undefined;
  };
  const openAssistant = (): InternalMessage => {
    if (assistant !== undefined) return assistant;
    const m: InternalMessage = { role: 'assistant', content: [] };
    push(m);
    return m;
  };
  const userFor = (): InternalMessage => {
    const last = req.messages[req.messages.length - 1];
    if (last !== undefined && last.role === 'user' && last.content.every((p) => p.type === 'tool_result')) return last;
    const m: InternalMessage = { role: 'user', content: [] };
    push(m);
    return m;
  };
  items.forEach((raw, i) => {
    const where = `input[${i}]`;
    let item = raw;
    if (item.type === 'item_reference') {
      const id = str(item.id) ?? '';
      const found = ctx.resolveItem(id);
      if (found === undefined) throw new TranslationError(400, `Item with id '${id}' not found. Items are kept only for responses stored (store is not false) on this account.`, where);
      item = found;
    }
    const type = str(item.type) ?? (item.role !== undefined ? 'message' : '');
    if (type === 'message') {
      const role = str(item.role);
      const parts = decodeParts(item.content, where);
      if (role === 'system' || role === 'developer') {
        const text = parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n');
        if (text !== '') {
          if (req.messages.length === 0) req.system.push(text);
          else push({ role: 'system', content: [{ type: 'text', text }] });
        }
      } else if (role === 'assistant') {
        const m = openAssistant();
        m.content.push(...parts.filter((p) => p.type === 'text'));
      } else if (role === 'user') {
        if (parts.length > 0) push({ role: 'user', content: parts });
      } else throw new TranslationError(400, `${where}.role must be user, assistant, system or developer.`, `${where}.role`);
    } else if (type === 'function_call') {
      const callId = str(item.call_id);
      const name = str(item.name);
      if (!callId || !name) throw new TranslationError(400, `${where}: a function_call needs call_id and name.`, where);
      const ns = str(item.namespace);
      openAssistant().content.push({ type: 'tool_call', id: callId, name: ns === undefined ? name : flatName(ns, name), input: parseArguments(item.arguments) });
    } else if (type === 'function_call_output') {
      const callId = str(item.call_id);
      if (!callId) throw new TranslationError(400, `${where}: a function_call_output needs call_id.`, where);
      const output = item.output;
      const content = typeof output === 'string' ? [{ type: 'text' as const, text: output }] : decodeParts(output, where).filter((p) => p.type === 'text' || p.type === 'image');
      userFor().content.push({ type: 'tool_result', toolCallId: callId, content: content as Array<{ type: 'text'; text: string }>, isError: false });
    } else if (type === 'reasoning') {
      // Only our own signed envelope comes back as thinking; anything else (OpenAI's ciphertext,
      // another gateway's) is dropped, never forwarded.
      const thinking = openEnvelope(str(item.encrypted_content), ctx.envelopeKey, ctx.accountTag);
      if (thinking !== undefined) openAssistant().content.push(...thinking);
    } else if (type === 'additional_tools') {
      // Codex "responses-lite": the tool list as an input item.
      req.tools.push(...decodeTools(item.tools, out));
    } else if (HOSTED_ITEMS.test(type)) {
      // History of a tool only OpenAI runs: nothing an upstream here can use.
    } else throw new TranslationError(400, `${where}.type '${type}' is not supported.`, `${where}.type`);
  });
}

export function decodeResponsesRequest(body: unknown, ctx: ResponsesDecodeContext): DecodedResponsesRequest {
  if (!isRecord(body)) throw new TranslationError(400, 'Request body must be a JSON object.');
  const model = str(body.model);
  if (!model) throw new TranslationError(400, 'you must provide a model parameter', 'model');
  if (body.conversation !== undefined && body.conversation !== null) throw new TranslationError(400, 'conversation is not supported; send the history in input, or use previous_response_id.', 'conversation');
  if (body.background === true) throw new TranslationError(400, 'background responses are not supported; stream instead.', 'background');
  if (body.prompt !== undefined && body.prompt !== null) throw new TranslationError(400, 'stored prompts (prompt) are not supported; send instructions and input.', 'prompt');
  const input = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : body.input;
  if (!Array.isArray(input)) throw new TranslationError(400, "input must be a string or a list of items.", 'input');
  const inputItems = input.map((it, i) => {
    if (!isRecord(it)) throw new TranslationError(400, `input[${i}] must be an object.`, `input[${i}]`);
    return it;
  });
  const reasoning = isRecord(body.reasoning) ? body.reasoning : {};
  const effort = str(reasoning.effort);
  if (effort !== undefined && !EFFORTS.has(effort)) throw new TranslationError(400, `reasoning.effort must be one of ${[...EFFORTS].join(', ')}.`, 'reasoning.effort');
  const summary = str(reasoning.summary) ?? str(reasoning.generate_summary) ?? null;
  const include = arr(body.include).filter((x): x is string => typeof x === 'string');
  // Results of a tool only OpenAI runs: a request that asks for them depends on that tool.
  const hostedInclude = include.find((x) => /^(web_search_call|file_search_call|code_interpreter_call|computer_call_output)\./.test(x));
  if (hostedInclude !== undefined) {
    throw new TranslationError(400, `include asks for ${hostedInclude}, the results of a tool OpenAI runs itself (${hostedInclude.split('.')[0]?.replace(/_call(_output)?$/, '')}); this gateway cannot serve it.`, 'include');
  }
  const maxOutputTokens = num(body.max_output_tokens);
  if (maxOutputTokens !== undefined && (!Number.isSafeInteger(maxOutputTokens) || maxOutputTokens < 1)) throw new TranslationError(400, 'max_output_tokens must be a positive integer.', 'max_output_tokens');
  const metadata: Record<string, string> = {};
  if (isRecord(body.metadata)) for (const [k, v] of Object.entries(body.metadata)) if (typeof v === 'string') metadata[k] = v;
  const user = str(body.safety_identifier) ?? str(body.user);
  const instructions = str(body.instructions) ?? null;

  const out: DecodedResponsesRequest = {
    internal: { model, system: [], messages: [], tools: [], stop: [], stream: body.stream === true },
    droppedTools: [],
    namespaces: new Map(),
    echo: {
      instructions,
      tools: arr(body.tools),
      toolChoice: body.tool_choice ?? 'auto',
      parallelToolCalls: body.parallel_tool_calls !== false,
      temperature: num(body.temperature) ?? null,
      topP: num(body.top_p) ?? null,
      metadata,
      reasoning: { effort: effort ?? null, summary },
      text: isRecord(body.text) ? body.text : { format: { type: 'text' } },
      maxOutputTokens: maxOutputTokens ?? null,
      user: user ?? null,
    },
    store: body.store !== false,
    previousResponseId: str(body.previous_response_id) ?? null,
    wantSummary: summary !== null,
    wantEncryptedReasoning: include.includes('reasoning.encrypted_content'),
    wantReasoning: (effort !== undefined && effort !== 'none') || summary !== null || include.includes('reasoning.encrypted_content'),
    inputItems,
  };
  const req = out.internal;
  req.tools = decodeTools(body.tools, out);
  if (instructions !== null && instructions !== '') req.system.push(instructions);
  decodeItems([...ctx.priorItems, ...inputItems], req, ctx, out);
  decodeToolChoice(body.tool_choice, req, out);
  if (req.tools.length === 0) delete req.toolChoice;
  else if (typeof body.parallel_tool_calls === 'boolean') req.parallelToolCalls = body.parallel_tool_calls;
  if (maxOutputTokens !== undefined) req.maxOutputTokens = maxOutputTokens;
  const temperature = num(body.temperature);
  if (temperature !== undefined) req.temperature = temperature;
  const topP = num(body.top_p);
  if (topP !== undefined) req.topP = topP;
  if (effort === 'none') req.reasoning = { mode: 'disabled' };
  else if (effort !== undefined) req.reasoning = { mode: 'enabled', effort: effort as ReasoningEffort };
  const format = isRecord(body.text) && isRecord(body.text.format) ? body.text.format : undefined;
  if (format !== undefined && format.type === 'json_schema') {
    if (!isRecord(format.schema)) throw new TranslationError(400, 'text.format.schema must be a JSON Schema object.', 'text.format.schema');
    req.responseFormat = { type: 'json_schema', schema: format.schema, ...(str(format.name) ? { name: str(format.name) as string } : {}) };
  }
  if (user !== undefined) req.user = user;
  if (req.messages.length === 0) throw new TranslationError(400, 'input has no message to answer.', 'input');
  return out;
}
