// Chat completions' finish_reason <-> the neutral finish reason (docs/wire-formats.md C.5).
import type { FinishReason } from '../../representation/index.js';

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
