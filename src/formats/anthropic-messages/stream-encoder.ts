/**
 * Internal stream events -> Anthropic Messages SSE (docs/wire-formats.md B.4, C.9 A<-O).
 * Every event has its `event:` line; blocks are indexed 0,1,2 in start order and never
 * interleaved; a thinking block ends with a signature; a tool block always starts with `input:{}`
 * and always carries valid JSON (`{}` when the upstream sent no arguments).
 */
import type { NormalizedUsage, StreamEncoder, StreamEnd, StreamErrorKind, StreamEvent } from '../../representation/index.js';
import { finishToAnthropic } from './finish.js';
import { gatewaySignature } from './thinking-signature.js';
import { usageToAnthropic } from './usage.js';
import { withCost } from '../../wire/usage-cost.js';

export interface AnthropicStreamEncoderOptions {
  id: string;
  model: string;
  requestId: string;
  /** Input tokens for message_start when the upstream has not reported usage yet. */
  inputTokenEstimate: number;
  /** Usage known so far (an upstream that reports input early gives real counts to message_start). */
  currentUsage: () => NormalizedUsage | undefined;
}

type OpenBlock =
  | { kind: 'text'; index: number }
  | { kind: 'thinking'; index: number; signature?: string }
  | { kind: 'tool'; index: number; tool: number; hasArgs: boolean };

const ERROR_TYPES: Record<StreamErrorKind, string> = {
  overloaded: 'overloaded_error',
  api_error: 'api_error',
  timeout: 'timeout_error',
};

export class AnthropicStreamEncoder implements StreamEncoder {
  private started = false;
  private open: OpenBlock | undefined;
  private nextIndex = 0;

  constructor(private readonly opts: AnthropicStreamEncoderOptions) {}

  encode(e: StreamEvent): string {
    let out = this.start();
    switch (e.type) {
      case 'text':
        if (this.open?.kind !== 'text') out += this.openBlock({ kind: 'text', index: this.nextIndex }, { type: 'text', text: '' });
        out += this.delta({ type: 'text_delta', text: e.text });
        break;
      case 'reasoning':
        if (this.open?.kind !== 'thinking') out += this.openBlock({ kind: 'thinking', index: this.nextIndex }, { type: 'thinking', thinking: '', signature: '' });
        out += this.delta({ type: 'thinking_delta', thinking: e.text });
        break;
      case 'reasoning_signature':
        if (this.open?.kind === 'thinking') this.open.signature = e.signature;
        break;
      case 'redacted_reasoning':
        out += this.openBlock({ kind: 'text', index: this.nextIndex }, { type: 'redacted_thinking', data: e.data });
        out += this.closeBlock();
        break;
      case 'tool_call_start':
        out += this.openBlock({ kind: 'tool', index: this.nextIndex, tool: e.index, hasArgs: false }, { type: 'tool_use', id: e.id, name: e.name, input: {} });
        break;
      case 'tool_call_args':
        // Never a delta for a block that is not open: Claude Code fails with "Content block not found".
        if (this.open?.kind === 'tool' && this.open.tool === e.index) {
          if (e.fragment.trim() !== '') this.open.hasArgs = true;
          out += this.delta({ type: 'input_json_delta', partial_json: e.fragment });
        }
        break;
      default:
        break;
    }
    return out;
  }

  close(end: StreamEnd): string {
    let out = this.start() + this.closeBlock();
    const usage = usageToAnthropic(end.usage);
    out += this.event('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: finishToAnthropic(end.finish), stop_sequence: end.finish === 'stop_sequence' ? end.stopSequence : null },
      // Without reported usage, input counts are unknown: leave message_start's estimate standing.
      usage: withCost(end.usageReported ? usage : { output_tokens: usage.output_tokens }, end.costUsd),
    });
    return out + this.event('message_stop', { type: 'message_stop' });
  }

  fail(message: string, kind: StreamErrorKind): string {
    return this.event('error', { type: 'error', error: { type: ERROR_TYPES[kind], message } });
  }

  private start(): string {
    if (this.started) return '';
    this.started = true;
    const known = this.opts.currentUsage();
    const usage = known && known.input > 0
      ? { ...usageToAnthropic(known), output_tokens: Math.max(1, known.output) }
      : { input_tokens: this.opts.inputTokenEstimate, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    return this.event('message_start', {
      type: 'message_start',
      message: {
        id: this.opts.id, type: 'message', role: 'assistant', model: this.opts.model,
        content: [], stop_reason: null, stop_sequence: null, usage,
      },
    });
  }

  private openBlock(block: OpenBlock, contentBlock: Record<string, unknown>): string {
    const out = this.closeBlock();
    this.open = block;
    this.nextIndex++;
    return out + this.event('content_block_start', { type: 'content_block_start', index: block.index, content_block: contentBlock });
  }

  private closeBlock(): string {
    const b = this.open;
    if (!b) return '';
    this.open = undefined;
    let out = '';
    if (b.kind === 'thinking') {
      out += this.deltaAt(b.index, { type: 'signature_delta', signature: b.signature ?? gatewaySignature(this.opts.requestId) });
    } else if (b.kind === 'tool' && !b.hasArgs) {
      // An empty input would be "Invalid tool parameters" to Claude Code.
      out += this.deltaAt(b.index, { type: 'input_json_delta', partial_json: '{}' });
    }
    return out + this.event('content_block_stop', { type: 'content_block_stop', index: b.index });
  }

  private delta(delta: Record<string, unknown>): string {
    return this.open ? this.deltaAt(this.open.index, delta) : '';
  }

  private deltaAt(index: number, delta: Record<string, unknown>): string {
    return this.event('content_block_delta', { type: 'content_block_delta', index, delta });
  }

  private event(name: string, payload: unknown): string {
    return `event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`;
  }
}
