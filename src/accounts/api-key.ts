// API key secrets: generation, hashing, the dashboard hint and the shape check the gateway runs
// before any lookup. Nothing here ever returns or logs the secret itself.
import { hash, randomBytes } from 'node:crypto';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Random characters after the prefix: 43 base62 chars carry 43·log2(62) ≈ 256 bits. */
export const API_KEY_RANDOM_LENGTH = 43;

/** `n` base62 characters from the CSPRNG, unbiased (bytes >= 248 = 4·62 are rejected). */
export function randomBase62(n: number): string {
  let out = '';
  while (out.length < n) {
    const bytes = randomBytes(Math.ceil((n - out.length) * 1.1) + 4);
    for (const b of bytes) {
      if (b < 248) out += BASE62[b % 62];
      if (out.length === n) break;
    }
  }
  return out;
}

export function apiKeyPrefix(marker: string): string {
  return `sk-${marker}-`;
}

export function generateApiKey(marker: string): string {
  return apiKeyPrefix(marker) + randomBase62(API_KEY_RANDOM_LENGTH);
}

/** SHA-256 hex: the only form in which a key is stored. The secret has 256 bits, so no salt or KDF is needed. */
export function hashApiKey(secret: string): string {
  // The one-shot hash: about a third of the cost of createHash().update().digest(), on every request.
  return hash('sha256', secret, 'hex');
}

/** What the dashboard shows after creation, e.g. `sk-tg-AbCd…wxyz`. */
export function keyDisplayHint(secret: string): string {
  const dash = secret.lastIndexOf('-');
  const prefix = dash >= 0 ? secret.slice(0, dash + 1) : '';
  const random = secret.slice(prefix.length);
  return `${prefix}${random.slice(0, 4)}…${random.slice(-4)}`;
}

const BASE62_RE = /^[A-Za-z0-9]+$/;

export function isWellFormedKey(secret: string, marker: string): boolean {
  const prefix = apiKeyPrefix(marker);
  if (!secret.startsWith(prefix)) return false;
  const random = secret.slice(prefix.length);
  return random.length >= API_KEY_RANDOM_LENGTH && BASE62_RE.test(random);
}

/**
 * Why a presented key cannot be a key of this service, in words a person can act on;
 * undefined when it is well formed. Never quotes the presented value.
 */
export function describeMalformedKey(secret: string, marker: string): string | undefined {
  const prefix = apiKeyPrefix(marker);
  if (secret.length === 0) return 'No API key was given.';
  if (secret.trim().length === 0) return 'The API key is blank (only spaces).';
  if (/^bearer\s/i.test(secret.trim())) {
    return 'The API key value starts with the word "Bearer": write "Bearer" only once, followed by the key.';
  }
  if (secret !== secret.trim()) return 'The API key has spaces before or after it; send the key without them.';
  if (/\s/.test(secret)) return 'The API key contains spaces or line breaks inside it; send it exactly as issued.';
  if (!secret.startsWith(prefix)) return `The API key does not start with "${prefix}"; check that it is a key of this service.`;
  const random = secret.slice(prefix.length);
  const bad = random.search(/[^A-Za-z0-9]/);
  if (bad >= 0) {
    return `The API key contains a character that never appears in a key (at position ${prefix.length + bad + 1}); only letters and digits follow "${prefix}".`;
  }
  if (random.length < API_KEY_RANDOM_LENGTH) {
    const missing = API_KEY_RANDOM_LENGTH - random.length;
    return `The API key is too short: ${missing} character${missing === 1 ? ' is' : 's are'} missing; copy the whole key.`;
  }
  return undefined;
}
