/**
 * Gemini's streamGenerateContent?alt=sse -> internal stream events. Each event is a whole
 * GenerateContentResponse carrying the new parts; function calls arrive whole, never in fragments.
 * There is no end marker: the chunk with the finish reason (and the final usageMetadata) is the last.
 */
import { isRecord, str, type SseEvent, type StreamErrorKind, type StreamEvent } from '../../representation/index.js';
import { relayableUpstreamMessage } from '../../wire/upstream-message.js';
import { finishFromGemini } from './finish.js';
import { candidateParts, firstCandidate, replyPart } from './parts.js';
import { usageFromGemini } from './usage.js';

export class GeminiStreamDecoder {
  private started = false;
  private tools = 0;

  decode(ev: SseEvent): StreamEvent[] {
    let chunk: unknown;
    try {
      chunk = JSON.parse(ev.data);
    } catch {
      return [];
    }
    if (!isRecord(chunk)) return [];
    if (chunk.error !== undefined) return [geminiStreamError(chunk.error)];
    const out: StreamEvent[] = [];
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', ...(str(chunk.responseId) ? { id: str(chunk.responseId) } : {}), ...(str(chunk.modelVersion) ? { model: str(chunk.modelVersion) } : {}) });
    }
    const candidate = firstCandidate(chunk);
    for (const p of candidateParts(candidate)) {
      const part = replyPart(p);
      if (part === undefined) continue;
      if (part.type === 'text') {
        if (part.text !== '') out.push({ type: 'text', text: part.text });
      } else if (part.type === 'thinking') {
        if (part.text !== '') out.push({ type: 'reasoning', text: part.text });
      } else {
        const index = this.tools++;
        out.push({ type: 'tool_call_start', index, id: part.id, name: part.name }, { type: 'tool_call_args', index, fragment: JSON.stringify(part.input) });
      }
    }
    const blocked = candidate === undefined && isRecord(chunk.promptFeedback) && chunk.promptFeedback.blockReason !== undefined;
    const finish = blocked ? 'content_filter' : finishFromGemini(candidate?.finishReason);
    if (isRecord(chunk.usageMetadata)) out.push({ type: 'usage', usage: usageFromGemini(chunk.usageMetadata) });
    if (finish !== undefined) out.push({ type: 'finish', reason: finish }, { type: 'done' });
    return out;
  }
}

/** An error event in a stream: {"error": {"code", "message", "status"}}. */
function geminiStreamError(error: unknown): StreamEvent {
  const e = isRecord(error) ? error : {};
  const status = `${str(e.status) ?? ''} ${typeof e.code === 'number' ? e.code : ''}`;
  const kind: StreamErrorKind = /UNAVAILABLE|RESOURCE_EXHAUSTED|503|429/.test(status) ? 'overloaded' : /DEADLINE|504/.test(status) ? 'timeout' : 'api_error';
  const message = str(e.message);
  return { type: 'error', message: message === undefined ? 'Upstream error' : relayableUpstreamMessage(message), kind };
}
