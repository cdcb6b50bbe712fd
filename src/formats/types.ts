// What Tollgate must know of one wire format, by role. A client format is one clients speak to the
// gateway; an upstream format is one the gateway speaks to a provider. Each format's folder
// (src/formats/<format>/) implements the roles it has and registers them in index.ts; a member missing
// from a new format is a compile error there, not a request silently sent down another format's path.
import type {
  FinishReason,
  InternalRequest,
  InternalResponse,
  JsonObject,
  NormalizedUsage,
  StreamDecoder,
  StreamEncoder,
} from '../representation/index.js';
import type { ImageSize } from '../wire/image-tokens.js';

/** An error as the gateway reports it, before a format gives it its body shape. */
export interface ErrorFields {
  status: number;
  message: string;
  code: string;
  param?: string | undefined;
  details?: Record<string, unknown> | undefined;
}

/** What a whole reply's encoder needs to know of the request. */
export interface ResponseEncodeContext {
  clientModel: string;
  requestId: string;
}

export interface StreamEncodeContext extends ResponseEncodeContext {
  /** OpenAI clients: whether they asked for `stream_options.include_usage`. */
  includeUsage: boolean;
  /** Our count of the prompt, for a stream that opens with input tokens before the upstream reported any. */
  inputTokenEstimate: number;
  /** Usage the upstream has reported so far (an upstream that reports input early gives real counts). */
  currentUsage(): NormalizedUsage | undefined;
}

/** A format clients speak (chat completions, messages), for translated exchanges and errors. */
/** A key's rate limits after a reservation (billing's RateLimitState): what the answer's headers say. */
export interface RateLimitHeaderState {
  requests?: { limit: number; remaining: number };
  tokens?: { limit: number; remaining: number };
  /** Milliseconds until the request and token window starts again. */
  resetMs: number;
}

export interface ClientFormat {
  /**
   * The rate-limit headers this format's SDKs and tools read, for a key with limits (on answers and on
   * 429s alike); `nowMs` is the unix time the reset is counted from.
   */
  rateLimitHeaders(state: RateLimitHeaderState, nowMs: number): Record<string, string>;
  /** An error body in this format's shape. */
  errorBody(e: ErrorFields): JsonObject;
  /** The status an overloaded upstream is reported with: the one this format's SDKs retry as overload. */
  overloadedStatus: number;
  /** The header this format's SDKs read the request id from, besides `x-request-id` (if another). */
  requestIdHeader: string | undefined;
  /** The client's request body in the internal representation (throws TranslationError). */
  decodeRequest(body: unknown): InternalRequest;
  encodeResponse(r: InternalResponse, ctx: ResponseEncodeContext): JsonObject;
  /** The id a translated whole reply gets instead of the one derived from the upstream's, if any. */
  replyId(requestId: string): string | undefined;
  /** A neutral finish reason in this format's words (what the request log records). */
  finishReason(r: FinishReason): string;
  streamEncoder(ctx: StreamEncodeContext): StreamEncoder;
  /** The stream's opening reports input tokens (Anthropic's message_start): the prompt is counted before it. */
  opensWithInputTokens: boolean;
  /**
   * Whether this request gets the model's reasoning in its reply. Reasoning is billed either way (the
   * upstream generated it); a client that did not ask for it is not sent it, as its own API would not.
   */
  showsReasoning(req: InternalRequest): boolean;
}

/** Protocol headers the client sent that an upstream of the same format should see. */
export interface ClientProtocolHeaders {
  'anthropic-version'?: string;
  'anthropic-beta'?: string;
}

/** What a reply generated, in order, for estimating usage an upstream did not report. */
export interface GeneratedPieces {
  generated: string[];
  reasoningGenerated: string[];
  finishReason?: string | undefined;
}

/** An image where an upstream reads one, as the worst case counts it. */
export interface ImageFootprint {
  /** Its vision tokens, bounded from its decoded size. */
  tokens: number;
  /** Bytes of its payload (base64 data, URL) as they appear in the JSON text. */
  payloadBytes: number;
}

/** A PDF where an upstream reads one, as the worst case counts it. */
export interface DocumentFootprint {
  /** Its page tokens: pages (the format's most when they cannot be read) × the format's tokens a page. */
  tokens: number;
  /** Bytes of its payload in the JSON text that are not billed as text (0 when its text is, too). */
  payloadBytes: number;
}

/** How an upstream of a format bills a PDF document, for the worst case. */
export interface PdfBilling {
  /** Tokens one page costs beyond the document's text (its image, or its fixed price). */
  tokensPerPage: number;
  /** The most pages this format's servers take in a request: a PDF whose pages cannot be counted is taken at this. */
  maxPages: number;
  /** Whether its text is billed besides (then its bytes stay counted as text, which bounds that text). */
  textBilled: boolean;
}

/** How an upstream of a format bills an image's vision tokens, for the worst case. */
export interface ImageBilling {
  /** The most tokens one image of this size can cost at any upstream of this format. */
  tokens(size: ImageSize): number;
  /**
   * The most an image whose size cannot be read can cost; undefined when nothing bounds it (a format
   * that bills by tiles with no largest image), and then such an image is refused before anything is reserved.
   */
  unknownSizeTokens: number | undefined;
}

/** What the worst case needs of an upstream body besides its bytes. */
export interface BodyShape {
  /** Messages, a separate system prompt counted as one. */
  messages: number;
  images: ImageFootprint[];
  documents: DocumentFootprint[];
  /** Prompt tokens the upstream adds that are not in the body (Anthropic's tool-use system prompt). */
  addedTokens: number;
}

export interface UpstreamEncodeContext {
  /** Model name sent to the upstream. */
  upstreamModel: string;
  supportsReasoning: boolean;
  /** Output cap when the client sent none (a format that requires one, and its thinking budget). */
  defaultMaxOutputTokens: number;
  /** The output limit the reservation covers, then the upstream gets no other; absent, the request's own. */
  outputLimit?: number | undefined;
}

/** A format upstreams speak: where and how to call them, and the codecs of a translated exchange. */
export interface UpstreamFormat {
  /** The generation endpoint's path under a base URL's path (no trailing slash). */
  chatPath(basePath: string, upstreamModel: string, stream: boolean): string;
  /** The model list's path under a base URL's path: the health probe's target. */
  modelsPath(basePath: string): string;
  /** The header the credential goes in unless the catalog says otherwise. */
  defaultCredentialsHeader: string;
  /**
   * The query parameter this format's servers also take the credential in (Gemini's `key`), if any: a
   * value found there in an upstream's URL was sent as a credential, and is redacted like the header's.
   */
  credentialQueryParameter: string | undefined;
  /** Headers every call needs; `client` carries the client's own when it speaks this format too. */
  protocolHeaders(client?: ClientProtocolHeaders): Record<string, string>;
  /** The message of an error body this format's servers answer with, if the body is one. */
  errorMessage(body: string): string | undefined;
  /** The internal request as this format's body, with `outputLimit` (when given) as its only output limit. */
  encodeRequest(req: InternalRequest, ctx: UpstreamEncodeContext): JsonObject;
  decodeResponse(json: unknown): InternalResponse;
  streamDecoder(): StreamDecoder;
  /** What a whole reply generated (text, reasoning, tool calls). */
  collectGenerated(reply: JsonObject, into: GeneratedPieces): void;
  /** How its servers bill a PDF (pages, text), for the worst case. */
  pdf: PdfBilling;
  /** How its servers bill an image, for the worst case. */
  image: ImageBilling;
  /** Messages, images, documents and added prompt tokens of a request body of this format, for the worst case. */
  bodyShape(request: JsonObject): BodyShape;
}

/** `{"error": {"message": …}}`: where OpenAI, Anthropic (which adds `"type": "error"`) and Gemini put an error's message. */
export function nestedErrorMessage(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    const error = (parsed as { error?: unknown }).error;
    if (typeof error !== 'object' || error === null) return undefined;
    const message = (error as { message?: unknown }).message;
    return typeof message === 'string' ? message : undefined;
  } catch {
    return undefined;
  }
}

/** The credential as its header wants it: `Bearer <secret>` in Authorization, the bare secret elsewhere. */
export function credentialHeaders(header: string, secret: string): Record<string, string> {
  return header === 'authorization' ? { authorization: `Bearer ${secret}` } : { [header]: secret };
}
