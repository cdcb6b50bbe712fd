/**
 * Internal response / stream events -> the Responses API's response object and its event stream
 * (shared/responses-api.md §3, §4). Every stream has a sequence_number per event, the added/part
 * events before their deltas, complete items in output_item.done, and exactly one terminal event
 * whose output repeats those items; a failure after the 200 is `error` then `response.failed`.
 */
import type { FinishReason, InternalResponse, JsonObject, StreamEncoder, StreamEnd, StreamErrorKind, StreamEvent, ThinkingPart, ToolCallPart } from '../../representation/index.js';
import type { DecodedResponsesRequest } from './request.js';
import { sealEnvelope } from './reasoning-envelope.js';
import { withCost } from '../../wire/usage-cost.js';
import { usageToResponses } from './usage.js';

export interface ResponsesEncodeContext {
  id: string;
  createdAt: number;
  /** The model id the client asked for. */
  model: string;
  request: DecodedResponsesRequest;
  envelopeKey: Buffer;
  accountTag: string;
}

/** Output items as kept for the client's next turn (always with the reasoning envelope). */
export interface ResponseResult {
  body: JsonObject;
  /** Output items with encrypted_content, whatever the client asked: what the store keeps. */
  storedOutput: JsonObject[];
}

/** The usage object clients see (src/formats/openai-responses/usage.ts). */
export const responsesUsage = usageToResponses;

function statusOf(finish: FinishReason): { status: string; incomplete: JsonObject | null } {
  if (finish === 'length' || finish === 'context_window') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } };
  return { status: 'completed', incomplete: null };
}

/** The response object around `output` (the request's settings echoed, as clients expect). */
function envelope(ctx: ResponsesEncodeContext, fields: { status: string; output: JsonObject[]; usage: JsonObject | null; error?: JsonObject | null; incomplete?: JsonObject | null; completedAt?: number }): JsonObject {
  const e = ctx.request.echo;
  return {
    id: ctx.id,
    object: 'response',
    created_at: ctx.createdAt,
    ...(fields.completedAt === undefined ? {} : { completed_at: fields.completedAt }),
    status: fields.status,
    error: fields.error ?? null,
    incomplete_details: fields.incomplete ?? null,
    model: ctx.model,
    instructions: e.instructions,
    max_output_tokens: e.maxOutputTokens,
    output: fields.output,
    parallel_tool_calls: e.parallelToolCalls,
    previous_response_id: ctx.request.previousResponseId,
    reasoning: e.reasoning,
    store: ctx.request.store,
    temperature: e.temperature ?? 1,
    text: e.text,
    tool_choice: e.toolChoice,
    tools: e.tools,
    top_p: e.topP ?? 1,
    truncation: 'disabled',
    user: e.user,
    metadata: e.metadata,
    usage: fields.usage,
  };
}

const callName = (ctx: ResponsesEncodeContext, upstreamName: string): JsonObject => {
  const ns = ctx.request.namespaces.get(upstreamName);
  return ns === undefined ? { name: upstreamName } : { name: ns.name, namespace: ns.namespace };
};

const base = (ctx: ResponsesEncodeContext): string => ctx.id.replace(/^resp_/, '');

function reasoningItem(ctx: ResponsesEncodeContext, id: string, parts: ThinkingPart[], summaryText: string, status: string): { client: JsonObject; stored: JsonObject } {
  const stored: JsonObject = {
    id,
    type: 'reasoning',
    summary: ctx.request.wantSummary && summaryText !== '' ? [{ type: 'summary_text', text: summaryText }] : [],
    encrypted_content: sealEnvelope(parts, ctx.envelopeKey, ctx.accountTag),
    status,
  };
  const { encrypted_content: _envelope, ...withoutEnvelope } = stored;
  return { stored, client: ctx.request.wantEncryptedReasoning ? stored : withoutEnvelope };
}

const messageItem = (id: string, text: string, status: string): JsonObject => ({
  id,
  type: 'message',
  status,
  role: 'assistant',
  content: status === 'in_progress' && text === '' ? [] : [{ type: 'output_text', text, annotations: [], logprobs: [] }],
});

function callItem(ctx: ResponsesEncodeContext, id: string, call: { id: string; name: string; args: string }, status: string): JsonObject {
  return { id, type: 'function_call', status, call_id: call.id, ...callName(ctx, call.name), arguments: call.args };
}

/** A finished (non-stream) internal response as the Responses API's response object. */
export function encodeResponsesResponse(r: InternalResponse, ctx: ResponsesEncodeContext): ResponseResult {
  const client: JsonObject[] = [];
  const stored: JsonObject[] = [];
  const thinking = r.content.filter((p): p is ThinkingPart => p.type === 'thinking');
  if (thinking.length > 0) {
    const item = reasoningItem(ctx, `rs_${base(ctx)}`, thinking, thinking.filter((p) => p.redacted !== true).map((p) => p.text).join('\n'), 'completed');
    // Sent only when asked for; kept in the stored context either way, for a follow-up's upstream.
    if (ctx.request.wantReasoning) client.push(item.client);
    stored.push(item.stored);
  }
  const text = r.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
  const calls = r.content.filter((p): p is ToolCallPart => p.type === 'tool_call');
  // Never an empty output on success (the Agents SDK re-runs such a turn): an empty message at least.
  if (text !== '' || calls.length === 0) {
    const m = messageItem(`msg_${base(ctx)}`, text, 'completed');
    client.push(m);
    stored.push(m);
  }
  calls.forEach((c, i) => {
    const item = callItem(ctx, `fc_${base(ctx)}_${i}`, { id: c.id, name: c.name, args: JSON.stringify(c.input) }, 'completed');
    client.push(item);
    stored.push(item);
  });
  const { status, incomplete } = statusOf(calls.length > 0 && r.finishReason === 'stop' ? 'tool_calls' : r.finishReason);
  const now = Math.floor(Date.now() / 1000);
  return { body: envelope(ctx, { status, output: client, usage: responsesUsage(r.usage), incomplete, completedAt: now }), storedOutput: stored };
}

interface OpenItem {
  /** Its output_index, counting the items the client is sent (-1 for a hidden one). */
  index: number;
  /** Its place among all items, hidden ones included: its place in the stored output. */
  slot: number;
  /** Reasoning the request did not ask for: stored, never sent. */
  hidden: boolean;
  kind: 'reasoning' | 'message' | 'call';
  id: string;
  text: string;
  parts?: ThinkingPart[];
  call?: { id: string; name: string; args: string };
  done: boolean;
}

/** The Responses event stream for one response, fed internal stream events. */
export class ResponsesStreamEncoder implements StreamEncoder {
  private seq = 0;
  private started = false;
  private readonly items: OpenItem[] = [];
  /** Items the client has been sent (output_index of the next one). */
  private sentItems = 0;
  private readonly clientOutput: JsonObject[] = [];
  private readonly storedOutput: JsonObject[] = [];
  private reasoning: OpenItem | undefined;
  private message: OpenItem | undefined;
  private readonly calls = new Map<number, OpenItem>();
  /** The final response object, once the stream has ended (completed, incomplete or failed). */
  final: ResponseResult | undefined;

  constructor(private readonly ctx: ResponsesEncodeContext) {}

  private event(type: string, payload: JsonObject): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.seq++, ...payload })}\n\n`;
  }

  /** response.created and response.in_progress: sent before anything else. */
  begin(): string {
    if (this.started) return '';
    this.started = true;
    const snapshot = envelope(this.ctx, { status: 'in_progress', output: [], usage: null });
    return this.event('response.created', { response: snapshot }) + this.event('response.in_progress', { response: snapshot });
  }

  private open(kind: OpenItem['kind'], id: string, extra: Partial<OpenItem> = {}): { item: OpenItem; text: string } {
    const hidden = kind === 'reasoning' && !this.ctx.request.wantReasoning;
    const item: OpenItem = { index: hidden ? -1 : this.sentItems++, slot: this.items.length, hidden, kind, id, text: '', done: false, ...extra };
    this.items.push(item);
    if (hidden) return { item, text: '' };
    let added: JsonObject;
    if (kind === 'reasoning') added = { id, type: 'reasoning', summary: [] };
    else if (kind === 'message') added = messageItem(id, '', 'in_progress');
    else added = callItem(this.ctx, id, { id: item.call?.id ?? '', name: item.call?.name ?? '', args: '' }, 'in_progress');
    let out = this.event('response.output_item.added', { output_index: item.index, item: added });
    if (kind === 'message') out += this.event('response.content_part.added', { item_id: id, output_index: item.index, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
    if (kind === 'reasoning' && this.ctx.request.wantSummary) out += this.event('response.reasoning_summary_part.added', { item_id: id, output_index: item.index, summary_index: 0, part: { type: 'summary_text', text: '' } });
    return { item, text: out };
  }

  private closeItem(item: OpenItem): string {
    if (item.done) return '';
    item.done = true;
    let out = '';
    let client: JsonObject;
    let stored: JsonObject;
    if (item.kind === 'reasoning') {
      if (this.ctx.request.wantSummary) {
        out += this.event('response.reasoning_summary_text.done', { item_id: item.id, output_index: item.index, summary_index: 0, text: item.text });
        out += this.event('response.reasoning_summary_part.done', { item_id: item.id, output_index: item.index, summary_index: 0, part: { type: 'summary_text', text: item.text } });
      }
      const r = reasoningItem(this.ctx, item.id, item.parts ?? [], item.text, 'completed');
      client = r.client;
      stored = r.stored;
      if (this.reasoning === item) this.reasoning = undefined;
      if (item.hidden) {
        this.storedOutput[item.slot] = stored;
        return out;
      }
    } else if (item.kind === 'message') {
      out += this.event('response.output_text.done', { item_id: item.id, output_index: item.index, content_index: 0, text: item.text, logprobs: [] });
      out += this.event('response.content_part.done', { item_id: item.id, output_index: item.index, content_index: 0, part: { type: 'output_text', text: item.text, annotations: [], logprobs: [] } });
      client = stored = messageItem(item.id, item.text, 'completed');
      if (this.message === item) this.message = undefined;
    } else {
      const call = item.call ?? { id: '', name: '', args: '' };
      const args = call.args === '' ? '{}' : call.args;
      out += this.event('response.function_call_arguments.done', { item_id: item.id, output_index: item.index, ...callName(this.ctx, call.name), arguments: args });
      client = stored = callItem(this.ctx, item.id, { ...call, args }, 'completed');
    }
    this.clientOutput[item.index] = client;
    this.storedOutput[item.slot] = stored;
    return out + this.event('response.output_item.done', { output_index: item.index, item: client });
  }

  private closeTextual(): string {
    let out = '';
    if (this.reasoning !== undefined) out += this.closeItem(this.reasoning);
    if (this.message !== undefined) out += this.closeItem(this.message);
    return out;
  }

  encode(e: StreamEvent): string {
    let out = this.begin();
    switch (e.type) {
      case 'text': {
        if (e.text === '') return out;
        if (this.reasoning !== undefined) out += this.closeItem(this.reasoning);
        if (this.message === undefined) {
          const o = this.open('message', `msg_${base(this.ctx)}_${this.items.length}`);
          this.message = o.item;
          out += o.text;
        }
        this.message.text += e.text;
        return out + this.event('response.output_text.delta', { item_id: this.message.id, output_index: this.message.index, content_index: 0, delta: e.text, logprobs: [] });
      }
      case 'reasoning':
      case 'redacted_reasoning': {
        if (this.message !== undefined) out += this.closeItem(this.message);
        if (this.reasoning === undefined) {
          const o = this.open('reasoning', `rs_${base(this.ctx)}_${this.items.length}`, { parts: [] });
          this.reasoning = o.item;
          out += o.text;
        }
        const parts = this.reasoning.parts ?? [];
        if (e.type === 'redacted_reasoning') {
          parts.push({ type: 'thinking', text: e.data, redacted: true });
          return out;
        }
        const last = parts[parts.length - 1];
        if (last === undefined || last.redacted === true || last.signature !== undefined) parts.push({ type: 'thinking', text: e.text });
        else last.text += e.text;
        this.reasoning.text += e.text;
        return this.ctx.request.wantSummary ? out + this.event('response.reasoning_summary_text.delta', { item_id: this.reasoning.id, output_index: this.reasoning.index, summary_index: 0, delta: e.text }) : out;
      }
      case 'reasoning_signature': {
        const parts = this.reasoning?.parts;
        const last = parts?.[parts.length - 1];
        if (last !== undefined) last.signature = e.signature;
        return out;
      }
      case 'tool_call_start': {
        out += this.closeTextual();
        const o = this.open('call', `fc_${base(this.ctx)}_${this.items.length}`, { call: { id: e.id, name: e.name, args: '' } });
        this.calls.set(e.index, o.item);
        return out + o.text;
      }
      case 'tool_call_args': {
        const item = this.calls.get(e.index);
        if (item?.call === undefined || e.fragment === '') return out;
        item.call.args += e.fragment;
        return out + this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: item.index, delta: e.fragment });
      }
      default:
        return out;
    }
  }

  close(end: StreamEnd): string {
    let out = this.begin();
    // Never an empty output on success.
    if (this.sentItems === 0) {
      const o = this.open('message', `msg_${base(this.ctx)}_0`);
      this.message = o.item;
      out += o.text;
    }
    for (const item of this.items) out += this.closeItem(item);
    const { status, incomplete } = statusOf(end.finish);
    const body = envelope(this.ctx, { status, output: [...this.clientOutput], usage: withCost(responsesUsage(end.usage), end.costUsd), incomplete, completedAt: Math.floor(Date.now() / 1000) });
    this.final = { body, storedOutput: [...this.storedOutput] };
    return out + this.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: body });
  }

  fail(message: string, kind: StreamErrorKind): string {
    const code = kind === 'overloaded' ? 'server_is_overloaded' : 'server_error';
    let out = this.begin();
    for (const item of this.items) out += this.closeItem(item);
    const body = envelope(this.ctx, { status: 'failed', output: [...this.clientOutput], usage: null, error: { code, message } });
    this.final = { body, storedOutput: [...this.storedOutput] };
    return out + this.event('error', { code, message, param: null }) + this.event('response.failed', { response: body });
  }
}
