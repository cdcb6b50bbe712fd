// Reconciling one ModelCatalog: level-triggered and idempotent. Read the object as it is now,
// validate it (schema and rules, ids unique across the namespace's catalogs, every credential
// Secret key present), probe its upstreams when a probe is due, and write status through the
// status subresource only when it changed. Events mark transitions.
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { findDuplicateModelIds, formatCatalogErrors, validateCatalogObject, type CatalogError } from '../src/catalog/manifest.js';
import type { ModelCatalogResource, ModelCatalogStatus, ModelHealthStatus, UpstreamHealthStatus } from '../src/catalog/types.js';
import { CATALOG_GROUP, CATALOG_PLURAL, CATALOG_VERSION } from '../src/catalog/kube-source.js';
import { upstreamKey } from '../src/catalog/snapshot.js';
import type { EventRecorder } from './events.js';
import type { ProbeResult, ProbeTarget } from './probe.js';
import type { ReconcileResult } from './queue.js';
import { getCondition, readyCondition, setCondition, statusNeedsWrite, type ConditionInput } from './status.js';

export interface ReconcilerDeps {
  api: CustomObjectsApi;
  /** Every catalog the informer holds (all watched namespaces). */
  catalogs: () => readonly ModelCatalogResource[];
  /** A Secret's decoded key, or undefined when the Secret or key does not exist. */
  secretValue: (namespace: string, name: string, key: string) => string | undefined;
  probe: (target: ProbeTarget, timeoutMs: number) => Promise<ProbeResult>;
  recorder: EventRecorder;
  probeIntervalMs: number;
  probeTimeoutMs: number;
  /** How stale lastProbeTime may get before a write that changes only times is made. */
  statusRefreshMs: number;
  now?: () => number;
}

interface ProbeState {
  generation: number;
  at: number;
  upstreams: Map<string, UpstreamHealthStatus>;
}

function isNotFound(err: unknown): boolean {
  return (err as { code?: number }).code === 404;
}

/**
 * Who keeps a contested id: the older catalog; at equal creation time (seconds), the one that is
 * currently valid (already serving it); then by name, so every replica decides the same way.
 */
function claimOrder(a: ModelCatalogResource, b: ModelCatalogResource): number {
  const time = (c: ModelCatalogResource): number =>
    Date.parse(String((c.metadata as { creationTimestamp?: unknown }).creationTimestamp ?? '')) || 0;
  const valid = (c: ModelCatalogResource): number => (getCondition(c.status, 'Valid')?.status === 'True' ? 0 : 1);
  return time(a) - time(b) || valid(a) - valid(b) || a.metadata.name.localeCompare(b.metadata.name);
}

const MAX_MESSAGE = 2000;

export class Reconciler {
  private readonly probes = new Map<string, ProbeState>();
  private readonly now: () => number;

  constructor(private readonly deps: ReconcilerDeps) {
    this.now = deps.now ?? Date.now;
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const [namespace = '', name = ''] = key.split('/');
    let obj: ModelCatalogResource;
    try {
      obj = (await this.deps.api.getNamespacedCustomObject({
        group: CATALOG_GROUP,
        version: CATALOG_VERSION,
        namespace,
        plural: CATALOG_PLURAL,
        name,
      })) as ModelCatalogResource;
    } catch (err) {
      if (isNotFound(err)) {
        this.probes.delete(key); // deleted: nothing to do, forget its probe state
        return {};
      }
      throw err;
    }
    const generation = obj.metadata.generation ?? 1;
    const now = this.now();
    const nowDate = new Date(now);
    const previous = obj.status;
    const errors = this.validate(obj, key);

    let conditions = previous?.conditions;
    let next: ModelCatalogStatus;
    let requeueAfterMs = this.deps.probeIntervalMs;
    if (errors.length > 0) {
      const reason = errors[0]?.reason ?? 'InvalidSpec';
      const valid: ConditionInput = { type: 'Valid', status: 'False', reason, message: this.truncate(formatCatalogErrors(errors)) };
      conditions = setCondition(conditions, valid, generation, nowDate);
      conditions = setCondition(
        conditions,
        { type: 'Ready', status: 'False', reason: 'Invalid', message: 'the catalog is not valid; gateways keep serving its last valid version' },
        generation,
        nowDate,
      );
      // Health of the last valid version is still what gateways route by: keep it, and that version
      // itself (lastValid), which gateways starting now serve.
      next = { ...previous, observedGeneration: generation, conditions, ready: 'False' };
      this.probes.delete(key);
    } else {
      const state = await this.probeIfDue(key, obj, now);
      requeueAfterMs = Math.max(1, state.at + this.deps.probeIntervalMs - now);
      const models: ModelHealthStatus[] = obj.spec.models.map((m) => {
        const upstreams = m.upstreams.map(
          (u) => state.upstreams.get(upstreamKey(m.id, u.name)) ?? { name: u.name, healthy: false, message: 'not probed yet' },
        );
        return { id: m.id, ready: upstreams.some((u) => u.healthy), upstreams };
      });
      conditions = setCondition(
        conditions,
        { type: 'Valid', status: 'True', reason: 'Validated', message: `${models.length} models validated` },
        generation,
        nowDate,
      );
      const ready = readyCondition(models);
      conditions = setCondition(conditions, ready, generation, nowDate);
      // Kept through later invalid edits (the spread above), for gateways that start during one.
      const lastValid = { generation, spec: structuredClone(obj.spec) };
      next = { observedGeneration: generation, conditions, models, lastValid, modelCount: models.length, ready: ready.status };
    }

    if (statusNeedsWrite(previous, next, now, this.deps.statusRefreshMs)) {
      await this.deps.api.replaceNamespacedCustomObjectStatus({
        group: CATALOG_GROUP,
        version: CATALOG_VERSION,
        namespace,
        plural: CATALOG_PLURAL,
        name,
        body: { ...obj, status: next },
      });
      await this.recordTransitions(obj, previous, next);
    }
    return { requeueAfterMs };
  }

  private truncate(message: string): string {
    return message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
  }

  private validate(obj: ModelCatalogResource, key: string): (CatalogError & { reason: string })[] {
    const result = validateCatalogObject(obj, key);
    if (!result.ok) return result.errors.map((e) => ({ ...e, reason: 'InvalidSpec' }));
    const errors: (CatalogError & { reason: string })[] = [];

    // Ids and aliases are unique across the catalogs one gateway reads (its namespace). The older
    // catalog keeps an id; the newcomer that repeats it is the invalid one.
    const namespace = obj.metadata.namespace;
    const peers = this.deps
      .catalogs()
      // Peers that fail the schema claim nothing (and cannot break the duplicate check).
      .filter((c) => c.metadata.namespace === namespace && c.metadata.name !== obj.metadata.name && validateCatalogObject(c, '').ok)
      .concat([obj])
      .sort(claimOrder);
    for (const dup of findDuplicateModelIds(peers.map((c) => ({ source: `${c.metadata.namespace}/${c.metadata.name}`, spec: c.spec })))) {
      if (dup.source === key) errors.push({ ...dup, reason: 'DuplicateModelId' });
    }

    obj.spec.models.forEach((m, i) =>
      m.upstreams.forEach((u, j) => {
        const ref = u.credentialsSecretRef;
        if (ref && this.deps.secretValue(namespace ?? '', ref.name, ref.key) === undefined) {
          errors.push({
            source: key,
            path: `/spec/models/${i}/upstreams/${j}/credentialsSecretRef`,
            message: `Secret ${ref.name} with key ${ref.key} not found in namespace ${namespace ?? ''}`,
            reason: 'CredentialsNotFound',
          });
        }
      }),
    );
    return errors;
  }

  private async probeIfDue(key: string, obj: ModelCatalogResource, now: number): Promise<ProbeState> {
    const generation = obj.metadata.generation ?? 1;
    const existing = this.probes.get(key);
    if (existing && existing.generation === generation && now - existing.at < this.deps.probeIntervalMs) return existing;
    const namespace = obj.metadata.namespace ?? '';
    const upstreams = new Map<string, UpstreamHealthStatus>();
    const time = new Date(now).toISOString().replace(/\.\d+Z$/, 'Z');
    await Promise.all(
      obj.spec.models.flatMap((m) =>
        m.upstreams.map(async (u) => {
          const ref = u.credentialsSecretRef;
          const target: ProbeTarget = {
            baseUrl: u.baseUrl,
            format: u.format,
            credentialsHeader: u.credentialsHeader,
            credential: ref ? this.deps.secretValue(namespace, ref.name, ref.key) : undefined,
          };
          const timeoutMs = Math.min(this.deps.probeTimeoutMs, u.timeouts?.firstByteMs ?? Number.POSITIVE_INFINITY);
          const result = await this.deps.probe(target, timeoutMs);
          upstreams.set(upstreamKey(m.id, u.name), {
            name: u.name,
            healthy: result.healthy,
            lastProbeTime: time,
            latencyMs: result.latencyMs,
            message: result.message,
          });
        }),
      ),
    );
    const state = { generation, at: now, upstreams };
    this.probes.set(key, state);
    return state;
  }

  private async recordTransitions(obj: ModelCatalogResource, previous: ModelCatalogStatus | undefined, next: ModelCatalogStatus): Promise<void> {
    const { recorder } = this.deps;
    const before = getCondition(previous, 'Valid');
    const after = getCondition(next, 'Valid');
    if (after && (before?.status !== after.status || (after.status === 'False' && before.message !== after.message))) {
      if (after.status === 'True') await recorder.record(obj, 'Normal', 'Validated', after.message);
      else await recorder.record(obj, 'Warning', after.reason, after.message);
    }
    if (after?.status !== 'True') return;
    const was = new Map<string, boolean>();
    for (const m of previous?.models ?? []) for (const u of m.upstreams) was.set(`${m.id}/${u.name}`, u.healthy);
    for (const m of next.models ?? []) {
      for (const u of m.upstreams) {
        const key = `${m.id}/${u.name}`;
        const old = was.get(key);
        if (old === u.healthy) continue;
        if (!u.healthy) await recorder.record(obj, 'Warning', 'UpstreamDown', `upstream ${key} is unhealthy: ${u.message ?? ''}`);
        else if (old === false) await recorder.record(obj, 'Normal', 'UpstreamUp', `upstream ${key} is healthy again`);
      }
    }
  }
}
