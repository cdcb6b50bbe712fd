// Deterministic reply planning shared by both wire formats: which tokens, tool calls and finish reason
// a request gets. Handlers only render a plan; they never decide content.
import { createHmac } from 'node:crypto';
import { WORDS, countTokens, encode, decode } from './tokenizer.js';
import { isRecord } from '../wire/json-shape.js';

export interface ToolSpec {
  name: string;
  schema: unknown;
}

export interface ArgPiece {
  text: string;
  /** Tokens this fragment accounts for; fragments of one call sum to the call's argument tokens. */
  tokens: number;
}

export interface PlannedToolCall {
  id: string;
  name: string;
  /** The arguments as a JSON string (OpenAI `arguments`); JSON.parse(args) is the Anthropic `input`. */
  args: string;
  argPieces: ArgPiece[];
  nameTokens: number;
  tokens: number;
}

export type Finish = 'stop' | 'length' | 'tool_calls';

export interface ReplyPlan {
  /** One o200k token per entry. */
  reasoning: string[];
  /** One o200k token per entry. */
  text: string[];
  toolCalls: PlannedToolCall[];
  finish: Finish;
  outputTokens: number;
}

export interface PlanInput {
  lastUserText: string;
  afterToolResult: boolean;
  /** Callable tools in request order; empty when tools are absent or tool choice is none. */
  tools: ToolSpec[];
  forcedTool?: string;
  allowParallel: boolean;
  reasoning: boolean;
  replyTokens: number;
  reasoningTokens: number;
  maxTokens?: number;
  /** A structured-output reply (JSON text): replaces the words, token by token. */
  structuredText?: string;
  /** A scripted turn (SimulatorOptions.toolScript): call this tool with these arguments when declared. */
  script?: ToolScript;
  /** The text of the tool result being answered (what a scripted reply quotes). */
  toolResultText?: string;
  nextToolId: () => string;
}

/**
 * A scripted agent turn, for demos and client tests: when the request declares `tool`, the model calls
 * it with `arguments`; once its result comes back, the reply quotes the result.
 */
export interface ToolScript {
  tool: string;
  arguments: Record<string, unknown>;
}

/** What a scripted reply says after the tool result, before quoting it. */
export const SCRIPTED_ANSWER_PREFIX = 'The tool returned: ';

export const TOOL_RESULT_PREFIX = 'Tool result received:';
const PREFIX_PIECES = encode(TOOL_RESULT_PREFIX).map((t) => decode([t]));

/** FNV-1a of a string: a fast, stable seed for deterministic choices. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: tiny, fast and good enough to spread word choices. */
function words(seed: number, n: number): string[] {
  let a = seed >>> 0;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const r = ((t ^ (t >>> 14)) >>> 0) % WORDS.length;
    out.push(WORDS[r] as string);
  }
  return out;
}


/** A value that satisfies the common JSON-schema shapes: required properties filled, recursively. */
export function exampleFromSchema(schema: unknown, depth = 0): unknown {
  if (!isRecord(schema) || depth > 8) return 'example';
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  const alt = (schema.anyOf ?? schema.oneOf ?? schema.allOf) as unknown;
  if (Array.isArray(alt) && alt.length > 0) return exampleFromSchema(alt[0], depth + 1);
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? 'null';
  if (type === undefined && isRecord(schema.properties)) type = 'object';
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      const props = isRecord(schema.properties) ? schema.properties : {};
      const required = Array.isArray(schema.required) ? schema.required : [];
      for (const key of required) if (typeof key === 'string') out[key] = exampleFromSchema(props[key], depth + 1);
      return out;
    }
    case 'array':
      return schema.items === undefined ? [] : [exampleFromSchema(schema.items, depth + 1)];
    case 'number':
    case 'integer':
      return 1;
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return 'example';
  }
}

/** Text as one piece per token, joined back exactly (pieces that split a character are merged). */
export function tokenPieces(text: string): string[] {
  const pieces: string[] = [];
  let pending: number[] = [];
  for (const t of encode(text)) {
    pending.push(t);
    const piece = decode(pending);
    if (piece.includes('\uFFFD')) continue;
    pieces.push(piece);
    pending = [];
  }
  if (pending.length > 0) pieces.push(decode(pending));
  return pieces.join('') === text ? pieces : [text];
}

/** Argument fragments: one token each when tokens decode cleanly, else two halves (always 2+ pieces). */
function splitArgs(args: string): ArgPiece[] {
  const toks = encode(args);
  if (toks.length >= 2) {
    const pieces = toks.map((t) => ({ text: decode([t]), tokens: 1 }));
    if (pieces.every((p) => !p.text.includes('\uFFFD')) && pieces.map((p) => p.text).join('') === args) return pieces;
  }
  const mid = Math.max(1, Math.floor(args.length / 2));
  return [
    { text: args.slice(0, mid), tokens: 0 },
    { text: args.slice(mid), tokens: toks.length },
  ];
}

function planToolCall(tool: ToolSpec, id: string, scripted?: Record<string, unknown>): PlannedToolCall {
  const value = scripted ?? exampleFromSchema(tool.schema ?? { type: 'object' });
  const args = JSON.stringify(isRecord(value) ? value : {});
  const nameTokens = countTokens(tool.name);
  const argPieces = splitArgs(args);
  const argTokens = argPieces.reduce((s, p) => s + p.tokens, 0);
  return { id, name: tool.name, args, argPieces, nameTokens, tokens: nameTokens + argTokens };
}

export function planReply(p: PlanInput): ReplyPlan {
  const seed = fnv1a(p.lastUserText);
  const cap = p.maxTokens ?? Number.POSITIVE_INFINITY;
  const fullReasoning = p.reasoning ? words(seed ^ 0x9e3779b9, p.reasoningTokens) : [];
  const reasoning = fullReasoning.slice(0, cap);
  let remaining = cap - reasoning.length;

  let toolsDropped = false;
  if (!p.afterToolResult && p.tools.length > 0) {
    let chosen: ToolSpec[];
    const forced = p.forcedTool === undefined ? undefined : p.tools.find((t) => t.name === p.forcedTool);
    const scripted = p.script === undefined ? undefined : p.tools.find((t) => t.name === p.script?.tool);
    if (scripted !== undefined && p.script !== undefined) {
      const call = planToolCall(scripted, p.nextToolId(), p.script.arguments);
      return { reasoning, text: [], toolCalls: [call], finish: 'tool_calls', outputTokens: reasoning.length + call.tokens };
    }
    if (forced) chosen = [forced];
    else if (p.allowParallel && /\bparallel\b/i.test(p.lastUserText)) chosen = p.tools.slice(0, 3);
    else chosen = p.tools.slice(0, 1);
    const calls = chosen.map((t) => planToolCall(t, p.nextToolId()));
    const need = calls.reduce((s, c) => s + c.tokens, 0);
    if (need <= remaining && reasoning.length === fullReasoning.length) {
      return { reasoning, text: [], toolCalls: calls, finish: 'tool_calls', outputTokens: reasoning.length + need };
    }
    toolsDropped = true; // a real model would have been cut off mid-call: report it as a length stop
  }

  const full = p.structuredText !== undefined
    ? tokenPieces(p.structuredText)
    : p.afterToolResult && p.script !== undefined
    ? tokenPieces(`${SCRIPTED_ANSWER_PREFIX}${(p.toolResultText ?? '').trim().slice(0, 2000)}`)
    : p.afterToolResult
    ? [...PREFIX_PIECES, ...words(seed, Math.max(1, p.replyTokens - PREFIX_PIECES.length))]
    : words(seed, p.replyTokens);
  remaining = Math.max(0, remaining);
  const text = full.slice(0, remaining);
  const truncated = toolsDropped || text.length < full.length || reasoning.length < fullReasoning.length;
  return {
    reasoning,
    text,
    toolCalls: [],
    finish: truncated ? 'length' : 'stop',
    outputTokens: reasoning.length + text.length,
  };
}

/** Thinking-block signature: HMAC under a per-simulator secret, so a replayed block verifies only if byte-identical. */
export function signThinking(secret: Buffer, thinking: string): string {
  return createHmac('sha256', secret).update(thinking, 'utf8').digest('base64');
}
