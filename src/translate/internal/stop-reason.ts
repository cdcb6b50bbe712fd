/** Stop reason <-> finish reason (wire-formats C.5). */
import type { FinishReason } from './internal.js';

export function finishFromAnthropic(stopReason: unknown): FinishReason | undefined {
  switch (stopReason) {
    case 'end_turn': return 'stop';
    case 'stop_sequence': return 'stop_sequence';
    case 'max_tokens': return 'length';
    case 'tool_use': return 'tool_calls';
    case 'refusal': return 'content_filter';
    case 'pause_turn': return 'pause';
    case 'model_context_window_exceeded': return 'context_window';
    default: return typeof stopReason === 'string' ? 'stop' : undefined;
  }
}

export function finishToAnthropic(r: FinishReason): string {
  switch (r) {
    case 'stop': return 'end_turn';
    case 'stop_sequence': return 'stop_sequence';
    case 'length': return 'max_tokens';
    case 'tool_calls': return 'tool_use';
    case 'content_filter': return 'refusal';
    case 'pause': return 'pause_turn';
    case 'context_window': return 'model_context_window_exceeded';
  }
}

export function finishFromOpenAI(finishReason: unknown): FinishReason | undefined {
  switch (finishReason) {
    case 'stop': return 'stop';
    case 'length': return 'length';
    case 'tool_calls':
    case 'function_call': return 'tool_calls';
    case 'content_filter': return 'content_filter';
    default: return typeof finishReason === 'string' ? 'stop' : undefined;
  }
}

export function finishToOpenAI(r: FinishReason): string {
  switch (r) {
    case 'stop':
    case 'stop_sequence':
    case 'pause': return 'stop';
    case 'length':
    case 'context_window': return 'length';
    case 'tool_calls': return 'tool_calls';
    case 'content_filter': return 'content_filter';
  }
}

/** Clients ignore tool calls unless the stop reason says so; some upstreams report `stop` anyway. */
export function effectiveFinish(reason: FinishReason | undefined, toolCalled: boolean): FinishReason {
  if (toolCalled) return 'tool_calls';
  return reason ?? 'stop';
}
