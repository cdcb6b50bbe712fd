// Respond first, settle after: a complete non-streaming answer is written and ended before the
// settlement's ledger round trip, so the client's last byte never waits on Redis. The settlement still
// runs within the request (the drain waits for it) and through the settlement queue, which keeps and
// retries it until it lands. Streams need nothing here: their relay ends them before settling.
import type { GatewayContext } from '../request/state.js';

/** Sends the JSON (or text) body the relay set, and tells Koa the response is done. */
export function respondBeforeSettling(ctx: GatewayContext): void {
  const res = ctx.res;
  if (res.headersSent || res.writableEnded || ctx.status !== 200) return;
  const body: unknown = ctx.body;
  let payload: string | Buffer;
  if (typeof body === 'string' || Buffer.isBuffer(body)) payload = body;
  else if (body !== null && typeof body === 'object' && typeof (body as { pipe?: unknown }).pipe !== 'function') payload = JSON.stringify(body);
  else return;
  ctx.respond = false;
  res.setHeader('content-length', Buffer.byteLength(payload));
  res.end(payload);
}
