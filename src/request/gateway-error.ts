// One error type for everything the gateway refuses; it is rendered in the caller's wire format
// by the error middleware, so handlers never build error bodies themselves.

export interface GatewayErrorOptions {
  /** Machine-readable code, e.g. `model_not_found`, `invalid_api_key`, `insufficient_balance`. */
  code: string;
  /** The request field at fault, as a path like `messages[2].content`. */
  param?: string;
  /** Extra fields placed in the error object (e.g. amounts of a 402). */
  details?: Record<string, unknown>;
  /** Seconds the client should wait before retrying (sets retry-after). */
  retryAfterSeconds?: number;
  /** Headers the answer carries besides the error body (rate-limit state, retry-after-ms). */
  headers?: Record<string, string>;
  /** A 429 a retry cannot cure (a request larger than the key's whole token limit): the SDKs are told not to retry. */
  final?: boolean;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly code: string;
  readonly param: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly headers: Record<string, string> | undefined;
  readonly final: boolean;

  constructor(status: number, message: string, opts: GatewayErrorOptions) {
    super(message);
    this.name = 'GatewayError';
    this.status = status;
    this.code = opts.code;
    this.param = opts.param;
    this.details = opts.details;
    this.retryAfterSeconds = opts.retryAfterSeconds;
    this.headers = opts.headers;
    this.final = opts.final === true;
  }
}

