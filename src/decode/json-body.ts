// Reads a size-limited, time-limited JSON body. It runs after the key is checked, so an anonymous
// client cannot make the gateway read (or wait for) a body at all. Refused here, each in the caller's
// wire format: a body over the size limit (413), one not received in time (408), one nested deeper
// than MAX_JSON_DEPTH (400; deeper values overflowed the stack later and gave a 500), bad JSON (400).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Next } from 'koa';
import { GatewayError } from '../request/gateway-error.js';
import type { GatewayContext } from '../request/state.js';
import type { MemberSpan } from '../request/client-body.js';

/** Deepest nesting of arrays and objects accepted; real requests (tool schemas included) stay far below. */
export const MAX_JSON_DEPTH = 128;

export interface JsonBodyOptions {
  limitBytes: number;
  /** The whole body must arrive within this many milliseconds of the key being accepted; 0 = no deadline. */
  readTimeoutMs: number;
  maxDepth?: number;
}


/**
 * Tracks the nesting depth of JSON text fed to it in chunks, outside strings, and where each member of
 * the top-level object sits (same-format pairs edit those members in the client's bytes). Linear,
 * allocation free and run on each chunk as it arrives, so a too-deep body is refused before the rest
 * is read.
 */
export class JsonDepthGauge {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Bytes fed before the current chunk. */
  private offset = 0;
  /** At depth 1 after `{` or `,`: the next quote opens a key. */
  private expectKey = false;
  private memberStart = -1;
  private keyEnd = -1;
  /** The top-level object's members, in order (meaningful once the whole body is fed and parses). */
  readonly members: MemberSpan[] = [];
  constructor(private readonly max: number) {}

  /** False once the nesting passes the maximum. */
  feed(chunk: Uint8Array): boolean {
    let { depth, inString } = this;
    const max = this.max;
    const n = chunk.length;
    let i = 0;
    // The byte after a backslash that ended the last chunk is escaped, whatever it is.
    if (this.escaped && n > 0) {
      this.escaped = false;
      i = 1;
    }
    while (i < n) {
      if (inString) {
        // Most of a request is string content: jump to the next quote natively, then look back for
        // the backslashes that would escape it (an odd run does). Counting stops at i, so a
        // backslash escaped across the chunk boundary is never counted again.
        const q = chunk.indexOf(0x22, i);
        const end = q < 0 ? n : q;
        let run = 0;
        while (end - run - 1 >= i && chunk[end - run - 1] === 0x5c) run++;
        if (q < 0) {
          this.escaped = run % 2 === 1;
          break;
        }
        if (run % 2 === 0) {
          inString = false;
          // The first string of a top-level member is its key.
          if (depth === 1 && this.memberStart >= 0 && this.keyEnd < 0) this.keyEnd = this.offset + q;
        }
        i = q + 1;
        continue;
      }
      const b = chunk[i] as number;
      if (b === 0x22) {
        inString = true;
        if (depth === 1 && this.expectKey) {
          this.expectKey = false;
          this.memberStart = this.offset + i;
        }
      } else if (b === 0x7b || b === 0x5b) {
        if (++depth > max) {
          this.depth = depth;
          return false;
        }
        if (depth === 1) this.expectKey = b === 0x7b;
      } else if (b === 0x7d || b === 0x5d) {
        if (depth-- === 1) this.closeMember(this.offset + i);
      } else if (b === 0x2c && depth === 1) {
        this.closeMember(this.offset + i);
        this.expectKey = true;
      }
      i++;
    }
    this.offset += n;
    this.depth = depth;
    this.inString = inString;
    return true;
  }

  private closeMember(end: number): void {
    if (this.memberStart < 0) return;
    this.members.push({ start: this.memberStart, keyEnd: this.keyEnd, end });
    this.memberStart = -1;
    this.keyEnd = -1;
  }
}

type ReadFailure = 'too_large' | 'timeout' | 'too_deep' | 'incomplete';

class BodyReadError extends Error {
  constructor(readonly reason: ReadFailure) {
    super(reason);
  }
}

function readBody(req: IncomingMessage, res: ServerResponse, limitBytes: number, timeoutMs: number, gauge: JsonDepthGauge): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limitBytes) return Promise.reject(new BodyReadError('too_large'));
  // A client that hung up while its key was being checked: its stream is destroyed and will emit
  // nothing more ('close' has fired already), so waiting would hold the request until the deadline.
  if (req.destroyed) return Promise.reject(new BodyReadError('incomplete'));
  // The server holds back `100 Continue` (its checkContinue handler) until here: only a request whose
  // key was accepted and whose declared size fits is invited to send its body.
  if (req.headers.expect?.toLowerCase() === '100-continue' && !res.headersSent) res.writeContinue();
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const finish = (err: BodyReadError | undefined): void => {
      if (timer !== undefined) clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (err === undefined) {
        resolve(Buffer.concat(chunks, received));
        return;
      }
      // Stop taking bytes in; the refusal closes the connection (see renderError).
      req.pause();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limitBytes) return finish(new BodyReadError('too_large'));
      if (!gauge.feed(chunk)) return finish(new BodyReadError('too_deep'));
      chunks.push(chunk);
    };
    const onEnd = (): void => finish(undefined);
    const onError = (): void => finish(new BodyReadError('incomplete'));
    const onClose = (): void => finish(new BodyReadError('incomplete'));
    // 0 turns the deadline off (Node's own requestTimeout still ends the request eventually).
    const timer = timeoutMs > 0 ? setTimeout(() => finish(new BodyReadError('timeout')), timeoutMs) : undefined;
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function refusal(reason: ReadFailure, opts: JsonBodyOptions, maxDepth: number): GatewayError {
  switch (reason) {
    case 'too_large':
      return new GatewayError(413, `Request body is larger than the limit of ${opts.limitBytes} bytes; send fewer or smaller messages or images.`, { code: 'request_too_large' });
    case 'timeout':
      return new GatewayError(408, `The request body was not received within ${opts.readTimeoutMs / 1000} s of the request's headers; send the whole body at once, on a faster connection or in a smaller request.`, { code: 'request_timeout' });
    case 'too_deep':
      return new GatewayError(400, `Request body nests arrays and objects more than ${maxDepth} levels deep; no request needs that many, flatten the deepest value.`, { code: 'invalid_json' });
    case 'incomplete':
      return new GatewayError(400, 'The request body could not be read completely (the connection ended or Content-Length was wrong).', { code: 'invalid_body' });
  }
}

export function jsonBody(opts: JsonBodyOptions) {
  const maxDepth = opts.maxDepth ?? MAX_JSON_DEPTH;
  return async function jsonBodyMiddleware(ctx: GatewayContext, next: Next): Promise<void> {
    if (ctx.method !== 'POST') return next();
    let raw: Buffer;
    const gauge = new JsonDepthGauge(maxDepth);
    try {
      raw = await readBody(ctx.req, ctx.res, opts.limitBytes, opts.readTimeoutMs, gauge);
    } catch (err) {
      if (err instanceof BodyReadError) throw refusal(err.reason, opts, maxDepth);
      throw err;
    }
    if (raw.length === 0) {
      throw new GatewayError(400, 'Request body is empty; send a JSON object with Content-Type: application/json.', { code: 'invalid_json' });
    }
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      // V8's message quotes part of the body; report only where parsing stopped.
      const position = err instanceof Error ? /position (\d+)/.exec(err.message)?.[1] : undefined;
      const where = position === undefined ? '' : ` (parsing stopped at byte ${position})`;
      throw new GatewayError(400, `Request body is not valid JSON${where}; send a JSON object with Content-Type: application/json.`, { code: 'invalid_json' });
    }
    ctx.state.rawBody = { bytes: raw, members: gauge.members };
    ctx.state.body = body;
    return next();
  };
}
