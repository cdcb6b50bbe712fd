// What the gateway must know to talk to an upstream of one wire format, in one place per format: where
// its endpoints are under a base URL, how the credential is sent, the headers every call carries, and
// how its error bodies read. The request path (dispatchers, exchange, translate pairs) and the
// operator's health probe all read it here.
import type { WireFormat } from '../../wire/format.js';

export type CredentialsHeader = 'authorization' | 'x-api-key';

/** Protocol headers the client sent that an upstream of the same format should see. */
export interface ClientProtocolHeaders {
  'anthropic-version'?: string;
  'anthropic-beta'?: string;
}

export interface UpstreamFormat {
  format: WireFormat;
  /** The chat endpoint's path under a base URL's path (no trailing slash). */
  chatPath(basePath: string): string;
  /** The model list's path under a base URL's path: the health probe's target. */
  modelsPath(basePath: string): string;
  /** The header the credential goes in unless the catalog says otherwise. */
  defaultCredentialsHeader: CredentialsHeader;
  /** Headers every call needs; `client` carries the client's own when it speaks this format too. */
  protocolHeaders(client?: ClientProtocolHeaders): Record<string, string>;
  /** The message of an error body this format's servers answer with, if the body is one. */
  errorMessage(body: string): string | undefined;
}

/** `{"error": {"message": …}}`: where both formats put an error's message (Anthropic adds `"type": "error"`). */
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
export function credentialHeaders(header: CredentialsHeader, secret: string): Record<string, string> {
  return header === 'authorization' ? { authorization: `Bearer ${secret}` } : { [header]: secret };
}
