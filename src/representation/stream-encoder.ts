/** What every client-format stream encoder does with internal stream events. */
import type { FinishReason, NormalizedUsage, StreamErrorKind, StreamEvent } from './internal.js';

export interface StreamEnd {
  /** Already forced to tool calls when a tool call was emitted. */
  finish: FinishReason;
  stopSequence: string | null;
  usage: NormalizedUsage;
  /** False when the upstream never reported usage (then input counts are unknown). */
  usageReported: boolean;
  /** What the request is charged, in USD, for the final usage event's `usage.cost` (absent: not known). */
  costUsd?: number;
}

export interface StreamEncoder {
  /** SSE text for one content event (start, text, reasoning, tool calls); "" when nothing to send. */
  encode(e: StreamEvent): string;
  /** Closes open blocks and writes the final events. */
  close(end: StreamEnd): string;
  /** In-band error after the 200 was sent; the response must end afterwards. */
  fail(message: string, kind: StreamErrorKind): string;
}
