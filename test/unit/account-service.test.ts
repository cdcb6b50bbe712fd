import { describe, expect, it } from 'vitest';
import { AccountService, CreditRefused } from '../../src/account-service/account-service.js';
import { createMemoryBackend } from '../../src/billing/backends.js';
import { usdTextToMicros } from '../../src/billing/money.js';

function world() {
  const backend = createMemoryBackend();
  let forgotten = 0;
  const service = new AccountService({ accounts: backend.accounts, ledger: backend.ledger, onRevoke: () => forgotten++ });
  return { backend, service, forgotten: () => forgotten };
}

const refusal = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'credited',
    (err: unknown) => (err instanceof CreditRefused ? err.reason : `threw ${String(err)}`),
  );

describe('the account service', () => {
  it('tells the key cache after every revoke it makes, and not when there is no such key', async () => {
    const w = world();
    const account = await w.service.createAccount('a');
    const { record } = await w.service.createKey(account.id, { name: 'k' });
    expect(await w.service.revokeKey(account.id, 'key_nope')).toBe(false);
    expect(w.forgotten()).toBe(0);
    expect(await w.service.revokeKey(account.id, record.id)).toBe(true);
    expect(w.forgotten()).toBe(1);
    expect((await w.service.getKey(account.id, record.id))?.revokedAt).toEqual(expect.any(Number));
  });

  it('credits micro-USD once per idempotency key and refuses what it cannot apply, crediting nothing', async () => {
    const w = world();
    const account = await w.service.createAccount('a');
    expect(await w.service.credit(account.id, 5_000_000, 'k1')).toBe(true);
    expect(await w.service.credit(account.id, 5_000_000, 'k1')).toBe(false);
    expect(await refusal(w.service.credit(account.id, 7_000_000, 'k1'))).toBe('key_reused');
    expect(await refusal(w.service.credit(account.id, 0, 'k2'))).toBe('not_positive');
    expect(await refusal(w.service.credit(account.id, 1.5, 'k2'))).toBe('not_positive');
    expect(await refusal(w.service.credit(account.id, 1, ''))).toBe('no_idempotency_key');
    expect(await refusal(w.service.credit(account.id, 1, 'x'.repeat(201)))).toBe('no_idempotency_key');
    expect(await refusal(w.service.credit(account.id, Number.MAX_SAFE_INTEGER, 'k3'))).toBe('too_large');
    expect((await w.service.balance(account.id)).balance).toBe(5_000_000);
  });

  it('reads decimal USD text as exact micro-USD', () => {
    expect(usdTextToMicros('12.5')).toBe(12_500_000);
    expect(usdTextToMicros('0.000001')).toBe(1);
    expect(usdTextToMicros('1.0000001')).toBe('malformed');
    expect(usdTextToMicros('-1')).toBe('malformed');
    expect(usdTextToMicros('9999999999.999999')).toBe('too_large');
  });
});
