// The operator assembled: informers on ModelCatalogs and Secrets keep warm caches on every replica;
// only the elected leader runs the work queue. Any catalog or Secret change enqueues the catalogs of
// its namespace (duplicate ids and credential checks span catalogs), and every reconcile asks to be
// called again when its next probe is due.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type V1Secret,
} from '@kubernetes/client-node';
import { startInformer, type Informer } from '../src/catalog/kube-informer.js';
import { CATALOG_GROUP, CATALOG_PLURAL, CATALOG_VERSION } from '../src/catalog/kube-source.js';
import type { ModelCatalogResource } from '../src/catalog/types.js';
import { createEventRecorder } from './events.js';
import { LeaderElector } from './leader.js';
import { probeUpstream } from './probe.js';
import { WorkQueue } from './queue.js';
import { Reconciler } from './reconcile.js';

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  /** Namespace to watch; undefined or '' watches all namespaces (needs a ClusterRole). */
  watchNamespace?: string;
  /** Namespace of the leader-election Lease. */
  leaseNamespace: string;
  leaseName?: string;
  /** This replica's identity in the Lease (the pod name). */
  identity: string;
  probeIntervalMs?: number;
  probeTimeoutMs?: number;
  statusRefreshMs?: number;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  workers?: number;
  /** Port for /healthz and /readyz; 0 picks a free one; undefined serves none. */
  healthPort?: number;
  healthHost?: string;
  log?: (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
}

export interface OperatorHandle {
  isLeader(): boolean;
  /** Resolves once both caches hold their first list. */
  readonly synced: Promise<void>;
  /** The bound health port, when serving. */
  readonly healthPort: number | undefined;
  /** Stops everything. release=false simulates a crash (the Lease is left to expire). */
  stop(opts?: { release?: boolean }): Promise<void>;
}

function errorText(err: unknown): string {
  // client-node's ApiException carries the API server's Status, parsed or (custom objects) as text.
  const e = err as { code?: number; body?: unknown; message?: string };
  if (e.code !== undefined && e.body !== undefined) {
    try {
      const body = (typeof e.body === 'string' ? JSON.parse(e.body) : e.body) as { message?: string };
      if (body.message) return `HTTP ${e.code}: ${body.message}`;
    } catch {
      // not a Status body: fall through
    }
    return `HTTP ${e.code}`;
  }
  return e.message ?? String(err);
}

type Log = NonNullable<OperatorOptions['log']>;

/** /healthz (alive) and /readyz (caches synced), on their own port. */
async function startHealthServer(port: number, host: string, state: () => { synced: boolean; leader: boolean }): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    } else if (path === '/readyz') {
      const { synced, leader } = state();
      res.writeHead(synced ? 200 : 503, { 'content-type': 'text/plain' }).end(synced ? `ok (leader: ${leader})` : 'caches not synced');
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    }
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return server;
}

/** The reconciler over the informers' caches: catalogs, Secret values, probes and events. */
function newReconciler(custom: CustomObjectsApi, core: CoreV1Api, opts: OperatorOptions, log: Log, catalogs: Informer<ModelCatalogResource>, secrets: Informer<V1Secret>): Reconciler {
  return new Reconciler({
    api: custom,
    catalogs: () => catalogs.list() ?? [],
    secretValue: (namespace, name, key) => {
      const value = secrets.get(name, namespace)?.data?.[key];
      return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
    },
    probe: probeUpstream,
    recorder: createEventRecorder(core, 'tollgate-operator', opts.identity, (err) =>
      log('warn', 'could not record event', { error: errorText(err) }),
    ),
    probeIntervalMs: opts.probeIntervalMs ?? 30_000,
    probeTimeoutMs: opts.probeTimeoutMs ?? 5_000,
    statusRefreshMs: opts.statusRefreshMs ?? 5 * 60_000,
  });
}

type CatalogHandlers = { onAdd: (obj: ModelCatalogResource) => void; onUpdate: (obj: ModelCatalogResource) => void; onDelete: (obj: ModelCatalogResource) => void };

/** The warm cache of ModelCatalogs (in the watched namespace, or all). */
function watchCatalogs(kc: KubeConfig, custom: CustomObjectsApi, ns: string | undefined, log: Log, on: CatalogHandlers): Informer<ModelCatalogResource> {
  return startInformer<ModelCatalogResource>({
    kubeConfig: kc,
    path: ns
      ? `/apis/${CATALOG_GROUP}/${CATALOG_VERSION}/namespaces/${encodeURIComponent(ns)}/${CATALOG_PLURAL}`
      : `/apis/${CATALOG_GROUP}/${CATALOG_VERSION}/${CATALOG_PLURAL}`,
    list: async () =>
      (ns
        ? await custom.listNamespacedCustomObject({ group: CATALOG_GROUP, version: CATALOG_VERSION, namespace: ns, plural: CATALOG_PLURAL })
        : await custom.listClusterCustomObject({ group: CATALOG_GROUP, version: CATALOG_VERSION, plural: CATALOG_PLURAL })) as KubernetesListObject<ModelCatalogResource>,
    ...on,
    onError: (err) => log('warn', 'ModelCatalog watch failed; retrying', { error: errorText(err) }),
  });
}

/** The warm cache of Secrets (catalogs' credentials); `changed` on any change. */
function watchSecrets(kc: KubeConfig, core: CoreV1Api, ns: string | undefined, log: Log, changed: (s: V1Secret) => void): Informer<V1Secret> {
  return startInformer<V1Secret>({
    kubeConfig: kc,
    path: ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets` : '/api/v1/secrets',
    list: () => (ns ? core.listNamespacedSecret({ namespace: ns }) : core.listSecretForAllNamespaces()),
    onAdd: changed,
    onUpdate: changed,
    onDelete: changed,
    onError: (err) => log('warn', 'Secret watch failed; retrying', { error: errorText(err) }),
  });
}

export async function startOperator(opts: OperatorOptions): Promise<OperatorHandle> {
  const log = opts.log ?? ((level, message, fields) => console[level === 'info' ? 'log' : level](JSON.stringify({ level, message, ...fields })));
  const kc = opts.kubeConfig;
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const ns = opts.watchNamespace || undefined;

  // One queue per leadership term: a replica that loses the Lease drops its pending work.
  let queue: WorkQueue | undefined;
  let running: Promise<void> | undefined;
  const enqueueNamespace = (namespace: string | undefined): void => {
    for (const c of catalogs.list() ?? []) {
      if (c.metadata.namespace === namespace) queue?.add(`${c.metadata.namespace}/${c.metadata.name}`);
    }
  };
  // Peers are re-checked only when a spec changes (duplicate ids span catalogs); a status-only update
  // (our own writes, mostly) re-queues just that catalog, which then finds nothing to do.
  const seenGeneration = new Map<string, number | undefined>();
  const onCatalog = (obj: ModelCatalogResource): void => {
    const key = `${obj.metadata.namespace}/${obj.metadata.name}`;
    queue?.add(key);
    if (seenGeneration.has(key) && seenGeneration.get(key) === obj.metadata.generation) return;
    seenGeneration.set(key, obj.metadata.generation);
    enqueueNamespace(obj.metadata.namespace);
  };

  const catalogs = watchCatalogs(kc, custom, ns, log, {
    onAdd: onCatalog,
    onUpdate: onCatalog,
    onDelete: (obj) => {
      seenGeneration.delete(`${obj.metadata.namespace}/${obj.metadata.name}`);
      enqueueNamespace(obj.metadata.namespace);
    },
  });
  const secrets = watchSecrets(kc, core, ns, log, (s) => enqueueNamespace(s.metadata?.namespace));
  const synced = Promise.all([catalogs.synced, secrets.synced]).then(() => undefined);

  const reconciler = newReconciler(custom, core, opts, log, catalogs, secrets);

  const elector = new LeaderElector({
    api: coordination,
    namespace: opts.leaseNamespace,
    name: opts.leaseName ?? 'tollgate-operator',
    identity: opts.identity,
    leaseDurationMs: opts.leaseDurationMs,
    renewDeadlineMs: opts.renewDeadlineMs,
    retryPeriodMs: opts.retryPeriodMs,
    onStartedLeading: () => {
      log('info', 'became leader', { identity: opts.identity });
      const term = new WorkQueue();
      queue = term;
      running = synced.then(() => {
        if (queue !== term) return;
        for (const c of catalogs.list() ?? []) term.add(`${c.metadata.namespace}/${c.metadata.name}`);
        return term.run(opts.workers ?? 2, (key) => reconciler.reconcile(key), (key, err) =>
          log('warn', 'reconcile failed; retrying with backoff', { key, error: errorText(err) }),
        );
      });
    },
    onStoppedLeading: () => {
      log('info', 'stopped leading', { identity: opts.identity });
      queue?.shutdown();
      queue = undefined;
    },
    onError: (err) => log('warn', 'leader election round failed', { error: errorText(err) }),
  });
  elector.start();

  const server =
    opts.healthPort === undefined
      ? undefined
      : await startHealthServer(opts.healthPort, opts.healthHost ?? '0.0.0.0', () => ({ synced: catalogs.hasSynced() === true && secrets.hasSynced(), leader: elector.isLeader() }));
  const healthPort = server === undefined ? undefined : (server.address() as AddressInfo).port;

  return {
    isLeader: () => elector.isLeader(),
    synced,
    healthPort,
    async stop(stopOpts = {}) {
      await elector.stop(stopOpts);
      queue?.shutdown();
      await running;
      await Promise.all([catalogs.stop(), secrets.stop()]);
      if (server) {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server?.close(() => resolve()));
      }
    },
  };
}
