// Attempt budgets for sign-in, sign-up and password reset: every attempt is taken from the budgets it
// draws on (per e-mail, per client address) BEFORE any argon2 work runs, in one synchronous step, so
// attempts sent at once cannot all pass a check that is counted only after their (async) verification.
// Kept in memory per process on purpose: it needs no table and no cleanup job, and with N dashboard
// replicas an attacker gets at most N times the budget, still far too slow to guess a password.
export interface ThrottleLimits {
  perAccount: number;
  perAddress: number;
  windowMs: number;
}

/** Sign-in: 5 attempts per e-mail and 20 per address in 15 minutes; a right password gives back the e-mail's. */
export const DEFAULT_THROTTLE: ThrottleLimits = { perAccount: 5, perAddress: 20, windowMs: 15 * 60_000 };
/** Sign-up: argon2 CPU and one verification mail per attempt. */
export const SIGN_UP_THROTTLE: ThrottleLimits = { perAccount: 3, perAddress: 20, windowMs: 60 * 60_000 };
/** Reset requests: a mail to the address each time (mail bombing). */
export const RESET_REQUEST_THROTTLE: ThrottleLimits = { perAccount: 3, perAddress: 20, windowMs: 60 * 60_000 };
/** Reset submissions: argon2 per attempt; "account" is the token. */
export const RESET_SUBMIT_THROTTLE: ThrottleLimits = { perAccount: 5, perAddress: 20, windowMs: 15 * 60_000 };

/** The one answer a throttled attempt gets, whatever budget ran out. */
export const THROTTLED_MESSAGE = (seconds: number): string => `Too many attempts; try again in ${seconds} seconds.`;

/** Entries beyond this many are swept of expired timestamps (bounds memory under address churn). */
const SWEEP_AT = 10_000;

export class AttemptThrottle {
  private readonly attempts = new Map<string, number[]>();
  constructor(private readonly limits: ThrottleLimits = DEFAULT_THROTTLE, private readonly now: () => number = Date.now) {}

  private recent(key: string): number[] {
    const cutoff = this.now() - this.limits.windowMs;
    const list = (this.attempts.get(key) ?? []).filter((t) => t > cutoff);
    if (list.length === 0) this.attempts.delete(key);
    else this.attempts.set(key, list);
    return list;
  }

  private sweep(): void {
    if (this.attempts.size < SWEEP_AT) return;
    for (const key of [...this.attempts.keys()]) this.recent(key);
  }

  /**
   * Takes one attempt from the subject's budget and the address's, or none when either is spent.
   * Returns 0 when taken, else the seconds until one is free again. Synchronous: nothing can run
   * between the check and the count.
   */
  take(subject: string, address: string): number {
    this.sweep();
    const checks: [string, number][] = [
      [`a:${subject}`, this.limits.perAccount],
      [`ip:${address}`, this.limits.perAddress],
    ];
    let wait = 0;
    for (const [key, limit] of checks) {
      const list = this.recent(key);
      if (list.length >= limit) {
        const oldest = list[list.length - limit] ?? this.now();
        wait = Math.max(wait, Math.max(1, Math.ceil((oldest + this.limits.windowMs - this.now()) / 1000)));
      }
    }
    if (wait > 0) return wait;
    const at = this.now();
    for (const [key] of checks) this.attempts.set(key, [...this.recent(key), at]);
    return 0;
  }

  /**
   * A right password clears the subject's count and gives the address back the one attempt it used
   * (not its others: one valid account must not launder guesses at other accounts).
   */
  succeed(subject: string, address: string): void {
    this.attempts.delete(`a:${subject}`);
    const list = this.recent(`ip:${address}`);
    list.pop();
    if (list.length === 0) this.attempts.delete(`ip:${address}`);
  }
}

/** The budgets of the open routes, one per kind of attempt. */
export interface Throttles {
  signIn: AttemptThrottle;
  signUp: AttemptThrottle;
  resetRequest: AttemptThrottle;
  resetSubmit: AttemptThrottle;
}

export function defaultThrottles(given: Partial<Throttles> = {}): Throttles {
  return {
    signIn: given.signIn ?? new AttemptThrottle(DEFAULT_THROTTLE),
    signUp: given.signUp ?? new AttemptThrottle(SIGN_UP_THROTTLE),
    resetRequest: given.resetRequest ?? new AttemptThrottle(RESET_REQUEST_THROTTLE),
    resetSubmit: given.resetSubmit ?? new AttemptThrottle(RESET_SUBMIT_THROTTLE),
  };
}
