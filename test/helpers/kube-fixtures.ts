// Shared pieces of the Kubernetes integration tests: catalog objects, a controllable loopback upstream,
// and a poll-until helper (everything here converges asynchronously through watches).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { ModelCatalogResource, ModelSpec, UpstreamSpec } from '../../src/catalog/types.js';

export const GROUP = 'tollgate.dev';
export const VERSION = 'v1alpha1';
export const PLURAL = 'modelcatalogs';

export function model(id: string, upstreams: UpstreamSpec[]): ModelSpec {
  return {
    id,
    displayName: `Model ${id}`,
    kind: 'Uncensored',
    context: { tokens: 128000, display: '128K' },
    pricing: { input: '0.30', output: '1.20' },
    capabilities: { tools: true, vision: false, reasoning: false },
    abliterated: false,
    defaultMaxOutputTokens: 4096,
    upstreams,
  };
}

export function upstream(name: string, baseUrl: string, secret?: { name: string; key: string }): UpstreamSpec {
  return { name, baseUrl, format: 'openai', model: `up-${name}`, ...(secret ? { credentialsSecretRef: secret } : {}) };
}

export function catalog(name: string, models: ModelSpec[]): ModelCatalogResource {
  return { apiVersion: 'tollgate.dev/v1alpha1', kind: 'ModelCatalog', metadata: { name }, spec: { models } };
}

/** A loopback OpenAI-format upstream whose health the test switches; it requires its API key. */
export interface FakeUpstream {
  baseUrl: string;
  up: boolean;
  apiKey: string;
  probes: number;
  close(): Promise<void>;
}

export async function startFakeUpstream(apiKey: string): Promise<FakeUpstream> {
  const state = { up: true, apiKey, probes: 0 };
  const server: Server = createServer((req, res) => {
    state.probes += 1;
    if (!state.up) return void res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"down"}}');
    if (req.headers.authorization !== `Bearer ${state.apiKey}`) {
      return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"bad key"}}');
    }
    if (req.url !== '/v1/models') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(state, {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  }) as FakeUpstream;
}

export async function waitFor<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function apis(kc: KubeConfig): { custom: CustomObjectsApi; core: CoreV1Api } {
  return { custom: kc.makeApiClient(CustomObjectsApi), core: kc.makeApiClient(CoreV1Api) };
}

/** Creates or replaces a catalog. A replace carries the resourceVersion just read; the operator writes
 *  status meanwhile (a real API server then answers 409 Conflict), so it reads again and retries, as
 *  kubectl does. */
export async function applyCatalog(kc: KubeConfig, namespace: string, obj: ModelCatalogResource): Promise<ModelCatalogResource> {
  const { custom } = apis(kc);
  for (let attempt = 0; ; attempt += 1) {
    try {
      const current = (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name: obj.metadata.name })) as ModelCatalogResource;
      return (await custom.replaceNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL,
        name: obj.metadata.name,
        body: { ...obj, metadata: { ...obj.metadata, resourceVersion: current.metadata.resourceVersion } },
      })) as ModelCatalogResource;
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code === 409 && attempt < 20) continue;
      if (code !== 404) throw err;
      return (await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, body: obj })) as ModelCatalogResource;
    }
  }
}

export async function getCatalog(kc: KubeConfig, namespace: string, name: string): Promise<ModelCatalogResource> {
  return (await apis(kc).custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name })) as ModelCatalogResource;
}

export async function putSecret(kc: KubeConfig, namespace: string, name: string, data: Record<string, string>): Promise<void> {
  const { core } = apis(kc);
  const body = { metadata: { name, namespace }, stringData: data };
  try {
    await core.createNamespacedSecret({ namespace, body });
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
    await core.replaceNamespacedSecret({ name, namespace, body });
  }
}
