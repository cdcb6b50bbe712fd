// Prompt and completion in the shapes of the OpenTelemetry GenAI conventions (gen_ai.input.messages,
// gen_ai.output.messages, gen_ai.system_instructions): messages of typed parts. Built only when
// TOLLGATE_TRACE_CONTENT=on; nothing here runs otherwise.
//
// The prompt is the client's messages as received (before any translation to the upstream's format),
// each part mapped to the conventions' part type; a part with no counterpart is kept whole under its
// own type (the conventions' generic part).
import type { ClientFormatName } from '../formats/index.js';
import { isRecord, type JsonObject } from '../wire/json-shape.js';

export type MessagePart =
  | { type: 'text'; content: string }
  | { type: 'reasoning'; content: string }
  | { type: 'tool_call'; id?: string; name: string; arguments?: unknown }
  | { type: 'tool_call_response'; id?: string; response: unknown }
  | { type: 'uri'; modality: string; uri: string }
  | { type: 'blob'; modality: string; mime_type?: string; content: string }
  | JsonObject;

export interface ChatMessage {
  role: string;
  parts: MessagePart[];
  name?: string;
}

export interface OutputMessage extends ChatMessage {
  finish_reason: string;
}

export interface InputContent {
  /** gen_ai.system_instructions: the Anthropic `system` field (OpenAI system messages stay in the messages). */
  system?: MessagePart[];
  input: ChatMessage[];
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Tool-call arguments as the object they encode, or as sent when they are not JSON. */
function parsedArguments(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  try {
    return JSON.parse(v) as unknown;
  } catch {
    return v;
  }
}

/** An image or file given by URL: a `data:` URL is inline content (blob), anything else a link (uri). */
function urlPart(url: string, modality: string): MessagePart {
  const m = /^data:([^;,]*)(?:;[^,]*)?,(.*)$/s.exec(url);
  if (m) return { type: 'blob', modality, ...(m[1] ? { mime_type: m[1] } : {}), content: m[2] ?? '' };
  return { type: 'uri', modality, uri: url };
}

function openaiPart(p: unknown): MessagePart | undefined {
  if (typeof p === 'string') return { type: 'text', content: p };
  if (!isRecord(p)) return undefined;
  if (p.type === 'text' && typeof p.text === 'string') return { type: 'text', content: p.text };
  if (p.type === 'image_url' && isRecord(p.image_url) && typeof p.image_url.url === 'string') return urlPart(p.image_url.url, 'image');
  return p;
}

function openaiMessage(m: JsonObject): ChatMessage {
  const role = str(m.role) ?? 'user';
  const parts: MessagePart[] = [];
  const reasoning = str(m.reasoning_content) ?? str(m.reasoning);
  if (reasoning) parts.push({ type: 'reasoning', content: reasoning });
  if (role === 'tool') {
    const id = str(m.tool_call_id);
    parts.push({ type: 'tool_call_response', ...(id ? { id } : {}), response: m.content });
  } else if (typeof m.content === 'string') {
    parts.push({ type: 'text', content: m.content });
  } else if (Array.isArray(m.content)) {
    for (const p of m.content) {
      const part = openaiPart(p);
      if (part) parts.push(part);
    }
  }
  if (Array.isArray(m.tool_calls)) {
    for (const call of m.tool_calls) {
      if (!isRecord(call) || !isRecord(call.function)) continue;
      const id = str(call.id);
      parts.push({ type: 'tool_call', ...(id ? { id } : {}), name: str(call.function.name) ?? '', arguments: parsedArguments(call.function.arguments) });
    }
  }
  const name = str(m.name);
  return { role, parts, ...(name ? { name } : {}) };
}

function anthropicPart(b: unknown): MessagePart | undefined {
  if (typeof b === 'string') return { type: 'text', content: b };
  if (!isRecord(b)) return undefined;
  switch (b.type) {
    case 'text':
      return typeof b.text === 'string' ? { type: 'text', content: b.text } : b;
    case 'thinking':
      return typeof b.thinking === 'string' ? { type: 'reasoning', content: b.thinking } : b;
    case 'tool_use': {
      const id = str(b.id);
      return { type: 'tool_call', ...(id ? { id } : {}), name: str(b.name) ?? '', arguments: b.input };
    }
    case 'tool_result': {
      const id = str(b.tool_use_id);
      return { type: 'tool_call_response', ...(id ? { id } : {}), response: b.content };
    }
    case 'image':
      if (isRecord(b.source)) {
        const s = b.source;
        if (s.type === 'base64' && typeof s.data === 'string') {
          const mime = str(s.media_type);
          return { type: 'blob', modality: 'image', ...(mime ? { mime_type: mime } : {}), content: s.data };
        }
        if (s.type === 'url' && typeof s.url === 'string') return { type: 'uri', modality: 'image', uri: s.url };
      }
      return b;
    default:
      return b;
  }
}

function anthropicParts(content: unknown): MessagePart[] {
  if (typeof content === 'string') return [{ type: 'text', content }];
  const parts: MessagePart[] = [];
  if (Array.isArray(content)) {
    for (const b of content) {
      const part = anthropicPart(b);
      if (part) parts.push(part);
    }
  }
  return parts;
}

/** How one client format's prompts and whole replies read as GenAI messages. */
interface ContentReader {
  input(body: JsonObject, messages: unknown[]): InputContent;
  /** Undefined when `reply` is not a reply of this format. */
  reply(reply: JsonObject): OutputMessage[] | undefined;
}

/** One reader per client format: a format without one is a compile error here. */
const READERS: Record<ClientFormatName, ContentReader> = {
  openai: {
    input: (_body, messages) => ({ input: messages.filter(isRecord).map(openaiMessage) }),
    reply(reply) {
      if (!Array.isArray(reply.choices)) return undefined;
      const out: OutputMessage[] = [];
      for (const choice of reply.choices) {
        if (!isRecord(choice) || !isRecord(choice.message)) continue;
        const { role, parts } = openaiMessage(choice.message);
        out.push({ role, parts, finish_reason: str(choice.finish_reason) ?? 'error' });
      }
      return out;
    },
  },
  anthropic: {
    input(body, messages) {
      const input = messages.filter(isRecord).map((m): ChatMessage => ({ role: str(m.role) ?? 'user', parts: anthropicParts(m.content) }));
      return body.system === undefined ? { input } : { system: anthropicParts(body.system), input };
    },
    reply(reply) {
      if (!Array.isArray(reply.content)) return undefined;
      return [{ role: str(reply.role) ?? 'assistant', parts: anthropicParts(reply.content), finish_reason: str(reply.stop_reason) ?? 'error' }];
    },
  },
};

/** The client's prompt (its request body in its wire format) as GenAI input messages. */
export function inputContent(format: ClientFormatName, body: unknown): InputContent {
  if (!isRecord(body)) return { input: [] };
  return READERS[format].input(body, Array.isArray(body.messages) ? body.messages : []);
}

/**
 * A whole (non-streamed) reply as the client receives it, one output message per choice; undefined
 * when `reply` is not a reply of that format.
 */
export function replyContent(format: ClientFormatName, reply: unknown): OutputMessage[] | undefined {
  return isRecord(reply) ? READERS[format].reply(reply) : undefined;
}

export interface GeneratedOutput {
  /** Generated pieces in order: answer text, reasoning, tool names and arguments. */
  generated: readonly string[];
  /** The reasoning pieces, in the same order (a subsequence of `generated`). */
  reasoningGenerated: readonly string[];
  finishReason: string | undefined;
  status: string;
}

/**
 * What a stream relayed, as one assistant output message: the reasoning, then the rest as text (tool-call
 * names and arguments included: a relayed stream keeps only the generated pieces, not their kinds).
 */
export function outputContent(o: GeneratedOutput): OutputMessage[] {
  let text = '';
  let reasoning = '';
  let r = 0;
  for (const piece of o.generated) {
    // Reasoning pieces appear in `generated` in the same order: match them off as they come.
    if (r < o.reasoningGenerated.length && piece === o.reasoningGenerated[r]) {
      reasoning += piece;
      r++;
    } else {
      text += piece;
    }
  }
  const parts: MessagePart[] = [];
  if (reasoning !== '') parts.push({ type: 'reasoning', content: reasoning });
  if (text !== '') parts.push({ type: 'text', content: text });
  const finish = o.finishReason ?? (o.status === 'client_cancelled' ? 'cancelled' : 'error');
  return [{ role: 'assistant', parts, finish_reason: finish }];
}
