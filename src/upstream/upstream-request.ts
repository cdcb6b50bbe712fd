// One HTTP exchange with an upstream, with its timeouts, and failures sorted into the classes
// that decide retry, fallback and the status the client sees.
import type { IncomingHttpHeaders } from 'node:http';
import { errors as undiciErrors, type Dispatcher } from 'undici';
import type { CatalogUpstream } from '../catalog/snapshot.js';
import type { UpstreamTarget } from './dispatchers.js';
import { upstreamFormat } from '../formats/index.js';
import { redactedBody, type UpstreamBody } from './redacted-body.js';
import { redactSecrets, sentCredentials } from './sent-credentials.js';

export type UpstreamFailureKind = 'connect' | 'timeout' | 'status' | 'aborted';

export class UpstreamFailure extends Error {
  constructor(
    readonly kind: UpstreamFailureKind,
    readonly upstreamStatus: number | undefined,
    /** The upstream's own error message, read by its format module (never shown to clients unsanitised). */
    readonly upstreamMessage: string | undefined,
    message: string,
    readonly retryAfter?: string,
  ) {
    super(message);
    this.name = 'UpstreamFailure';
  }

  /** Worth trying the next upstream (or again) before anything reached the client. */
  get retryable(): boolean {
    if (this.kind === 'aborted') return false;
    if (this.kind !== 'status') return true;
    const s = this.upstreamStatus ?? 0;
    return s === 408 || s === 429 || s >= 500;
  }
}

export function classifyTransportError(err: unknown): UpstreamFailure {
  if (err instanceof UpstreamFailure) return err;
  const e = err as { name?: string; code?: string; message?: string };
  if (e.name === 'AbortError' || e.code === 'UND_ERR_ABORTED') return new UpstreamFailure('aborted', undefined, undefined, 'request aborted');
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return new UpstreamFailure('timeout', undefined, undefined, 'upstream timed out');
  }
  if (err instanceof undiciErrors.ConnectTimeoutError) return new UpstreamFailure('timeout', undefined, undefined, 'upstream connect timed out');
  return new UpstreamFailure('connect', undefined, undefined, `upstream connection failed (${e.code ?? e.name ?? 'error'})`);
}

/**
 * `text` with every credential the gateway sent an upstream (in `headers`) removed: an upstream may echo
 * the key it refused, in a form no pattern would recognise (any format of provider key).
 */
export function withoutSecrets(text: string, headers: Record<string, string>): string {
  return redactSecrets(text, sentCredentials(headers, ''));
}

/** An upstream's answer as the relays read it: its body with the credentials it was sent already removed. */
export interface UpstreamResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: UpstreamBody;
}

export async function sendUpstream(
  target: UpstreamTarget,
  upstream: CatalogUpstream,
  body: string | Buffer,
  headers: Record<string, string>,
  signal: NonNullable<Dispatcher.RequestOptions['signal']>,
): Promise<UpstreamResponse> {
  let response: Dispatcher.ResponseData;
  try {
    response = await target.pool.request({
      path: target.path,
      method: 'POST',
      headers,
      body,
      signal,
      headersTimeout: upstream.timeouts.firstByteMs,
      bodyTimeout: upstream.timeouts.idleMs,
    });
  } catch (err) {
    throw classifyTransportError(err);
  }
  // Every byte the gateway reads of the answer, success or error, comes without the credentials it sent.
  const answer = redactedBody(response.body, sentCredentials(headers, target.path, upstream.credentialsHeader));
  if (response.statusCode >= 200 && response.statusCode < 300) return { statusCode: response.statusCode, headers: response.headers, body: answer };
  let text: string | undefined;
  try {
    text = await answer.text();
  } catch {
    text = undefined;
  }
  const retryAfter = response.headers['retry-after'];
  throw new UpstreamFailure(
    'status',
    response.statusCode,
    text === undefined ? undefined : upstreamFormat(upstream.format).errorMessage(text),
    `upstream answered ${response.statusCode}`,
    typeof retryAfter === 'string' ? retryAfter : undefined,
  );
}
