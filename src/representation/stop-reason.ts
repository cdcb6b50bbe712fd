/** What every format's finish mapping shares. */
import type { FinishReason } from './internal.js';

/** Clients ignore tool calls unless the stop reason says so; some upstreams report `stop` anyway. */
export function effectiveFinish(reason: FinishReason | undefined, toolCalled: boolean): FinishReason {
  if (toolCalled) return 'tool_calls';
  return reason ?? 'stop';
}
