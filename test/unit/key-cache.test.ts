// The key cache (KeyAuthenticator) over the memory account store: a key in use is read again ahead of
// its entry's expiry, off the request's path, and no entry is used past its TTL.
import { describe, expect, it } from 'vitest';
import { KeyAuthenticator } from '../../src/authenticate/authenticate.js';
import { createMemoryBackend } from '../../src/billing/backends.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A key cache whose store reads each take `readMs` (a store a round trip away) and are counted. */
async function keyCache(ttlMs: number, readMs: number, failReads = () => false) {
  const { accounts } = createMemoryBackend();
  const account = await accounts.createAccount('a');
  const { secret, record } = await accounts.createKey(account.id, { name: 'k' });
  let reads = 0;
  const authenticator = new KeyAuthenticator(accounts, ttlMs, async (read) => {
    reads++;
    await sleep(readMs);
    if (failReads()) throw new Error('store unreachable');
    return read();
  });
  /** The lookup and how long the request waited for it. */
  const lookup = async () => {
    const started = performance.now();
    const found = await authenticator.lookup(secret);
    return { found, waitedMs: performance.now() - started };
  };
  return { accounts, account, record, lookup, reads: () => reads };
}

describe('key cache: read ahead of expiry', () => {
  it('a key in use past half its TTL is read again in the background, and the request after the old expiry does not wait for a read', async () => {
    const c = await keyCache(1000, 60);
    expect((await c.lookup()).waitedMs).toBeGreaterThanOrEqual(55);
    expect(c.reads()).toBe(1);
    await sleep(850); // past half the TTL: answered from the entry, and a read starts
    const ahead = await c.lookup();
    expect(ahead.found?.id).toBe(c.record.id);
    expect(ahead.waitedMs).toBeLessThan(30);
    expect(c.reads()).toBe(2);
    await sleep(300); // past the first entry's expiry, within the first half of the renewed one's
    const after = await c.lookup();
    expect(after.found?.id).toBe(c.record.id);
    expect(after.waitedMs).toBeLessThan(30);
    expect(c.reads()).toBe(2);
  });

  it('reads the revocation on the way: a key revoked meanwhile is known revoked within the TTL', async () => {
    const c = await keyCache(400, 20);
    await c.lookup();
    await c.accounts.revokeKey(c.account.id, c.record.id);
    await sleep(250);
    await c.lookup(); // starts the read that brings the revocation
    await sleep(60);
    expect((await c.lookup()).found?.revokedAt).toBeDefined();
  });

  it('never uses an entry past its TTL: when the read ahead fails, the request after expiry reads the store itself', async () => {
    let failing = false;
    const c = await keyCache(300, 20, () => failing);
    await c.lookup();
    failing = true;
    await sleep(200);
    await c.lookup(); // the read ahead fails
    await sleep(150); // the entry has expired
    await expect(c.lookup()).rejects.toThrow('store unreachable');
    failing = false;
    expect((await c.lookup()).found?.id).toBe(c.record.id);
    expect(c.reads()).toBe(4);
  });
});
