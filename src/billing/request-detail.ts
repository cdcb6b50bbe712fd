// What the usage record keeps of a request beyond its money and tokens: the HTTP status the client got,
// the finish reason, the upstream that served it, whether the model refused, and the time to the first
// token. It travels through the settle script as one field (no per-field arguments on the hot path)
// and is written to the record's own columns by the journal.
export interface RequestDetail {
  httpStatus?: number;
  finishReason?: string;
  upstream?: string;
  /** The model declined to answer (a refusal or content-filter stop): the holder may ask for a refund. */
  modelRefused?: boolean;
  /** Milliseconds from the request's start to the first token the client was sent (streams). */
  ttftMs?: number;
}

// Finish reasons by which a model declines: Anthropic's `refusal`, OpenAI's `content_filter` and
// `refusal`, Gemini's SAFETY-like stops (as they reach us, lower case or not).
const REFUSALS = new Set(['refusal', 'content_filter', 'safety', 'prohibited_content', 'blocklist', 'spii', 'recitation']);

export function isModelRefusal(finishReason: string | undefined): boolean {
  return finishReason !== undefined && REFUSALS.has(finishReason.toLowerCase());
}

/** A field of the one-line form: no tab or newline inside, and a bounded length. */
const field = (s: string | undefined): string => (s === undefined ? '' : s.replace(/[\t\n\r]/g, ' ').slice(0, 200));

/** The detail as one Redis stream field: five tab-separated parts, empty where unknown. */
export function encodeRequestDetail(d: RequestDetail | undefined): string {
  if (d === undefined) return '';
  return `${d.httpStatus ?? ''}\t${field(d.finishReason)}\t${field(d.upstream)}\t${d.modelRefused === true ? '1' : ''}\t${d.ttftMs ?? ''}`;
}

const int = (s: string | undefined): number | undefined => {
  if (s === undefined || s === '') return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
};

export function decodeRequestDetail(s: string | undefined): RequestDetail | undefined {
  if (s === undefined || s === '') return undefined;
  const [status, finish, upstream, refused, ttft] = s.split('\t');
  const d: RequestDetail = {};
  const httpStatus = int(status);
  if (httpStatus !== undefined) d.httpStatus = httpStatus;
  if (finish) d.finishReason = finish;
  if (upstream) d.upstream = upstream;
  if (refused === '1') d.modelRefused = true;
  const ttftMs = int(ttft);
  if (ttftMs !== undefined) d.ttftMs = ttftMs;
  return d;
}
