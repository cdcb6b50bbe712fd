// A self-healing informer over client-node's ListWatch. ListWatch already re-lists after 410 Gone and
// reconnects when a watch ends cleanly; on any other error (API server unreachable, 5xx) it stops, so
// this restarts it with capped exponential backoff. It also reports when the first list has landed.
import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';

export interface InformerOptions<T extends KubernetesObject> {
  kubeConfig: KubeConfig;
  /** The watch path, e.g. `/apis/tollgate.dev/v1alpha1/namespaces/ns/modelcatalogs`. */
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
  onAdd?: (obj: T) => void;
  onUpdate?: (obj: T) => void;
  onDelete?: (obj: T) => void;
  onError?: (err: unknown) => void;
  /** First restart delay after an error; doubles up to maxRestartDelayMs. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
}

export interface Informer<T extends KubernetesObject> {
  list(): readonly T[];
  get(name: string, namespace?: string): T | undefined;
  /** Resolves once the first full list is in the cache. */
  readonly synced: Promise<void>;
  hasSynced(): boolean;
  stop(): Promise<void>;
}

export function startInformer<T extends KubernetesObject>(opts: InformerOptions<T>): Informer<T> {
  let stopped = false;
  let synced = false;
  let failures = 0;
  let restartTimer: NodeJS.Timeout | undefined;
  const open = new Set<AbortController>();
  let resolveSynced: () => void = () => undefined;
  const syncedPromise = new Promise<void>((resolve) => {
    resolveSynced = resolve;
  });

  const watch = new Watch(opts.kubeConfig);
  // A watch is started only after the list has been applied to the cache, so the first call means
  // "synced". A watch requested after stop() (ListWatch does not re-check after its list) is refused.
  const guardedWatch = {
    watch: async (
      path: string,
      query: Record<string, string | number | boolean | undefined>,
      callback: (phase: string, apiObj: T, watchObj?: unknown) => void,
      done: (err: unknown) => void,
    ): Promise<AbortController> => {
      if (stopped) {
        const c = new AbortController();
        c.abort();
        return c;
      }
      if (!synced) {
        synced = true;
        resolveSynced();
      }
      failures = 0;
      const controller = await watch.watch(path, { ...query, allowWatchBookmarks: true }, callback, done);
      open.add(controller);
      controller.signal.addEventListener('abort', () => open.delete(controller));
      if (stopped) controller.abort();
      return controller;
    },
  };

  const informer = new ListWatch<T>(opts.path, guardedWatch as unknown as Watch, opts.list, false);
  if (opts.onAdd) informer.on('add', opts.onAdd);
  if (opts.onUpdate) informer.on('update', opts.onUpdate);
  if (opts.onDelete) informer.on('delete', opts.onDelete);
  informer.on('error', (err: unknown) => {
    if (stopped) return;
    opts.onError?.(err);
    const base = opts.restartDelayMs ?? 200;
    const delay = Math.min(base * 2 ** failures, opts.maxRestartDelayMs ?? 10_000);
    failures += 1;
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (!stopped) informer.start().catch((e: unknown) => opts.onError?.(e));
    }, delay);
  });
  informer.start().catch((e: unknown) => opts.onError?.(e));

  return {
    list: () => informer.list(),
    get: (name, namespace) => informer.get(name, namespace),
    synced: syncedPromise,
    hasSynced: () => synced,
    async stop() {
      stopped = true;
      if (restartTimer) clearTimeout(restartTimer);
      await informer.stop();
      for (const c of open) c.abort();
      open.clear();
    },
  };
}

/** Waits for a promise, failing with a clear message after `ms`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not complete within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}
