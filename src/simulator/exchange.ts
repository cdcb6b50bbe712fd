// One request/response in flight: the log record, error bodies in each wire format, and an SSE writer
// that applies stream faults, pacing and client-abort detection in one place.
import type { PromptCache } from './prompt-cache.js';
import type { ToolScript } from './reply.js';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { FaultSpec } from './faults.js';
import { once } from 'node:events';

export type SimFormat = 'openai' | 'anthropic' | 'gemini';

export interface SimulatedRequest {
  /** Sequence number within this simulator (1, 2, ...); also the `req_sim_<id>` request-id header. */
  id: number;
  method: string;
  /** Path without the query string. */
  path: string;
  query: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body (undefined when there was none or it did not parse). */
  body: unknown;
  model: string | undefined;
  stream: boolean;
  /** HTTP status sent (0 while none). */
  status: number;
  inputTokens: number;
  /** Of `inputTokens`, those reported as read from a prompt cache. */
  cachedInputTokens: number;
  /** Of `inputTokens`, those reported as written to a prompt cache kept 5 minutes (Anthropic format and scripts). */
  cacheWrite5mTokens: number;
  /** Of `inputTokens`, those reported as written to a prompt cache kept 1 hour. */
  cacheWrite1hTokens: number;
  /** Output tokens actually written to the socket (streams: per chunk, so an abort stops the count). */
  outputTokensSent: number;
  /** The client went away before the reply finished. */
  aborted: boolean;
  /** The reply was completely written. */
  finished: boolean;
  /** A stall fault holds the reply now (FaultSpec.stallAt, stallAfterChunks): accepted, and waiting. */
  stalled: boolean;
  fault: FaultSpec | undefined;
  startedAt: number;
}

const OPENAI_TYPES: Record<number, [string, string | null]> = {
  400: ['invalid_request_error', null],
  401: ['invalid_request_error', 'invalid_api_key'],
  403: ['permission_error', null],
  404: ['invalid_request_error', 'not_found'],
  429: ['rate_limit_error', 'rate_limit_exceeded'],
  503: ['service_unavailable_error', 'server_is_overloaded'],
};
const ANTHROPIC_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  409: 'conflict_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

/** Gemini's status names (google.rpc.Code) for the HTTP statuses the simulator answers with. */
const GEMINI_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

export function errorBody(format: SimFormat, status: number, message: string, code?: string): unknown {
  if (format === 'gemini') return { error: { code: status, message, status: GEMINI_STATUS[status] ?? (status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT') } };
  if (format === 'anthropic') {
    const type = ANTHROPIC_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
    return { type: 'error', error: { type, message } };
  }
  const [type, defCode] = OPENAI_TYPES[status] ?? [status >= 500 ? 'server_error' : 'invalid_request_error', null];
  return { error: { message, type, param: null, code: code ?? defCode } };
}

export function inBandError(format: SimFormat, message: string): string {
  if (format === 'gemini') return `data: ${JSON.stringify({ error: { code: 503, message, status: 'UNAVAILABLE' } })}\r\n\r\n`;
  if (format === 'anthropic') {
    return `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message } })}\n\n`;
  }
  return `data: ${JSON.stringify({ error: { message, type: 'server_error', param: null, code: null } })}\n\n`;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Exchange {
  /** The client went away (or we cut the socket): stop generating. */
  closed = false;
  private cutByUs = false;
  private chunks = 0;
  private corked = false;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly format: SimFormat,
    readonly record: SimulatedRequest,
    readonly fault: FaultSpec | undefined,
    readonly firstTokenDelayMs: number,
    readonly tokenDelayMs: number,
    private readonly onChange: () => void,
  ) {
    res.on('close', () => {
      if (!res.writableFinished) {
        this.closed = true;
        if (!this.cutByUs) record.aborted = true;
      }
      onChange();
    });
    res.on('finish', () => {
      record.finished = true;
    });
  }

  json(status: number, body: unknown, outputTokens = 0): void {
    if (this.closed) return;
    const text = JSON.stringify(body);
    this.record.status = status;
    this.res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...this.idHeader(),
    });
    const f = this.fault;
    if (status < 300 && (f?.stallAt !== undefined || f?.cutMidBody === true)) {
      void this.heldJson(Buffer.from(text), outputTokens, f);
      return;
    }
    this.record.outputTokensSent += outputTokens;
    this.res.end(text);
  }

  /** A whole reply under a stall or mid-body cut fault: its headers at once, its body in two halves. */
  private async heldJson(body: Buffer, outputTokens: number, f: FaultSpec): Promise<void> {
    this.res.flushHeaders();
    if (f.stallAt === 'headers') await this.stall();
    const half = Math.floor(body.length / 2);
    if (f.stallAt === 'mid-body' || f.cutMidBody === true) {
      if (this.closed) return;
      this.res.write(body.subarray(0, half));
      if (f.cutMidBody === true) return this.cut();
      await this.stall();
    }
    if (this.closed) return;
    this.record.outputTokensSent += outputTokens;
    this.res.end(f.stallAt === 'mid-body' ? body.subarray(half) : body);
  }

  /** Holds the reply for the fault's stallMs, flagged on the record (the test acts meanwhile). */
  private async stall(): Promise<void> {
    if (this.closed) return;
    if (this.corked) this.res.uncork();
    this.corked = false;
    this.record.stalled = true;
    this.onChange();
    // Over early when the client goes away: nothing is left to hold.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([once(this.res, 'close'), new Promise((r) => (timer = setTimeout(r, this.fault?.stallMs ?? 10_000)))]);
    clearTimeout(timer);
    this.record.stalled = false;
    this.onChange();
  }

  error(status: number, message: string, code?: string): void {
    this.json(status, errorBody(this.format, status, message, code));
  }

  /** Drops the connection: before the headers nothing is sent; mid-stream what was written still arrives. */
  cut(): void {
    this.cutByUs = true;
    this.closed = true;
    const socket = this.res.socket;
    if (!socket) return;
    if (!this.res.headersSent) return void socket.destroy();
    if (this.corked) this.res.uncork();
    this.corked = false;
    socket.end(); // flushes the chunks already written, then closes without the chunked terminator
  }

  async startStream(): Promise<void> {
    this.record.status = 200;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      ...this.idHeader(),
    });
    if (this.fault?.stallAt === 'headers') {
      this.res.flushHeaders();
      await this.stall();
    }
    // Unpaced streams are written in one burst; corking turns them into few socket writes.
    if (this.firstTokenDelayMs === 0 && this.tokenDelayMs === 0) {
      this.res.cork();
      this.corked = true;
    }
  }

  /** Writes one SSE frame that carries `tokens` output tokens; false when the stream must stop. */
  send(frame: string, tokens: number): boolean {
    if (this.closed) return false;
    const f = this.fault;
    if (f) {
      const n = this.chunks;
      if (f.cutAfterChunks === n) {
        this.cut();
        return false;
      }
      if (f.errorEventAfterChunks === n) {
        this.res.write(inBandError(this.format, f.message ?? 'Simulated upstream failure'));
        this.end();
        return false;
      }
      if (f.malformedAfterChunks === n) this.res.write('data: {not json\n\n');
    }
    this.chunks++;
    this.res.write(frame);
    this.record.outputTokensSent += tokens;
    return true;
  }

  end(): void {
    if (this.corked) this.res.uncork();
    this.corked = false;
    if (!this.closed) this.res.end();
  }

  /**
   * A sender that waits `tokenDelayMs` before every frame but the first (the first token's delay is
   * the caller's): how every stream paces its tokens.
   */
  pacedSender(): (frame: string, tokens: number) => Promise<boolean> {
    let first = true;
    let stalled = false;
    const stallAfter = this.fault?.stallAfterChunks;
    return async (frame, tokens) => {
      if (!first) await this.pause(this.tokenDelayMs);
      first = false;
      if (stallAfter !== undefined && !stalled && this.chunks >= stallAfter) {
        stalled = true;
        await this.stall();
      }
      return this.send(frame, tokens);
    };
  }

  /** Pacing between tokens; flushes the burst first so the client sees what was sent so far. */
  async pause(ms: number): Promise<void> {
    if (ms <= 0 || this.closed) return;
    if (this.corked) {
      this.res.uncork();
      this.corked = false;
    }
    await sleep(ms);
  }

  private idHeader(): Record<string, string> {
    const id = `req_sim_${this.record.id}`;
    return this.format === 'anthropic' ? { 'request-id': id } : { 'x-request-id': id };
  }
}

/** Per-simulator settings and counters the format handlers need. */
export interface SimContext {
  replyTokens: number;
  reasoningTokens: number;
  isReasoningModel(model: string): boolean;
  /** The model name a reply reports for the requested one. */
  replyModel(model: string): string;
  thinkingSecret: Buffer;
  /** Anthropic-format reasoning models think unless thinking is disabled (SimulatorOptions.anthropicThinksUnasked). */
  anthropicThinksUnasked?: boolean;
  /** Unique sequence for response, tool-call and message ids. */
  nextId(): number;
  /** A scripted tool call (SimulatorOptions.toolScript). */
  toolScript?: ToolScript;
  /** What of a prompt is reported as read from or written to a prompt cache (prompt-cache.ts). */
  promptCache: PromptCache;
}

export type Json = { [k: string]: unknown };

/** A positive integer field, `undefined` when absent, or an error string. */
export function positiveInt(body: Json, field: string, max = Number.MAX_SAFE_INTEGER): number | undefined | string {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) return `${field}: must be a positive integer`;
  if (v > max) return `${field}: must be at most ${max}`;
  return v;
}

/**
 * The longest reply a request may ask the simulator for with `sim_reply_tokens`: a reply is planned in
 * memory before it is sent, so the knob is bounded (an unbounded one let one request exhaust the heap).
 */
export const MAX_SIM_REPLY_TOKENS = 65_536;
