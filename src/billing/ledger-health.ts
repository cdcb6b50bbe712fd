// Whether the billing ledger (Redis) can be used right now. A ledger that is down, paused or timing out
// makes the gateway refuse new requests at once with a retryable 503 (never serve what it cannot meter)
// and turn /readyz false, instead of holding every request for the length of the outage. The Redis
// client's error events land here, logged once per change of state rather than once per event.
import type { EventEmitter } from 'node:events';

export type LedgerState = 'up' | 'down';

export interface LedgerHealthOptions {
  /** Pings the ledger; rejects when it cannot answer. Undefined for a ledger that cannot fail (memory). */
  probe?: () => Promise<unknown>;
  /** How often a down ledger is probed for its return. */
  probeIntervalMs?: number;
}

/** Seconds a client is asked to wait before retrying a request refused because the ledger is down. */
export const LEDGER_RETRY_AFTER_SECONDS = 2;

/**
 * The ledger cannot serve a request now (down, or an account still being restored): nothing was sent
 * and nothing charged, and the caller may retry after `retryAfterSeconds`. A domain error: the HTTP
 * edge answers it as a retryable 503 (ledger_unavailable).
 */
export class LedgerUnavailableError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number = LEDGER_RETRY_AFTER_SECONDS,
  ) {
    super(message);
    this.name = 'LedgerUnavailableError';
  }
}

export function ledgerUnavailable(): LedgerUnavailableError {
  return new LedgerUnavailableError('The billing ledger is unavailable, so the request was not sent to the model and nothing was charged; retry in a few seconds.');
}

/** An error a ledger call may raise that says nothing of the ledger's health (run() passes it on as is). */
export interface NotALedgerFault {
  readonly notALedgerFault: true;
}

const passesThrough = (err: unknown): boolean =>
  err instanceof LedgerUnavailableError || (typeof err === 'object' && err !== null && (err as Partial<NotALedgerFault>).notALedgerFault === true);

export class LedgerHealth {
  private current: LedgerState = 'up';
  private probing: NodeJS.Timeout | undefined;
  private readonly probeIntervalMs: number;
  private readonly listeners = new Set<(state: LedgerState, reason: string) => void>();

  constructor(private readonly opts: LedgerHealthOptions = {}) {
    this.probeIntervalMs = opts.probeIntervalMs ?? 1000;
  }

  /** Called on every change of state (not on every error): for the log and the readiness probe. */
  onChange(listener: (state: LedgerState, reason: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get state(): LedgerState {
    return this.current;
  }

  get up(): boolean {
    return this.current === 'up';
  }

  /**
   * Follows a Redis client's connection events: its 'error' events are handled here (an unhandled one
   * is printed by the client on every reconnect attempt), 'ready' means up, a lost connection down.
   */
  watch(client: EventEmitter): void {
    client.on('error', (err: unknown) => this.failed(err));
    client.on('close', () => this.set('down', 'connection closed'));
    client.on('ready', () => this.set('up', 'connection ready'));
  }

  /** A ledger call failed: the ledger is down until a probe or the client says otherwise. */
  failed(err: unknown): void {
    this.set('down', (err instanceof Error ? err.message : String(err)).slice(0, 200));
  }

  /** A ledger call succeeded. */
  succeeded(): void {
    this.set('up', 'a ledger call succeeded');
  }

  /**
   * Runs a ledger call: refused at once while the ledger is down, and any failure (connection lost,
   * command timed out) becomes the retryable 503 after marking the ledger down.
   */
  async run<T>(call: () => Promise<T>): Promise<T> {
    if (!this.up) throw ledgerUnavailable();
    try {
      return await call();
    } catch (err) {
      if (passesThrough(err)) throw err;
      this.failed(err);
      throw ledgerUnavailable();
    }
  }

  close(): void {
    if (this.probing !== undefined) clearInterval(this.probing);
    this.probing = undefined;
  }

  private set(state: LedgerState, reason: string): void {
    if (state === this.current) return;
    this.current = state;
    for (const l of this.listeners) l(state, reason);
    if (state === 'down') this.startProbing();
    else this.close();
  }

  private startProbing(): void {
    const probe = this.opts.probe;
    if (probe === undefined || this.probing !== undefined) return;
    let inFlight = false;
    this.probing = setInterval(() => {
      if (inFlight) return;
      inFlight = true;
      probe()
        .then(() => this.succeeded())
        .catch(() => undefined)
        .finally(() => {
          inFlight = false;
        });
    }, this.probeIntervalMs);
    this.probing.unref();
  }
}
