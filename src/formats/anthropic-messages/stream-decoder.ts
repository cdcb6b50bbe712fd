/**
 * Anthropic Messages SSE stream -> internal stream events (docs/wire-formats.md B.4, C.6, C.9).
 * Usage is cumulative: each counter keeps its last non-null value and every usage event is a full
 * snapshot. Tool blocks are renumbered 0,1,… counting tool blocks only.
 */
import { isRecord, num, randomId, str, type SseEvent, type StreamErrorKind, type StreamEvent } from '../../representation/index.js';
import { relayableUpstreamMessage } from '../../wire/upstream-message.js';
import { finishFromAnthropic } from './finish.js';
import { mergeAnthropicUsage, usageFromAnthropicCounters, type AnthropicUsageCounters } from './usage.js';

interface BlockState {
  tool?: number;
  /** Input sent whole in content_block_start (some compatible vendors), used if no deltas follow. */
  startInput?: string;
  gotDelta: boolean;
}

export class AnthropicStreamDecoder {
  private readonly counters: AnthropicUsageCounters = {};
  private readonly blocks = new Map<number, BlockState>();
  private tools = 0;

  decode(ev: SseEvent): StreamEvent[] {
    let data: unknown;
    try {
      data = JSON.parse(ev.data);
    } catch {
      return [];
    }
    if (!isRecord(data)) return [];
    const type = str(data.type) ?? ev.event;
    const out: StreamEvent[] = [];
    switch (type) {
      case 'message_start': {
        const msg = isRecord(data.message) ? data.message : {};
        out.push({ type: 'start', ...(str(msg.id) ? { id: str(msg.id) } : {}), ...(str(msg.model) ? { model: str(msg.model) } : {}) });
        if (isRecord(msg.usage)) out.push(this.usage(msg.usage));
        break;
      }
      case 'content_block_start':
        this.blockStart(num(data.index) ?? 0, isRecord(data.content_block) ? data.content_block : {}, out);
        break;
      case 'content_block_delta':
        this.blockDelta(num(data.index) ?? 0, isRecord(data.delta) ? data.delta : {}, out);
        break;
      case 'content_block_stop': {
        const b = this.blocks.get(num(data.index) ?? 0);
        if (b?.tool !== undefined && !b.gotDelta && b.startInput) out.push({ type: 'tool_call_args', index: b.tool, fragment: b.startInput });
        break;
      }
      case 'message_delta': {
        if (isRecord(data.usage)) out.push(this.usage(data.usage));
        const delta = isRecord(data.delta) ? data.delta : {};
        const reason = finishFromAnthropic(delta.stop_reason);
        if (reason) out.push({ type: 'finish', reason, stopSequence: str(delta.stop_sequence) ?? null });
        break;
      }
      case 'message_stop':
        out.push({ type: 'done' });
        break;
      case 'error':
        out.push(anthropicStreamError(data.error));
        break;
      default:
        break; // ping and unknown events
    }
    return out;
  }

  private usage(u: Record<string, unknown>): StreamEvent {
    mergeAnthropicUsage(this.counters, u);
    return { type: 'usage', usage: usageFromAnthropicCounters(this.counters) };
  }

  private blockStart(index: number, block: Record<string, unknown>, out: StreamEvent[]): void {
    const state: BlockState = { gotDelta: false };
    this.blocks.set(index, state);
    if (block.type === 'text' && str(block.text)) out.push({ type: 'text', text: block.text as string });
    else if (block.type === 'thinking' && str(block.thinking)) out.push({ type: 'reasoning', text: block.thinking as string });
    else if (block.type === 'redacted_thinking') out.push({ type: 'redacted_reasoning', data: str(block.data) ?? '' });
    else if (block.type === 'tool_use') {
      state.tool = this.tools++;
      out.push({ type: 'tool_call_start', index: state.tool, id: str(block.id) || randomId('toolu_'), name: str(block.name) ?? '' });
      if (isRecord(block.input) && Object.keys(block.input).length > 0) state.startInput = JSON.stringify(block.input);
    }
  }

  private blockDelta(index: number, delta: Record<string, unknown>, out: StreamEvent[]): void {
    switch (delta.type) {
      case 'text_delta':
        if (str(delta.text)) out.push({ type: 'text', text: delta.text as string });
        break;
      case 'thinking_delta':
        if (str(delta.thinking)) out.push({ type: 'reasoning', text: delta.thinking as string });
        break;
      case 'signature_delta':
        if (str(delta.signature)) out.push({ type: 'reasoning_signature', signature: delta.signature as string });
        break;
      case 'input_json_delta': {
        const b = this.blocks.get(index);
        const fragment = str(delta.partial_json);
        if (b?.tool !== undefined && fragment) {
          b.gotDelta = true;
          out.push({ type: 'tool_call_args', index: b.tool, fragment });
        }
        break;
      }
      default:
        break;
    }
  }
}

export function anthropicStreamError(error: unknown): StreamEvent {
  const e = isRecord(error) ? error : {};
  const kind: StreamErrorKind = e.type === 'overloaded_error' ? 'overloaded' : e.type === 'timeout_error' ? 'timeout' : 'api_error';
  const message = str(e.message);
  return { type: 'error', message: message === undefined ? 'Upstream error' : relayableUpstreamMessage(message), kind };
}
