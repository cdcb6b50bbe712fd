// The operator and a gateway as processes against a real kube-apiserver, each with a kubeconfig that
// impersonates the ServiceAccount the chart gives it, in a namespace `helm install` set up (CRD,
// ServiceAccounts, Roles). The operator reconciles a real ModelCatalog (conditions, observedGeneration,
// lastValid, events); the chart's RBAC is enough for both and no more; two operators share one Lease
// and the survivor takes over when the leader is killed; the gateway follows catalog edits (a new
// model answers, a removed one is 404, a new price is billed) and rides out the API server going away.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { KubeConfig} from '@kubernetes/client-node';
import { AuthorizationV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, type V1ResourceRule } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ModelCatalogResource, ModelSpec } from '../../src/catalog/types.js';
import { startSimulator, type Simulator } from '../../src/simulator/server.js';
import { GROUP, PLURAL, VERSION, applyCatalog as applyCatalogObject, catalog, getCatalog as getCatalogObject } from '../helpers/kube-fixtures.js';
import { startRedisServer, type OwnRedisProcess } from '../helpers/redis-server.js';
import { freePort, startControlPlane, type ControlPlane } from './harness/control-plane.js';
import { CHART, helm } from './harness/helm.js';
import { ROOT, TOOLS_TIMEOUT_MS, ensureTools } from './harness/tools.js';

const NS = 'tollgate';
const OPERATOR_SA = `system:serviceaccount:${NS}:tollgate-operator`;
const GATEWAY_SA = `system:serviceaccount:${NS}:tollgate-gateway`;
const UPSTREAM_KEY = 'sk-upstream-test';
/** How long a gateway may take to serve a catalog edit (operator validation + both watches). */
const FOLLOW_MS = 10_000;

interface Proc {
  child: ChildProcess;
  lines: string[];
  kill(signal?: NodeJS.Signals): Promise<void>;
}

function startProcess(script: string, env: Record<string, string>): Proc {
  const base = { ...process.env };
  delete base.DATABASE_URL; // the gateway here keeps no record
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream as NodeJS.ReadableStream }).on('line', (l) => lines.push(l));
  return {
    child,
    lines,
    kill: (signal = 'SIGTERM') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill(signal);
      }),
  };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function model(id: string, baseUrl: string, pricing = { input: '1.00', output: '1.00' }): ModelSpec {
  return {
    id,
    displayName: `Model ${id}`,
    kind: 'Uncensored',
    context: { tokens: 128000, display: '128K' },
    pricing,
    capabilities: { tools: true, vision: false, reasoning: false },
    abliterated: false,
    defaultMaxOutputTokens: 256,
    upstreams: [{ name: 'sim', format: 'openai', baseUrl, model: 'sim-chat', credentialsSecretRef: { name: 'upstream-keys', key: 'simulator' } }],
  };
}

describe('operator and gateway processes against a real API server', () => {
  let cp: ControlPlane;
  let admin: KubeConfig;
  let core: CoreV1Api;
  let sim: Simulator;
  const operators = new Map<string, Proc>();

  const startOperator = (identity: string): Proc => {
    const proc = startProcess('operator/main.ts', {
      KUBECONFIG: cp.impersonatingKubeconfig(OPERATOR_SA, 'operator'),
      WATCH_NAMESPACE: NS,
      POD_NAMESPACE: NS,
      POD_NAME: identity,
      LEASE_NAME: 'tollgate-operator',
      PROBE_INTERVAL_MS: '1000',
      PROBE_TIMEOUT_MS: '1000',
      HEALTH_PORT: '0',
    });
    operators.set(identity, proc);
    return proc;
  };

  // Retries on 409: the operator writes status between our read and our write (as kubectl would).
  const applyCatalog = async (models: ModelSpec[]): Promise<number> => (await applyCatalogObject(admin, NS, catalog('models', models))).metadata.generation ?? 0;
  const getCatalog = (): Promise<ModelCatalogResource> => getCatalogObject(admin, NS, 'models');
  const validAt = async (generation: number) => {
    const obj = await getCatalog();
    const valid = obj.status?.conditions?.find((c) => c.type === 'Valid');
    return obj.status?.observedGeneration === generation && valid ? obj : undefined;
  };

  beforeEach((ctx) => {
    ctx.onTestFailed(() => {
      for (const [id, p] of operators) console.error(`operator ${id}:\n${p.lines.slice(-40).join('\n')}`);
    });
  });

  beforeAll(async () => {
    ensureTools();
    cp = await startControlPlane();
    admin = cp.kubeConfig();
    core = admin.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await core.createNamespace({ body: { metadata: { name: 'elsewhere' } } });
    await core.createNamespacedSecret({ namespace: 'elsewhere', body: { metadata: { name: 'not-yours' }, stringData: { k: 'v' } } });
    // The chart gives the ServiceAccounts, Roles and bindings the processes run under (and the CRD).
    const installed = await helm(['install', 'tollgate', CHART, '-n', NS, '--set', 'redis.existingSecret=tollgate-redis'], { kubeconfig: cp.kubeconfigPath });
    expect(installed.code, installed.stderr).toBe(0);
    sim = await startSimulator({ apiKey: UPSTREAM_KEY });
    await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'upstream-keys' }, stringData: { simulator: UPSTREAM_KEY } } });
    startOperator('op-1');
    await waitFor('op-1 to hold the Lease', async () => {
      const lease = await admin.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'tollgate-operator', namespace: NS });
      return lease.spec?.holderIdentity === 'op-1';
    }, 30_000);
  }, TOOLS_TIMEOUT_MS);

  afterAll(async () => {
    for (const p of operators.values()) await p.kill('SIGKILL');
    await sim?.close();
    await cp?.stop();
  });

  it('the operator reconciles a real ModelCatalog: Valid and Ready, observedGeneration, lastValid, an event', async () => {
    const generation = await applyCatalog([model('alpha', sim.openaiBaseUrl)]);
    const obj = await waitFor('Valid and Ready', async () => {
      const o = await validAt(generation);
      return o?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? o : undefined;
    });
    expect(obj.status?.conditions?.find((c) => c.type === 'Valid')).toMatchObject({ status: 'True', observedGeneration: generation });
    expect(obj.status).toMatchObject({ observedGeneration: generation, modelCount: 1, ready: 'True' });
    expect(obj.status?.lastValid?.generation).toBe(generation);
    expect(obj.status?.models?.[0]?.upstreams[0]).toMatchObject({ name: 'sim', healthy: true });
    // Status went through the subresource: the spec's generation did not move.
    expect(obj.metadata.generation).toBe(generation);
    const events = await waitFor('a Validated event', async () => {
      const list = await core.listNamespacedEvent({ namespace: NS, fieldSelector: 'involvedObject.name=models' });
      return list.items.some((e) => e.reason === 'Validated') ? list.items : undefined;
    });
    expect(events.find((e) => e.reason === 'Validated')).toMatchObject({ type: 'Normal', involvedObject: { kind: 'ModelCatalog', name: 'models', namespace: NS } });
  }, 60_000);

  it('a bad edit is Valid=False with its reason and an event; lastValid keeps the last good spec', async () => {
    const good = await getCatalog();
    const goodGeneration = good.metadata.generation ?? 0;
    const bad = model('alpha', sim.openaiBaseUrl);
    bad.upstreams[0] = { ...bad.upstreams[0]!, credentialsSecretRef: { name: 'no-such-secret', key: 'k' } };
    const generation = await applyCatalog([bad]);
    expect(generation).toBe(goodGeneration + 1);
    const obj = await waitFor('Valid=False', async () => {
      const o = await validAt(generation);
      return o?.status?.conditions?.some((c) => c.type === 'Valid' && c.status === 'False') ? o : undefined;
    });
    expect(obj.status?.conditions?.find((c) => c.type === 'Valid')).toMatchObject({ status: 'False', reason: 'CredentialsNotFound' });
    expect(obj.status?.conditions?.find((c) => c.type === 'Valid')?.message).toContain('no-such-secret');
    expect(obj.status?.lastValid?.generation).toBe(goodGeneration);
    expect(obj.status?.lastValid?.spec).toEqual(good.spec);
    await waitFor('a CredentialsNotFound warning event', async () => {
      const list = await core.listNamespacedEvent({ namespace: NS, fieldSelector: 'involvedObject.name=models' });
      return list.items.some((e) => e.reason === 'CredentialsNotFound' && e.type === 'Warning');
    });
    // Back to a good spec for what follows.
    const fixed = await applyCatalog([model('alpha', sim.openaiBaseUrl)]);
    await waitFor('valid again', async () => (await validAt(fixed))?.status?.conditions?.some((c) => c.type === 'Valid' && c.status === 'True'));
    // Everything the operator did, it did within the chart's RBAC.
    expect(operators.get('op-1')?.lines.filter((l) => /forbidden|403/i.test(l))).toEqual([]);
  }, 60_000);

  describe("the chart's RBAC: enough and no more", () => {
    const as = (user: string): KubeConfig => {
      const kc = cp.kubeConfig();
      kc.users = kc.users.map((u) => ({ ...u, impersonateUser: user }));
      return kc;
    };
    const reviewed = async (user: string, namespace: string): Promise<string[]> => {
      const review = await as(user).makeApiClient(AuthorizationV1Api).createSelfSubjectRulesReview({ body: { spec: { namespace } } });
      return (review.status?.resourceRules ?? [])
        .flatMap((r: V1ResourceRule) => (r.resources ?? []).map((res) => `${(r.apiGroups ?? []).join(',')}/${res}${r.resourceNames?.length ? `[${r.resourceNames.join(',')}]` : ''}: ${[...r.verbs].sort().join(',')}`))
        .sort();
    };
    /** What the user may do beyond what any ServiceAccount may (the server's bootstrap roles). */
    const rulesOf = async (user: string, namespace: string): Promise<string[]> => {
      const baseline = new Set(await reviewed(`system:serviceaccount:${namespace}:no-bindings`, namespace));
      return (await reviewed(user, namespace)).filter((r) => !baseline.has(r));
    };

    it('the operator may do exactly what it needs in its namespace', async () => {
      expect(await rulesOf(OPERATOR_SA, NS)).toEqual(
        [
          '/events: create,patch',
          '/secrets: get,list,watch',
          'coordination.k8s.io/leases: create',
          'coordination.k8s.io/leases[tollgate-operator]: get,update',
          'tollgate.dev/modelcatalogs: get,list,watch',
          'tollgate.dev/modelcatalogs/status: patch,update',
        ].sort(),
      );
    });

    it('the gateway may only read catalogs and Secrets in its namespace', async () => {
      expect(await rulesOf(GATEWAY_SA, NS)).toEqual(['/secrets: get,list,watch', 'tollgate.dev/modelcatalogs: get,list,watch'].sort());
    });

    it('refuses what is outside it: other namespaces, catalog specs, deletes, pods', async () => {
      const operator = as(OPERATOR_SA);
      const refused = async (what: string, call: () => Promise<unknown>) => {
        const code = await call().then(
          () => 200,
          (err: unknown) => (err as { code?: number }).code,
        );
        expect(code, what).toBe(403);
      };
      await refused('a Secret of another namespace', () => operator.makeApiClient(CoreV1Api).readNamespacedSecret({ name: 'not-yours', namespace: 'elsewhere' }));
      await refused('Secrets across namespaces', () => operator.makeApiClient(CoreV1Api).listSecretForAllNamespaces());
      await refused('editing a catalog spec', async () => {
        const obj = await getCatalog();
        await operator.makeApiClient(CustomObjectsApi).replaceNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'models', body: obj });
      });
      await refused('deleting a catalog', () => operator.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'models' }));
      await refused('listing pods', () => operator.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: NS }));
      await refused("another Lease's name", () => operator.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'kube-scheduler', namespace: NS }));
      const gateway = as(GATEWAY_SA);
      await refused('the gateway writing catalog status', async () => {
        const obj = await getCatalog();
        await gateway.makeApiClient(CustomObjectsApi).replaceNamespacedCustomObjectStatus({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'models', body: obj });
      });
      await refused('the gateway reading a Secret of another namespace', () => gateway.makeApiClient(CoreV1Api).readNamespacedSecret({ name: 'not-yours', namespace: 'elsewhere' }));
    });
  });

  describe('a gateway process watching the API server', () => {
    let redis: OwnRedisProcess;
    let gateway: Proc;
    let base: string;
    let adminBase: string;
    let key: string;
    let accountId: string;
    const ADMIN_TOKEN = 'k8s-test-admin-token';

    const chat = async (model: string) => {
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 }),
      });
      return { status: res.status, body: (await res.json()) as { id?: string; error?: { message?: string } } };
    };
    const adminApi = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${adminBase}/admin${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      expect(res.status, `${method} ${path}`).toBeLessThan(300);
      return (await res.json()) as Record<string, unknown>;
    };
    /** Edits the catalog, waits for the operator to validate it, then for the gateway to serve `ready`. */
    const follow = async (models: ModelSpec[], ready: () => Promise<boolean>): Promise<number> => {
      const started = Date.now();
      const generation = await applyCatalog(models);
      await waitFor(`the gateway to follow generation ${generation}`, async () => ((await ready()) ? true : undefined), FOLLOW_MS);
      return Date.now() - started;
    };

    beforeAll(async () => {
      redis = await startRedisServer();
      const [port, metricsPort, adminPort] = [await freePort(), await freePort(), await freePort()];
      gateway = startProcess('src/gateway-main.ts', {
        KUBECONFIG: cp.impersonatingKubeconfig(GATEWAY_SA, 'gateway'),
        TOLLGATE_CATALOG_SOURCE: 'kubernetes',
        TOLLGATE_CATALOG_NAMESPACE: NS,
        REDIS_URL: redis.url,
        HOST: '127.0.0.1',
        PORT: String(port),
        METRICS_PORT: String(metricsPort),
        ADMIN_PORT: String(adminPort),
        TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
        LOG_LEVEL: 'warn',
      });
      base = `http://127.0.0.1:${port}`;
      adminBase = `http://127.0.0.1:${adminPort}`;
      await waitFor('the gateway to answer', async () => (await fetch(`${base}/healthz`)).ok, 30_000);
      const account = await adminApi('POST', '/accounts', { name: 'k8s' });
      accountId = String(account.id);
      key = String((await adminApi('POST', `/accounts/${accountId}/keys`, { name: 'k8s' })).key);
      await adminApi('POST', `/accounts/${accountId}/credit`, { amount_usd: '10', idempotency_key: 'k8s-credit' });
      await waitFor('alpha served', async () => (await chat('alpha')).status === 200, FOLLOW_MS);
    }, 60_000);
    afterAll(async () => {
      await gateway?.kill();
      await redis?.stop();
    });
    beforeEach((ctx) => {
      ctx.onTestFailed(() => console.error(`gateway:\n${gateway.lines.slice(-40).join('\n')}`));
    });

    it(`follows edits within ${FOLLOW_MS / 1000} s: a new model answers, a removed one is 404, a new price is billed`, async () => {
      const added = await follow([model('alpha', sim.openaiBaseUrl), model('beta', sim.openaiBaseUrl)], async () => (await chat('beta')).status === 200);
      expect(added).toBeLessThan(FOLLOW_MS);

      const removed = await follow([model('beta', sim.openaiBaseUrl)], async () => (await chat('alpha')).status === 404);
      expect(removed).toBeLessThan(FOLLOW_MS);
      expect((await chat('alpha')).body.error?.message).toMatch(/alpha/);

      // beta costs 1 micro-USD per input and per output token; then 2 and 4.
      type Usage = { requestId: string; model: string; cost: number; usage: { input: number; output: number } };
      const usageList = async () => (await adminApi('GET', `/accounts/${accountId}/usage?limit=1000`)).usage as Usage[];
      /** Sends a request to beta and returns its usage record (the one that was not there before). */
      const billed = async (): Promise<Usage | undefined> => {
        const seen = new Set((await usageList()).map((u) => u.requestId));
        if ((await chat('beta')).status !== 200) return undefined;
        return waitFor('the usage record', async () => (await usageList()).find((u) => !seen.has(u.requestId) && u.model === 'beta'));
      };
      const old = await billed();
      expect(old?.usage.input).toBeGreaterThan(0);
      expect(old?.cost).toBe((old?.usage.input ?? 0) + (old?.usage.output ?? 0));

      const repriced = await follow([model('beta', sim.openaiBaseUrl, { input: '2.00', output: '4.00' })], async () => {
        const u = await billed();
        return u !== undefined && u.cost === 2 * u.usage.input + 4 * u.usage.output;
      });
      expect(repriced).toBeLessThan(FOLLOW_MS);
    }, 90_000);

    it('keeps serving the last valid catalog while the API server is away, and follows edits once it is back', async () => {
      await cp.stopApiServer();
      try {
        for (let i = 0; i < 5; i += 1) {
          expect((await chat('beta')).status).toBe(200);
          await new Promise((r) => setTimeout(r, 500));
        }
      } finally {
        await cp.startApiServer();
      }
      // The watches reconnect (client-node retries; the operator re-lists): an edit is followed again.
      const back = await follow([model('beta', sim.openaiBaseUrl, { input: '2.00', output: '4.00' }), model('gamma', sim.openaiBaseUrl)], async () => (await chat('gamma')).status === 200);
      expect(back).toBeLessThan(FOLLOW_MS * 3);
    }, 90_000);
  });

  it('two operators share one Lease; when the leader is killed the survivor takes over and reconciles', async () => {
    const coordination = admin.makeApiClient(CoordinationV1Api);
    startOperator('op-2');
    // op-2 waits: op-1 renews the Lease.
    await new Promise((r) => setTimeout(r, 3000));
    expect((await coordination.readNamespacedLease({ name: 'tollgate-operator', namespace: NS })).spec?.holderIdentity).toBe('op-1');
    await operators.get('op-1')?.kill('SIGKILL');
    const killedAt = Date.now();
    await waitFor('op-2 to take the Lease', async () => (await coordination.readNamespacedLease({ name: 'tollgate-operator', namespace: NS })).spec?.holderIdentity === 'op-2', 40_000);
    // The Lease lasts 15 s (the operator's default): the survivor may take it only after it expired.
    expect(Date.now() - killedAt).toBeGreaterThan(5_000);
    const generation = await applyCatalog([model('beta', sim.openaiBaseUrl), model('delta', sim.openaiBaseUrl)]);
    const obj = await waitFor('op-2 to validate the edit', async () => (await validAt(generation))?.status?.conditions?.some((c) => c.type === 'Valid' && c.status === 'True'), 20_000);
    expect(obj).toBe(true);
  }, 90_000);
});
