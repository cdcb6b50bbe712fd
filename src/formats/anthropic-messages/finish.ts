// Messages' stop_reason <-> the neutral finish reason (docs/wire-formats.md C.5).
import type { FinishReason } from '../../representation/index.js';

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
