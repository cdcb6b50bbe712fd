// The internal representation: the one neutral shape of a request, a reply and a stream's events that
// every format's codecs (src/formats/<format>/) decode into and encode from, and the helpers they
// share. This is the only module of src/representation that anything outside it imports.
export type {
  ContentPart,
  DocumentPart,
  FinishReason,
  ImagePart,
  InternalMessage,
  InternalRequest,
  InternalResponse,
  NormalizedUsage,
  ReasoningEffort,
  ReasoningRequest,
  StreamErrorKind,
  StreamEvent,
  TextPart,
  ThinkingPart,
  ToolChoice,
  ToolCallPart,
  ToolDefinition,
  ToolResultPart,
} from './internal.js';
export { TranslationError } from './errors.js';
export { arr, isRecord, num, parseArguments, randomId, str, type JsonObject } from './json.js';
export { parseDataUrl, toDataUrl } from './data-url.js';
export type { SseEvent } from './sse-event.js';
export type { StreamEncoder, StreamEnd } from './stream-encoder.js';
export type { StreamDecoder } from './stream-translator.js';
export { effectiveFinish } from './stop-reason.js';
export { openaiCacheDetails, openaiCacheWrites, tokenCount, usageFromOpenAIShape } from './usage.js';
