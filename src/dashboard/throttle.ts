// Sign-in throttle: failed attempts counted per account (e-mail) and per client address over a sliding
// window. Kept in memory per process on purpose: it needs no table and no cleanup job, and with N
// dashboard replicas an attacker gets at most N times the budget, still far too slow to guess a password.
export interface ThrottleLimits {
  perAccount: number;
  perAddress: number;
  windowMs: number;
}

export const DEFAULT_THROTTLE: ThrottleLimits = { perAccount: 5, perAddress: 20, windowMs: 15 * 60_000 };

export class SignInThrottle {
  private readonly failures = new Map<string, number[]>();
  constructor(private readonly limits: ThrottleLimits = DEFAULT_THROTTLE, private readonly now: () => number = Date.now) {}

  private recent(key: string): number[] {
    const cutoff = this.now() - this.limits.windowMs;
    const list = (this.failures.get(key) ?? []).filter((t) => t > cutoff);
    if (list.length === 0) this.failures.delete(key);
    else this.failures.set(key, list);
    return list;
  }

  /** Seconds until another attempt is allowed; 0 when it is allowed now. */
  retryAfter(email: string, address: string): number {
    const checks: [string, number][] = [[`a:${email}`, this.limits.perAccount], [`ip:${address}`, this.limits.perAddress]];
    let wait = 0;
    for (const [key, limit] of checks) {
      const list = this.recent(key);
      if (list.length >= limit) {
        const oldest = list[list.length - limit] ?? this.now();
        wait = Math.max(wait, Math.ceil((oldest + this.limits.windowMs - this.now()) / 1000));
      }
    }
    return wait;
  }

  fail(email: string, address: string): void {
    for (const key of [`a:${email}`, `ip:${address}`]) this.failures.set(key, [...this.recent(key), this.now()]);
  }

  /** A good password clears the account's count (not the address's: one valid account must not launder guesses). */
  succeed(email: string): void {
    this.failures.delete(`a:${email}`);
  }
}
