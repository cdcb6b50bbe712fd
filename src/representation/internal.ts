/**
 * Format-neutral representation of a chat request, a finished response and a stream of response
 * events. Every wire format has one codec to and from these types, so two client formats and two
 * upstream formats need four codecs instead of a translation matrix.
 */

export type ReasoningEffort = 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh' | 'max';

export type ImageSource =
  | { kind: 'base64'; mediaType: string; data: string }
  | { kind: 'url'; url: string };

export type DocumentSource =
  | { kind: 'base64'; mediaType: string; data: string }
  | { kind: 'text'; text: string };

export interface TextPart { type: 'text'; text: string }
export interface ImagePart { type: 'image'; source: ImageSource }
export interface DocumentPart { type: 'document'; source: DocumentSource; title?: string }
/** A call the model made. `input` is always a JSON object (OpenAI's string arguments are parsed). */
export interface ToolCallPart { type: 'tool_call'; id: string; name: string; input: Record<string, unknown> }
export interface ToolResultPart {
  type: 'tool_result';
  toolCallId: string;
  content: Array<TextPart | ImagePart>;
  isError: boolean;
}
/** Model reasoning. `redacted` blocks carry opaque data in `text` and are only meaningful to Anthropic. */
export interface ThinkingPart { type: 'thinking'; text: string; signature?: string; redacted?: boolean }

export type ContentPart = TextPart | ImagePart | DocumentPart | ToolCallPart | ToolResultPart | ThinkingPart;

/** `system` messages are the ones that appear between turns (Claude Code sends one every turn). */
export interface InternalMessage { role: 'system' | 'user' | 'assistant'; content: ContentPart[] }

export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON Schema of the arguments, always an object schema. */
  parameters: Record<string, unknown>;
  strict?: boolean;
}

export type ToolChoice = { type: 'auto' } | { type: 'any' } | { type: 'none' } | { type: 'tool'; name: string };

export type ReasoningRequest =
  | { mode: 'disabled' }
  | { mode: 'enabled'; budgetTokens?: number; effort?: ReasoningEffort };

export interface ResponseFormat { type: 'json_schema'; schema: Record<string, unknown>; name?: string }

export interface InternalRequest {
  model: string;
  /** Leading system text, one entry per block. */
  system: string[];
  messages: InternalMessage[];
  tools: ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  stop: string[];
  reasoning?: ReasoningRequest;
  responseFormat?: ResponseFormat;
  stream: boolean;
  user?: string;
  /** OpenAI `n`: number of alternative completions requested. */
  choices?: number;
}

/** Why generation ended, in neutral words (mapped per format in stop-reason.ts). */
export type FinishReason = 'stop' | 'stop_sequence' | 'length' | 'tool_calls' | 'content_filter' | 'pause' | 'context_window';

/**
 * Token usage in one convention: `input` includes cache reads and cache writes. The three cache classes
 * are parts of `input` and apart from each other (a token is in at most one), as each is priced on its own.
 */
export interface NormalizedUsage {
  /** All prompt tokens, including cached reads and cache writes. */
  input: number;
  /** Prompt tokens read from a prompt cache. */
  cacheRead: number;
  /** Prompt tokens written to a prompt cache kept 5 minutes (every write whose lifetime is not reported). */
  cacheWrite5m: number;
  /** Prompt tokens written to a prompt cache kept 1 hour. */
  cacheWrite1h: number;
  output: number;
  /** Reasoning tokens, a subset of `output`. */
  reasoning: number;
  /**
   * The upstream's report cannot be billed by (a count missing, negative or not a number): the
   * counts above are clamped for the client's eyes, and the exchange estimates the charge instead.
   */
  unbillable?: true;
  /**
   * The prompt's counts cannot be billed by (its count missing or not a number): a cut exchange then
   * charges the prompt by its own count rather than by this report. Apart from `unbillable`: a report
   * without its output count (Anthropic's message_start, Gemini's chunks) still has a billable prompt.
   */
  promptUnbillable?: true;
}

export interface InternalResponse {
  id: string;
  model: string;
  /** Only text, thinking and tool_call parts. */
  content: Array<TextPart | ThinkingPart | ToolCallPart>;
  finishReason: FinishReason;
  stopSequence: string | null;
  usage: NormalizedUsage;
}

export type StreamErrorKind = 'overloaded' | 'api_error' | 'timeout';

/**
 * Events decoded from an upstream stream. Tool-call `index` counts tool calls only (0, 1, …),
 * whatever the upstream used as block index.
 */
export type StreamEvent =
  | { type: 'start'; id?: string; model?: string }
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'reasoning_signature'; signature: string }
  | { type: 'redacted_reasoning'; data: string }
  | { type: 'tool_call_start'; index: number; id: string; name: string }
  | { type: 'tool_call_args'; index: number; fragment: string }
  | { type: 'finish'; reason: FinishReason; stopSequence?: string | null }
  /** A full snapshot (set, never add): the latest known value of every counter. */
  | { type: 'usage'; usage: NormalizedUsage }
  | { type: 'error'; message: string; kind: StreamErrorKind }
  /** Upstream said it is complete (`[DONE]` / `message_stop`). */
  | { type: 'done' };

