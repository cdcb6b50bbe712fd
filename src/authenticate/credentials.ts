// Finds the API key in a request and, when it cannot, says exactly what is wrong (spec 5 and 7):
// a doubled Bearer, stray spaces, a missing scheme, a key in the wrong header. Never echoes the key.
import type { IncomingHttpHeaders } from 'node:http';

export type CredentialResult =
  | { ok: true; secret: string; header: 'authorization' | 'x-api-key' }
  | { ok: false; code: string; message: string };

const fail = (code: string, message: string): CredentialResult => ({ ok: false, code, message });

/** Headers clients put keys in by mistake (Azure style, other gateways). */
const WRONG_HEADERS = ['api-key', 'openai-api-key', 'anthropic-api-key', 'x-goog-api-key', 'apikey', 'x-auth-token', 'token'];

const KNOWN_SCHEMES = new Map(['Basic', 'Digest', 'Token', 'ApiKey', 'Api-Key', 'Key', 'OAuth', 'Negotiate', 'HMAC', 'AWS4-HMAC-SHA256'].map((name) => [name.toLowerCase(), name]));

function inspectBearer(value: string): CredentialResult {
  const match = /^(\S+)(\s+)([\s\S]*)$/.exec(value);
  if (!match) {
    if (/^bearer$/i.test(value)) return fail('missing_api_key', 'The Authorization header says "Bearer" but holds no key; send `Authorization: Bearer <key>`.');
    return fail('invalid_authorization_header', 'The Authorization header has no scheme; send `Authorization: Bearer <key>` (the word Bearer, one space, then the key).');
  }
  const [, scheme = '', gap = '', rest = ''] = match;
  if (scheme.toLowerCase() !== 'bearer') {
    // The scheme is named only when it is a well-known one: anything else may be (part of) a key.
    const known = KNOWN_SCHEMES.get(scheme.toLowerCase());
    const which = known === undefined ? 'a scheme other than Bearer' : `the "${known}" scheme`;
    return fail('invalid_authorization_header', `The Authorization header uses ${which}; Tollgate takes \`Authorization: Bearer <key>\`.`);
  }
  if (/^bearer(\s|$)/i.test(rest)) {
    return fail('invalid_api_key', 'The Authorization header says "Bearer" twice ("Bearer Bearer <key>"). Write Bearer once: if your client adds it, set only the key.');
  }
  if (gap !== ' ' || /\s/.test(rest)) {
    return fail('invalid_api_key', 'The API key has stray spaces in it or around it. Send `Authorization: Bearer <key>` with exactly one space after Bearer and none inside the key.');
  }
  if (rest === '') return fail('missing_api_key', 'The Authorization header holds no key after "Bearer".');
  return { ok: true, secret: rest, header: 'authorization' };
}

function inspectApiKeyHeader(value: string): CredentialResult {
  if (/^bearer(\s|$)/i.test(value)) {
    return fail('invalid_api_key', 'The x-api-key header takes the key alone: remove "Bearer " from it (or send `Authorization: Bearer <key>` instead).');
  }
  if (/\s/.test(value)) return fail('invalid_api_key', 'The API key in x-api-key has stray spaces in it; send the key exactly as it was shown.');
  if (value === '') return fail('missing_api_key', 'The x-api-key header is empty.');
  return { ok: true, secret: value, header: 'x-api-key' };
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

const CONFLICT = 'The request carries two different credentials, one in Authorization and one in x-api-key. Send one key: `Authorization: Bearer <key>` or `x-api-key: <key>` (both only when they hold the same key).';
const REPEATED = 'The request repeats a credential header with different values. Send one key, once: `Authorization: Bearer <key>` or `x-api-key: <key>`.';

/**
 * True when a credential header appears more than once with different values. Node keeps only the
 * first Authorization header (and joins repeated x-api-key ones), so the raw list is the only place
 * a second key shows.
 */
function repeatsDiffer(rawHeaders: readonly string[]): boolean {
  let authorization: string | undefined;
  let apiKey: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    const value = rawHeaders[i + 1] as string;
    if (name === 'authorization') {
      if (authorization !== undefined && authorization !== value) return true;
      authorization = value;
    } else if (name === 'x-api-key') {
      if (apiKey !== undefined && apiKey !== value) return true;
      apiKey = value;
    }
  }
  return false;
}

export function findCredential(headers: IncomingHttpHeaders, url: string, keyPrefix: string, rawHeaders: readonly string[] = []): CredentialResult {
  if (repeatsDiffer(rawHeaders)) return fail('conflicting_api_keys', REPEATED);
  const authorization = single(headers.authorization);
  const apiKey = single(headers['x-api-key']);
  if (authorization !== undefined && authorization !== '') {
    const bearer = inspectBearer(authorization);
    // Both may be sent when they hold the same key (Claude Code's apiKeyHelper does); two different
    // keys leave it unclear whom to bill, so neither is used.
    if (bearer.ok && apiKey !== undefined && apiKey !== '' && bearer.secret !== apiKey) {
      return fail('conflicting_api_keys', CONFLICT);
    }
    return bearer;
  }
  if (apiKey !== undefined) return inspectApiKeyHeader(apiKey);
  for (const name of WRONG_HEADERS) {
    const value = single(headers[name]);
    if (value !== undefined && value.includes(keyPrefix)) {
      return fail('api_key_in_wrong_header', `The key was sent in the "${name}" header, which Tollgate does not read. Send it as \`Authorization: Bearer <key>\` (or \`x-api-key: <key>\`).`);
    }
  }
  if (url.includes(keyPrefix)) {
    return fail('api_key_in_wrong_header', 'The key was sent in the URL, where it leaks into logs. Send it as `Authorization: Bearer <key>` (or `x-api-key: <key>`), then revoke this key and create a new one.');
  }
  return fail('missing_api_key', 'No API key was sent. Send `Authorization: Bearer <key>` (or `x-api-key: <key>`).');
}
