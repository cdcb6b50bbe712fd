// Chooses which upstreams of a model to try, in order: healthy ones with a closed circuit first
// (weighted random for the first pick, so load spreads by weight), then the rest as a last resort.
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';

interface CircuitState {
  consecutiveFailures: number;
  openUntil: number;
}

export interface CircuitOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long an open circuit skips the upstream before one trial request. */
  cooldownMs: number;
}

export class UpstreamRouter {
  private readonly circuits = new Map<string, CircuitState>();

  constructor(private readonly opts: CircuitOptions = { failureThreshold: 5, cooldownMs: 30_000 }) {}

  private key(model: CatalogModel, upstream: CatalogUpstream): string {
    return `${model.id}\u0000${upstream.name}`;
  }

  private available(model: CatalogModel, upstream: CatalogUpstream, now: number): boolean {
    const c = this.circuits.get(this.key(model, upstream));
    return c === undefined || c.openUntil <= now;
  }

  candidates(model: CatalogModel, now = Date.now()): CatalogUpstream[] {
    const ups = model.upstreams;
    if (ups.length === 1) return [ups[0] as CatalogUpstream];
    const preferred: CatalogUpstream[] = [];
    const rest: CatalogUpstream[] = [];
    for (const u of ups) (u.healthy && this.available(model, u, now) && u.weight > 0 ? preferred : rest).push(u);
    if (preferred.length > 1) {
      let total = 0;
      for (const u of preferred) total += u.weight;
      let pick = Math.random() * total;
      const idx = preferred.findIndex((u) => (pick -= u.weight) < 0);
      if (idx > 0) preferred.unshift(...preferred.splice(idx, 1));
    }
    return preferred.concat(rest);
  }

  recordSuccess(model: CatalogModel, upstream: CatalogUpstream): void {
    if (this.circuits.size === 0) return;
    this.circuits.delete(this.key(model, upstream));
  }

  recordFailure(model: CatalogModel, upstream: CatalogUpstream, now = Date.now()): void {
    const key = this.key(model, upstream);
    const c = this.circuits.get(key) ?? { consecutiveFailures: 0, openUntil: 0 };
    c.consecutiveFailures += 1;
    if (c.consecutiveFailures >= this.opts.failureThreshold) c.openUntil = now + this.opts.cooldownMs;
    this.circuits.set(key, c);
  }
}
