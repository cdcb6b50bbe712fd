// Building the ModelCatalog status: conditions whose lastTransitionTime moves only when their status
// flips, per-model and per-upstream health, and the comparison that decides whether a write is due.
import type {
  CatalogCondition,
  ConditionStatus,
  ModelCatalogStatus,
  ModelHealthStatus,
} from '../src/catalog/types.js';

export interface ConditionInput {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
}

/** Sets a condition; lastTransitionTime is kept unless the status changes. */
export function setCondition(
  existing: readonly CatalogCondition[] | undefined,
  input: ConditionInput,
  observedGeneration: number,
  now: Date,
): CatalogCondition[] {
  const out = (existing ?? []).filter((c) => c.type !== input.type);
  const previous = existing?.find((c) => c.type === input.type);
  const lastTransitionTime =
    previous && previous.status === input.status ? previous.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z');
  out.push({ ...input, lastTransitionTime, observedGeneration });
  return out.sort((a, b) => conditionOrder(a.type) - conditionOrder(b.type));
}

function conditionOrder(type: string): number {
  return type === 'Valid' ? 0 : type === 'Ready' ? 1 : 2;
}

export function getCondition(status: ModelCatalogStatus | undefined, type: string): CatalogCondition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

/** Status without the fields that change on every probe (times, latencies). */
function stable(status: ModelCatalogStatus | undefined): unknown {
  if (!status) return undefined;
  return {
    ...status,
    models: status.models?.map((m) => ({
      ...m,
      upstreams: m.upstreams.map(({ lastProbeTime: _t, latencyMs: _l, ...rest }) => rest),
    })),
  };
}

/**
 * A write is due when anything but probe times and latencies changed, or when those were last
 * written more than `refreshMs` ago (so lastProbeTime stays roughly current without a write per probe).
 */
export function statusNeedsWrite(
  current: ModelCatalogStatus | undefined,
  next: ModelCatalogStatus,
  now: number,
  refreshMs: number,
): boolean {
  if (JSON.stringify(stable(current)) !== JSON.stringify(stable(next))) return true;
  const times = (current?.models ?? []).flatMap((m) => m.upstreams.map((u) => Date.parse(u.lastProbeTime ?? '') || 0));
  const nextTimes = (next.models ?? []).flatMap((m) => m.upstreams.map((u) => Date.parse(u.lastProbeTime ?? '') || 0));
  if (times.length === 0 || nextTimes.length === 0) return false;
  return Math.min(...nextTimes) > Math.min(...times) && now - Math.min(...times) >= refreshMs;
}

export function readyCondition(models: readonly ModelHealthStatus[]): ConditionInput {
  const ready = models.filter((m) => m.ready).length;
  const total = models.length;
  if (ready === total) {
    return { type: 'Ready', status: 'True', reason: 'UpstreamsHealthy', message: `all ${total} models have a healthy upstream` };
  }
  const down = models.filter((m) => !m.ready).map((m) => m.id);
  return {
    type: 'Ready',
    status: 'False',
    reason: 'UpstreamsUnavailable',
    message: `${ready} of ${total} models have a healthy upstream; no healthy upstream for: ${down.slice(0, 10).join(', ')}${down.length > 10 ? ', ...' : ''}`,
  };
}
