// Every credential the gateway sends an upstream, in each form an upstream could echo it back in. Read
// from what is actually sent (the headers and the URL), by the names the formats declare a credential
// travels under, so no format's key (Gemini's x-goog-api-key, its ?key=) is missed, whatever its shape.
import { UPSTREAM_FORMAT_NAMES, upstreamFormat } from '../formats/index.js';

/** Shorter values are no credential worth the name, and replacing them would mangle ordinary text. */
export const MIN_CREDENTIAL_CHARS = 8;

/** Every header a credential goes in: each format's own, and the catalog's choices (authorization, x-api-key). */
export const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set(['authorization', 'x-api-key', ...UPSTREAM_FORMAT_NAMES.map((f) => upstreamFormat(f).defaultCredentialsHeader)]);

/** Every query parameter a format takes a credential in. */
const CREDENTIAL_QUERY_PARAMETERS: ReadonlySet<string> = new Set(
  UPSTREAM_FORMAT_NAMES.flatMap((f) => {
    const name = upstreamFormat(f).credentialQueryParameter;
    return name === undefined ? [] : [name];
  }),
);

/** The forms a value may be echoed in: as sent, JSON-escaped, URL-encoded. */
function echoForms(value: string): string[] {
  return [value, JSON.stringify(value).slice(1, -1), encodeURIComponent(value)];
}

/**
 * The credentials in an upstream request's headers and path (with the catalog's header for this
 * upstream, `credentialsHeader`, whatever its name), longest first so a longer one is replaced before
 * any part of it could be.
 */
export function sentCredentials(headers: Readonly<Record<string, string>>, path: string, credentialsHeader?: string): string[] {
  const values: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (CREDENTIAL_HEADERS.has(lower) || lower === credentialsHeader) values.push(value.replace(/^Bearer\s+/i, ''));
  }
  const query = path.indexOf('?');
  if (query >= 0 && CREDENTIAL_QUERY_PARAMETERS.size > 0) {
    for (const [name, value] of new URLSearchParams(path.slice(query + 1))) if (CREDENTIAL_QUERY_PARAMETERS.has(name)) values.push(value);
  }
  const forms = new Set(values.flatMap(echoForms).filter((v) => v.length >= MIN_CREDENTIAL_CHARS));
  return [...forms].sort((a, b) => b.length - a.length);
}

/** `text` with every one of `secrets` replaced by `[redacted]`. */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  for (const secret of secrets) if (text.includes(secret)) text = text.replaceAll(secret, REDACTED);
  return text;
}

export const REDACTED = '[redacted]';
