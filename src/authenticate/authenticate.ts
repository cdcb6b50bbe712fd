// Authenticates the key of every request. Lookups are cached for a short TTL so the hot path
// usually makes no Redis round trip, while a revocation still takes effect within the TTL
// on every gateway process (the reserve script also refuses revoked keys at once). A key in use is
// read again in the background once its entry is past half its TTL, so its requests do not wait for
// the read when the entry would have expired; an entry is never used past its TTL. Answers for unknown
// keys are cached apart from known ones, so a flood of made-up keys never evicts the keys in use.
import type { Next } from 'koa';
import type { AccountStore, ApiKeyRecord } from '../accounts/account-store.js';
import { describeMalformedKey, hashApiKey } from '../accounts/api-key.js';
import { findCredential } from './credentials.js';
import { GatewayError } from '../request/gateway-error.js';
import type { GatewayContext } from '../request/state.js';
import type { RefusalThrottle } from './refusal-throttle.js';

interface CacheEntry {
  record: ApiKeyRecord | undefined;
  expiresAt: number;
}

const MAX_CACHE_ENTRIES = 100_000;
const MAX_UNKNOWN_ENTRIES = 10_000;

/** Wraps each store read (cache misses only), e.g. to time it as the ledger `lookup` operation. */
export type LookupTimer = (read: () => Promise<ApiKeyRecord | undefined>) => Promise<ApiKeyRecord | undefined>;

const untimed: LookupTimer = (read) => read();

export class KeyAuthenticator {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly unknown = new Map<string, number>();
  private readonly inFlight = new Map<string, Promise<ApiKeyRecord | undefined>>();

  constructor(
    private readonly accounts: AccountStore,
    private readonly ttlMs: number,
    private readonly timeLookup: LookupTimer = untimed,
  ) {}

  async lookup(secret: string): Promise<ApiKeyRecord | undefined> {
    const hash = hashApiKey(secret);
    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached !== undefined && cached.expiresAt > now) {
      // Read again ahead of expiry (the entry's age stays within the TTL either way): a failed read
      // leaves the entry to expire, and the next request after that reads the store itself.
      if (cached.expiresAt - now < this.ttlMs / 2 && !this.inFlight.has(hash)) this.read(hash, now).catch(() => undefined);
      return cached.record;
    }
    const unknownUntil = this.unknown.get(hash);
    if (unknownUntil !== undefined && unknownUntil > now) return undefined;
    return this.read(hash, now);
  }

  /** One store read of a key (concurrent reads of one key share it), cached by its answer. */
  private async read(hash: string, now: number): Promise<ApiKeyRecord | undefined> {
    let pending = this.inFlight.get(hash);
    if (pending === undefined) {
      pending = this.timeLookup(() => this.accounts.findKeyByHash(hash)).finally(() => this.inFlight.delete(hash));
      this.inFlight.set(hash, pending);
    }
    const record = await pending;
    if (record === undefined) {
      // A key read again ahead of expiry that is gone now is not served from its old entry either.
      this.cache.delete(hash);
      if (this.unknown.size >= MAX_UNKNOWN_ENTRIES) this.unknown.clear();
      this.unknown.set(hash, now + this.ttlMs);
      return undefined;
    }
    if (this.cache.size >= MAX_CACHE_ENTRIES) this.cache.clear();
    this.cache.set(hash, { record, expiresAt: now + this.ttlMs });
    return record;
  }

  /** A key this process knows now (cached, not expired): looked up with no I/O, or undefined. */
  known(secret: string): ApiKeyRecord | undefined {
    const cached = this.cache.get(hashApiKey(secret));
    return cached !== undefined && cached.expiresAt > Date.now() ? cached.record : undefined;
  }

  /** Drops cached lookups (the admin API calls it after a revocation in this process). */
  forget(): void {
    this.cache.clear();
    this.unknown.clear();
  }
}

/** The client address a throttle counts: the socket's peer, or behind a trusted proxy the hop it added. */
export type ClientAddress = (ctx: GatewayContext) => string;

export function authenticate(authenticator: KeyAuthenticator, keyMarker: string, throttle?: RefusalThrottle, addressOf?: ClientAddress) {
  const keyPrefix = `sk-${keyMarker}-`;
  const address: ClientAddress = addressOf ?? ((ctx) => ctx.req.socket.remoteAddress ?? '');
  return async function authenticateMiddleware(ctx: GatewayContext, next: Next): Promise<void> {
    const credential = findCredential(ctx.headers, ctx.url, keyPrefix, ctx.req.rawHeaders);
    if (!credential.ok) throw new GatewayError(401, credential.message, { code: credential.code });
    const malformed = describeMalformedKey(credential.secret, keyMarker);
    if (malformed !== undefined) throw new GatewayError(401, `The API key was not accepted: ${malformed}`, { code: 'invalid_api_key' });
    const from = throttle === undefined ? '' : address(ctx);
    const retryAfter = throttle?.retryAfterSeconds(from);
    if (retryAfter !== undefined && authenticator.known(credential.secret) === undefined) {
      throw new GatewayError(429, `Too many requests with API keys that were not recognised came from this address; try again in ${retryAfter} s with a valid key.`, {
        code: 'too_many_invalid_keys',
        retryAfterSeconds: retryAfter,
      });
    }
    const record = await authenticator.lookup(credential.secret);
    if (record === undefined) {
      throttle?.refused(from);
      throw new GatewayError(401, 'The API key is not recognised: check it was copied whole and not mistyped, or create a new key in the dashboard.', { code: 'invalid_api_key' });
    }
    if (record.revokedAt !== undefined) {
      // No hint of the key itself: no part of a key appears in any message. The dashboard lists keys by name.
      throw new GatewayError(401, `This API key was revoked on ${new Date(record.revokedAt).toISOString()}; create a new key in the dashboard.`, { code: 'revoked_api_key' });
    }
    ctx.state.key = record;
    await next();
  };
}
