// Two operator replicas against one real API server (etcd + kube-apiserver from `make tools`): exactly
// one holds the Lease and reconciles; when it stops (cleanly, releasing the Lease, or by crashing and
// letting it expire) the other takes over. Each case has its own Lease name on the shared server.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { startOperator, type OperatorHandle, type OperatorOptions } from '../../operator/controller.js';
import { startKubeApi, type KubeApi } from '../k8s/harness/kube-api.js';
import { TOOLS_TIMEOUT_MS, ensureTools } from '../k8s/harness/tools.js';
import { applyCatalog, catalog, getCatalog, model, startFakeUpstream, upstream, waitFor, type FakeUpstream } from '../helpers/kube-fixtures.js';

const NS = 'leader-ns';

describe('operator leader election', () => {
  let api: KubeApi | undefined;
  let up: FakeUpstream | undefined;
  let leaseName = 'tollgate-operator';
  const operators: OperatorHandle[] = [];

  beforeAll(async () => {
    ensureTools();
    api = await startKubeApi([NS, 'team-a', 'team-b']);
  }, TOOLS_TIMEOUT_MS);
  afterAll(async () => {
    await api?.stop();
  });
  afterEach(async () => {
    await Promise.all(operators.splice(0).map((o) => o.stop()));
    await up?.close();
  });

  /** A short lease by default, so the crash cases wait little for its expiry. */
  async function start(identity: string, leaseDurationMs = 1000): Promise<OperatorHandle> {
    if (!api) throw new Error('api not started');
    const opts: OperatorOptions = {
      kubeConfig: api.kubeConfig(NS),
      watchNamespace: NS,
      leaseNamespace: NS,
      leaseName,
      identity,
      probeIntervalMs: 100,
      leaseDurationMs,
      renewDeadlineMs: Math.round(leaseDurationMs * 0.7),
      retryPeriodMs: 100,
      healthPort: 0,
      healthHost: '127.0.0.1',
      log: () => undefined,
    };
    const op = await startOperator(opts);
    operators.push(op);
    return op;
  }

  async function holder(): Promise<string | undefined> {
    const lease = await api?.kubeConfig(NS).makeApiClient(CoordinationV1Api).readNamespacedLease({ name: leaseName, namespace: NS });
    return lease?.spec?.holderIdentity;
  }

  it('elects exactly one leader, which alone writes status; the other takes over after a clean stop', async () => {
    if (!api) throw new Error('api not started');
    leaseName = 'lease-clean-stop';
    up = await startFakeUpstream('k');
    // A 20 s lease: a takeover well inside it can only come from the release, however slow the machine.
    const a = await start('op-a', 20_000);
    const b = await start('op-b', 20_000);
    await waitFor('a leader', () => a.isLeader() || b.isLeader());
    // Over several renew periods there is never more than one leader.
    for (let i = 0; i < 10; i++) {
      expect(Number(a.isLeader()) + Number(b.isLeader())).toBe(1);
      await new Promise((r) => setTimeout(r, 50));
    }
    const [leader, standby] = a.isLeader() ? [a, b] : [b, a];
    expect(await holder()).toBe(leader === a ? 'op-a' : 'op-b');

    // Health endpoints: both replicas are live and ready (the standby has warm caches).
    for (const op of [a, b]) {
      const healthz = await fetch(`http://127.0.0.1:${op.healthPort}/healthz`);
      expect(healthz.status).toBe(200);
      const readyz = await fetch(`http://127.0.0.1:${op.healthPort}/readyz`);
      expect(readyz.status).toBe(200);
    }

    await applyCatalog(api.kubeConfig(NS), NS, catalog('c1', [model('m1', [upstream('u', up.baseUrl)])]));
    await waitFor('status written', async () => (await getCatalog(api!.kubeConfig(NS), NS, 'c1')).status?.observedGeneration === 1);

    await leader.stop({ release: true });
    operators.splice(operators.indexOf(leader), 1);
    const released = Date.now();
    await waitFor('standby takes over', () => standby.isLeader(), 10_000);
    expect(Date.now() - released).toBeLessThan(10_000); // released: no need to wait for the lease's 20 s
    expect(await holder()).toBe(standby === a ? 'op-a' : 'op-b');

    // The new leader reconciles: a spec change gets observed.
    await applyCatalog(api.kubeConfig(NS), NS, catalog('c1', [model('m1', [upstream('u', up.baseUrl)]), model('m2', [upstream('u', up.baseUrl)])]));
    await waitFor('new leader observed generation 2', async () => (await getCatalog(api!.kubeConfig(NS), NS, 'c1')).status?.observedGeneration === 2);
  });

  it('takes over from a crashed leader once its lease expires', async () => {
    if (!api) throw new Error('api not started');
    leaseName = 'lease-crash';
    const a = await start('op-a');
    await waitFor('a leads', () => a.isLeader());
    const b = await start('op-b');
    await new Promise((r) => setTimeout(r, 300));
    expect(b.isLeader()).toBe(false);
    await a.stop({ release: false }); // a crash: the lease is left to expire
    operators.splice(operators.indexOf(a), 1);
    const crashed = Date.now();
    await waitFor('b takes over', () => b.isLeader(), 4000);
    expect(Date.now() - crashed).toBeGreaterThanOrEqual(900); // not before the lease duration (1 s)
    expect(await holder()).toBe('op-b');
    const lease = await api.kubeConfig(NS).makeApiClient(CoordinationV1Api).readNamespacedLease({ name: leaseName, namespace: NS });
    expect(lease.spec?.leaseTransitions).toBe(1);
  });

  it('watching all namespaces reconciles catalogs in each, with ids unique per namespace', async () => {
    if (!api) throw new Error('api not started');
    up = await startFakeUpstream('k');
    const op = await startOperator({
      kubeConfig: api.kubeConfig(NS),
      watchNamespace: '',
      leaseNamespace: NS,
      leaseName: 'lease-all-namespaces',
      identity: 'cluster-op',
      probeIntervalMs: 100,
      leaseDurationMs: 5000,
      renewDeadlineMs: 4000,
      retryPeriodMs: 100,
      log: () => undefined,
    });
    operators.push(op);
    const kc = api.kubeConfig(NS);
    // The same model id in two namespaces is fine: each namespace's gateways read only their own.
    await applyCatalog(kc, 'team-a', catalog('c', [model('same', [upstream('u', up.baseUrl)])]));
    await applyCatalog(kc, 'team-b', catalog('c', [model('same', [upstream('u', up.baseUrl)])]));
    for (const ns of ['team-a', 'team-b']) {
      const obj = await waitFor(`${ns} reconciled`, async () => {
        const o = await getCatalog(kc, ns, 'c');
        return o.status?.observedGeneration === 1 ? o : undefined;
      });
      expect(obj.status?.conditions?.find((c) => c.type === 'Valid')?.status).toBe('True');
    }
  });
});
