/**
 * OpenAI chat.completion.chunk stream -> internal stream events (docs/wire-formats.md A.6, C.9).
 * Tolerates `choices: []` chunks, ids repeated on every tool fragment, whole arguments in one
 * chunk, a missing `index`, usage on any chunk, and keep-alive payloads that are not JSON.
 */
import { arr, isRecord, randomId, str, type SseEvent, type StreamErrorKind, type StreamEvent } from '../../representation/index.js';
import { relayableUpstreamMessage } from '../../wire/upstream-message.js';
import { finishFromOpenAI } from './finish.js';
import { usageFromOpenAI } from './usage.js';

export class OpenAIStreamDecoder {
  private started = false;
  /** Upstream tool key (its `index`, or its id when the index is missing) -> our tool index. */
  private readonly toolKeys = new Map<string, number>();
  private lastTool = -1;

  decode(ev: SseEvent): StreamEvent[] {
    const data = ev.data.trim();
    if (data === '[DONE]') return [{ type: 'done' }];
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      return [];
    }
    if (!isRecord(chunk)) return [];
    if (chunk.error) return [openAIStreamError(chunk.error)];

    const out: StreamEvent[] = [];
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', ...(str(chunk.id) ? { id: str(chunk.id) } : {}), ...(str(chunk.model) ? { model: str(chunk.model) } : {}) });
    }
    for (const choice of arr(chunk.choices)) {
      // n=1 is all a cross-format client can receive; other choices are ignored.
      if (!isRecord(choice) || (typeof choice.index === 'number' && choice.index !== 0)) continue;
      const delta = isRecord(choice.delta) ? choice.delta : {};
      const reasoning = str(delta.reasoning_content) ?? str(delta.reasoning);
      if (reasoning) out.push({ type: 'reasoning', text: reasoning });
      const text = str(delta.content);
      if (text) out.push({ type: 'text', text });
      for (const tc of arr(delta.tool_calls)) if (isRecord(tc)) this.toolDelta(tc, out);
      const finish = finishFromOpenAI(choice.finish_reason);
      if (finish) out.push({ type: 'finish', reason: finish });
    }
    if (isRecord(chunk.usage)) out.push({ type: 'usage', usage: usageFromOpenAI(chunk.usage) });
    return out;
  }

  private toolDelta(tc: Record<string, unknown>, out: StreamEvent[]): void {
    const id = str(tc.id);
    const fn = isRecord(tc.function) ? tc.function : {};
    let key: string | undefined;
    if (typeof tc.index === 'number') key = `i${tc.index}`;
    else if (id) key = `d${id}`;
    let index = key !== undefined ? this.toolKeys.get(key) : this.lastTool >= 0 ? this.lastTool : undefined;
    // A new tool call starts on a new index, not whenever an `id` shows up (some servers repeat it).
    if (index === undefined) {
      index = this.toolKeys.size;
      this.toolKeys.set(key ?? `i${index}`, index);
      out.push({ type: 'tool_call_start', index, id: id || randomId('call_'), name: str(fn.name) ?? '' });
    }
    this.lastTool = index;
    const args = str(fn.arguments);
    if (args) out.push({ type: 'tool_call_args', index, fragment: args });
  }
}

export function openAIStreamError(error: unknown): StreamEvent {
  const e = isRecord(error) ? error : {};
  const type = `${str(e.type) ?? ''} ${str(e.code) ?? ''}`;
  const kind: StreamErrorKind = /overload|unavailable/.test(type) ? 'overloaded' : /timeout/.test(type) ? 'timeout' : 'api_error';
  const message = str(e.message);
  return { type: 'error', message: message === undefined ? 'Upstream error' : relayableUpstreamMessage(message), kind };
}
