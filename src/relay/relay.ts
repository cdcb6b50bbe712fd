// What relaying one upstream response to the client produced: the upstream's own usage when it
// reported one, else the generated text to estimate from, and how the exchange ended.
import type { RequestStatus, TokenUsage } from '../billing/ledger.js';
import type { PromptUsage } from './billable-usage.js';
import type { GatewayContext } from '../request/state.js';
import type { JsonObject } from '../wire/json-shape.js';
import type { UpstreamResponse } from '../upstream/upstream-request.js';

export interface RelayOutcome {
  /** Usage as the upstream reported it; undefined when it never arrived (cut streams). */
  usage: TokenUsage | undefined;
  /**
   * The prompt's usage as the upstream reported it before its final usage (Anthropic's message_start,
   * Gemini's chunks), cache classes and all: what a cut exchange is charged for its prompt.
   */
  reportedPrompt?: PromptUsage;
  /** Generated text pieces (answer, reasoning, tool arguments), to estimate output when usage is missing. */
  generated: string[];
  /** The reasoning part of `generated`. */
  reasoningGenerated: string[];
  status: RequestStatus;
  finishReason: string | undefined;
  /** performance.now() of the first generated token relayed (time to first token). */
  firstTokenAt: number | undefined;
  /** The model the upstream said answered (its reply's `model`), for traces. */
  responseModel?: string;
  /**
   * A whole (non-stream) answer's `usage` object in the body the relay set: the exchange writes the
   * charge into it (`cost`) before the body is sent, once the usage to settle is known.
   */
  answerUsage?: JsonObject | undefined;
}

export interface RelayInput {
  ctx: GatewayContext;
  /** The upstream's answer, the credentials it was sent already removed from its body. */
  response: UpstreamResponse;
  /** Whether the client has disconnected (read when the upstream stream ends). */
  cancellation: { readonly clientGone: boolean; readonly writeTimeoutMs?: number; readonly keepAliveMs?: number; readonly cutByShutdown?: boolean };
  /**
   * Removes the credentials the gateway sent this upstream from text relayed to the client: an
   * upstream's in-band error may echo them, in a form no pattern recognises. Default: unchanged.
   */
  redact?: (text: string) => string;
  /**
   * What settling a usage will charge, in USD as the answer's `usage.cost` carries it: a stream's final
   * usage event reports it. Absent, streams carry no cost.
   */
  costUsd?: (usage: TokenUsage) => number;
}

export const unredacted = (text: string): string => text;

export type Relay = (input: RelayInput) => Promise<RelayOutcome>;

export function emptyOutcome(status: RequestStatus): RelayOutcome {
  return { usage: undefined, generated: [], reasoningGenerated: [], status, finishReason: undefined, firstTokenAt: undefined };
}
