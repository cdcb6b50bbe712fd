// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it: the
// holder renews renewTime every retry period; a candidate takes the lease over only when the record
// it observed has not changed for leaseDuration (measured on its own clock, so clock skew between
// pods does not matter). Every write carries the resourceVersion read, so two candidates racing for
// an expired lease cannot both win. A leader that cannot renew within renewDeadline steps down.
import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';

export interface LeaderElectorOptions {
  api: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  onError?: (err: unknown) => void;
}

function code(err: unknown): number | undefined {
  return (err as { code?: number }).code;
}

export class LeaderElector {
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private observedRecord = '';
  private observedAt = 0;
  private lastRenew = 0;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private loop: Promise<void> = Promise.resolve();

  constructor(private readonly opts: LeaderElectorOptions) {
    this.leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
  }

  isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.stopped = false;
    this.tick();
  }

  private tick(): void {
    if (this.stopped) return;
    this.loop = this.tryAcquireOrRenew()
      .catch((err: unknown) => this.opts.onError?.(err))
      .then(() => {
        if (this.leading && Date.now() - this.lastRenew > this.renewDeadlineMs) this.setLeading(false);
        if (!this.stopped) this.timer = setTimeout(() => this.tick(), this.retryPeriodMs);
      });
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    if (leading) this.opts.onStartedLeading();
    else this.opts.onStoppedLeading();
  }

  private spec(previous: V1Lease | undefined, now: Date): V1Lease['spec'] {
    const prev = previous?.spec;
    const takeover = prev?.holderIdentity !== this.opts.identity;
    return {
      holderIdentity: this.opts.identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(this.leaseDurationMs / 1000)),
      acquireTime: takeover ? new V1MicroTime(now) : prev?.acquireTime,
      renewTime: new V1MicroTime(now),
      leaseTransitions: (prev?.leaseTransitions ?? 0) + (takeover && prev?.holderIdentity ? 1 : 0),
    };
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const { api, namespace, name, identity } = this.opts;
    const now = new Date();
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (code(err) !== 404) throw err;
      await api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec: this.spec(undefined, now) } });
      this.lastRenew = Date.now();
      this.setLeading(true);
      return;
    }
    const record = `${lease.spec?.holderIdentity ?? ''}|${String(lease.spec?.renewTime ?? '')}`;
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedAt = Date.now();
    }
    const holder = lease.spec?.holderIdentity;
    const durationMs = (lease.spec?.leaseDurationSeconds ?? 0) * 1000;
    const free = !holder || Date.now() - this.observedAt > durationMs;
    if (holder !== identity && !free) {
      this.setLeading(false);
      return;
    }
    try {
      const updated = await api.replaceNamespacedLease({
        name,
        namespace,
        body: { ...lease, metadata: { ...lease.metadata }, spec: this.spec(lease, now) },
      });
      this.observedRecord = `${updated.spec?.holderIdentity ?? ''}|${String(updated.spec?.renewTime ?? '')}`;
      this.observedAt = Date.now();
      this.lastRenew = Date.now();
      this.setLeading(true);
    } catch (err) {
      if (code(err) === 409) {
        // Someone else wrote first: not ours (this round).
        if (holder !== identity) this.setLeading(false);
        return;
      }
      throw err;
    }
  }

  /** Stops campaigning. With release, a leader clears the holder so another replica takes over at once. */
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.loop;
    const wasLeading = this.leading;
    this.setLeading(false);
    if (!wasLeading || opts.release === false) return;
    try {
      const lease = await this.opts.api.readNamespacedLease({ name: this.opts.name, namespace: this.opts.namespace });
      if (lease.spec?.holderIdentity !== this.opts.identity) return;
      await this.opts.api.replaceNamespacedLease({
        name: this.opts.name,
        namespace: this.opts.namespace,
        body: { ...lease, spec: { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, renewTime: new V1MicroTime() } },
      });
    } catch (err) {
      this.opts.onError?.(err);
    }
  }
}
