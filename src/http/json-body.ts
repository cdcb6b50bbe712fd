// Reads a size-limited JSON body (raw-body does the limit and length checks).
import getRawBody from 'raw-body';
import type { Next } from 'koa';
import { GatewayError } from './gateway-error.js';
import type { GatewayContext } from './state.js';

interface RawBodyError extends Error {
  type?: string;
  limit?: number;
}

export function jsonBody(limitBytes: number) {
  return async function jsonBodyMiddleware(ctx: GatewayContext, next: Next): Promise<void> {
    if (ctx.method !== 'POST') return next();
    let raw: Buffer;
    try {
      raw = await getRawBody(ctx.req, { limit: limitBytes, length: ctx.headers['content-length'] });
    } catch (err) {
      const e = err as RawBodyError;
      if (e.type === 'entity.too.large') {
        throw new GatewayError(413, `Request body is larger than the limit of ${limitBytes} bytes; send fewer or smaller messages or images.`, { code: 'request_too_large' });
      }
      throw new GatewayError(400, 'The request body could not be read completely (the connection ended or Content-Length was wrong).', { code: 'invalid_body' });
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
    ctx.state.rawBody = raw;
    ctx.state.body = body;
    return next();
  };
}
