// An in-process stand-in for the Kubernetes API server, speaking its REST protocol over loopback HTTP
// for exactly what Tollgate uses: namespaced CRUD, list + watch with resourceVersions, the status
// subresource, optimistic concurrency, merge/JSON patch, Status error bodies and watch compaction (410).
// Kept only for faults a real server cannot be made to produce on cue (test/integration/
// kube-source-faults.test.ts): dropping every open watch at a chosen moment, answering a chosen number
// of calls with a 5xx, and compacting history so the resumed watch gets 410 Gone. Everything else runs
// against a real etcd + kube-apiserver (test/k8s/harness/control-plane.ts).
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { validateCatalogSchema } from '../../src/catalog/schema.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface KubeObject extends JsonObject {
  metadata: JsonObject;
}

interface ResourceType {
  group: string; // '' for core
  version: string;
  plural: string;
  kind: string;
  /** Has a status subresource: writes to the main resource ignore status and vice versa. */
  statusSubresource: boolean;
  /** Custom resources reject strategic merge patch, as the real server does. */
  custom: boolean;
  /** metadata.generation is maintained (bumped on spec changes). */
  generation: boolean;
}

const RESOURCES: ResourceType[] = [
  { group: 'tollgate.dev', version: 'v1alpha1', plural: 'modelcatalogs', kind: 'ModelCatalog', statusSubresource: true, custom: true, generation: true },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', statusSubresource: false, custom: false, generation: false },
  { group: '', version: 'v1', plural: 'events', kind: 'Event', statusSubresource: false, custom: false, generation: false },
  { group: 'events.k8s.io', version: 'v1', plural: 'events', kind: 'Event', statusSubresource: false, custom: false, generation: false },
  { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease', statusSubresource: false, custom: false, generation: false },
];

function apiVersionOf(r: ResourceType): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

function resourceId(r: ResourceType): string {
  return `${r.group}/${r.version}/${r.plural}`;
}

interface WatchEvent {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  resource: string;
  object: KubeObject;
}

interface Watcher {
  resource: string;
  namespace: string | undefined;
  selector: Selector;
  res: ServerResponse;
  bookmarks: boolean;
  r: ResourceType;
}

export interface InjectedError {
  /** HTTP method to match (any when absent). */
  method?: string;
  /** Substring of the request path to match (any when absent). */
  path?: string;
  /** Match only watch (true) or only non-watch (false) requests. */
  watch?: boolean;
  code: number;
  reason?: string;
  message?: string;
  /** How many requests fail (default 1). */
  times?: number;
}

interface Selector {
  labels: [string, string][];
  fields: [string, string][];
}

class HttpError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: JsonObject,
  ) {
    super(message);
  }
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? clone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key] ?? null, value);
  }
  return out;
}

function decodePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new HttpError(422, 'Invalid', `invalid JSON pointer ${pointer}`);
  return pointer
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function pointerParent(doc: Json, parts: string[]): { parent: JsonObject | Json[]; last: string } {
  let node: Json = doc;
  for (const part of parts.slice(0, -1)) {
    if (Array.isArray(node)) node = node[Number(part)] ?? null;
    else if (isObject(node)) node = node[part] ?? null;
    else node = null;
    if (node === null) throw new HttpError(422, 'Invalid', `path ${parts.join('/')} does not exist`);
  }
  if (!Array.isArray(node) && !isObject(node)) throw new HttpError(422, 'Invalid', `path ${parts.join('/')} does not exist`);
  return { parent: node, last: parts[parts.length - 1] ?? '' };
}

function pointerGet(doc: Json, pointer: string): Json | undefined {
  let node: Json | undefined = doc;
  for (const part of decodePointer(pointer)) {
    if (Array.isArray(node)) node = node[Number(part)];
    else if (isObject(node)) node = node[part];
    else return undefined;
  }
  return node;
}

/** RFC 6902 JSON patch (add, remove, replace, move, copy, test). */
function jsonPatch(doc: Json, ops: Json): Json {
  if (!Array.isArray(ops)) throw new HttpError(400, 'BadRequest', 'JSON patch must be an array of operations');
  let out = clone(doc);
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string') {
      throw new HttpError(400, 'BadRequest', 'each JSON patch operation needs op and path');
    }
    const parts = decodePointer(op.path);
    const remove = (path: string[]): Json => {
      const { parent, last } = pointerParent(out, path);
      if (Array.isArray(parent)) {
        const index = Number(last);
        if (!(index >= 0 && index < parent.length)) throw new HttpError(422, 'Invalid', `index ${last} out of range`);
        return parent.splice(index, 1)[0] ?? null;
      }
      if (!(last in parent)) throw new HttpError(422, 'Invalid', `path ${op.path as string} does not exist`);
      const value = parent[last] ?? null;
      delete parent[last];
      return value;
    };
    const add = (path: string[], value: Json): void => {
      if (path.length === 0) {
        out = clone(value);
        return;
      }
      const { parent, last } = pointerParent(out, path);
      if (Array.isArray(parent)) {
        const index = last === '-' ? parent.length : Number(last);
        if (!(index >= 0 && index <= parent.length)) throw new HttpError(422, 'Invalid', `index ${last} out of range`);
        parent.splice(index, 0, clone(value));
      } else parent[last] = clone(value);
    };
    switch (op.op) {
      case 'add':
        add(parts, op.value ?? null);
        break;
      case 'remove':
        remove(parts);
        break;
      case 'replace':
        remove(parts);
        add(parts, op.value ?? null);
        break;
      case 'move':
      case 'copy': {
        if (typeof op.from !== 'string') throw new HttpError(400, 'BadRequest', `${op.op} needs from`);
        const value = op.op === 'move' ? remove(decodePointer(op.from)) : clone(pointerGet(out, op.from) ?? null);
        add(parts, value);
        break;
      }
      case 'test':
        if (!deepEqual(pointerGet(out, op.path), op.value)) {
          throw new HttpError(422, 'Invalid', `test operation failed at ${op.path}`);
        }
        break;
      default:
        throw new HttpError(400, 'BadRequest', `unknown JSON patch op ${String(op.op)}`);
    }
  }
  return out;
}

function parseSelector(labelSelector: string | null, fieldSelector: string | null): Selector {
  const pairs = (text: string | null): [string, string][] =>
    (text ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => {
        const [k, v] = s.split(/==?/);
        if (k === undefined || v === undefined) throw new HttpError(400, 'BadRequest', `unsupported selector ${s}`);
        return [k.trim(), v.trim()];
      });
  return { labels: pairs(labelSelector), fields: pairs(fieldSelector) };
}

function matches(obj: KubeObject, selector: Selector): boolean {
  const labels = isObject(obj.metadata.labels) ? obj.metadata.labels : {};
  for (const [k, v] of selector.labels) if (labels[k] !== v) return false;
  for (const [k, v] of selector.fields) {
    const value = pointerGet(obj, `/${k.split('.').join('/')}`);
    if (value !== v) return false;
  }
  return true;
}

/** Everything except metadata and status: what a spec change means for metadata.generation. */
function specPart(obj: JsonObject): JsonObject {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = obj;
  return rest;
}

export interface FakeKubeApiServerOptions {
  /**
   * Validate ModelCatalog writes against the CRD (openAPIV3Schema + CEL rules) as the real server
   * does, answering 422 Invalid (default true). Off simulates a cluster with an older, laxer CRD.
   * One difference: the real server prunes unknown fields (a warning), this one rejects them.
   */
  validateCatalogs?: boolean;
}

export class FakeKubeApiServer {
  validateCatalogs: boolean;
  private server: Server | undefined;
  private port = 0;
  private rv = 0;
  private compactedRv = 0;
  /** resource id -> "namespace/name" -> object */
  private readonly store = new Map<string, Map<string, KubeObject>>();
  private history: WatchEvent[] = [];
  private readonly watchers = new Set<Watcher>();
  private readonly errors: InjectedError[] = [];
  /** Watches answered with 410 Gone (too old resourceVersion), for assertions. */
  expiredWatches = 0;
  /** Requests seen, "METHOD path?query", for assertions. */
  readonly requests: string[] = [];

  constructor(opts: FakeKubeApiServerOptions = {}) {
    this.validateCatalogs = opts.validateCatalogs ?? true;
  }

  /** 422 Invalid with one cause per issue, the shape the real server gives for schema violations. */
  private admit(r: ResourceType, obj: KubeObject): void {
    if (!this.validateCatalogs || r.kind !== 'ModelCatalog') return;
    const issues = validateCatalogSchema(obj);
    if (issues.length === 0) return;
    const name = String(obj.metadata.name ?? '');
    const field = (path: string): string => path.replace(/^\//, '').replace(/\/(\d+)/g, '[$1]').replace(/\//g, '.');
    throw new HttpError(
      422,
      'Invalid',
      `${r.kind}.${r.group} "${name}" is invalid: ${issues.map((i) => `${field(i.path)}: Invalid value: ${i.message}`).join(', ')}`,
      {
        name,
        group: r.group,
        kind: r.kind,
        causes: issues.map((i) => ({ reason: 'FieldValueInvalid', message: `Invalid value: ${i.message}`, field: field(i.path) })),
      },
    );
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.sendStatus(res, err instanceof HttpError ? err : new HttpError(500, 'InternalError', String(err)));
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this.url;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** A KubeConfig pointing at this server, as client-node would load from a kubeconfig file. */
  kubeConfig(namespace = 'default'): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'fake' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake', namespace }],
      currentContext: 'fake',
    });
    return kc;
  }

  async stop(): Promise<void> {
    this.dropWatches();
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    this.server = undefined;
  }

  /** Ends every open watch stream (as an API server restart or a load balancer timeout would). */
  dropWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  /** Compacts history: a watch from any resourceVersion before now gets 410 Gone. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history = [];
  }

  /** Makes the next matching request(s) fail with the given status. */
  injectError(error: InjectedError): void {
    this.errors.push({ times: 1, ...error });
  }

  /** Sends a BOOKMARK to every watch that asked for bookmarks. */
  bookmark(): void {
    for (const w of this.watchers) if (w.bookmarks) this.writeBookmark(w);
  }

  get resourceVersion(): number {
    return this.rv;
  }

  /** Direct read of stored state, for assertions. */
  getObject(group: string, plural: string, namespace: string, name: string): KubeObject | undefined {
    const r = RESOURCES.find((x) => x.group === group && x.plural === plural);
    if (!r) return undefined;
    const obj = this.store.get(resourceId(r))?.get(`${namespace}/${name}`);
    return obj ? clone(obj) : undefined;
  }

  listObjects(group: string, plural: string, namespace?: string): KubeObject[] {
    const r = RESOURCES.find((x) => x.group === group && x.plural === plural);
    if (!r) return [];
    return [...(this.store.get(resourceId(r))?.values() ?? [])]
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .map(clone);
  }

  // ---- HTTP ----

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const method = req.method ?? 'GET';
    this.requests.push(`${method} ${url.pathname}${url.search}`);
    const isWatch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const injected = this.errors.find(
      (e) =>
        (e.method === undefined || e.method === method) &&
        (e.path === undefined || url.pathname.includes(e.path)) &&
        (e.watch === undefined || e.watch === isWatch),
    );
    if (injected) {
      injected.times = (injected.times ?? 1) - 1;
      if (injected.times <= 0) this.errors.splice(this.errors.indexOf(injected), 1);
      throw new HttpError(injected.code, injected.reason ?? 'InternalError', injected.message ?? 'injected error');
    }
    const body = method === 'GET' || method === 'DELETE' ? await this.readBody(req, true) : await this.readBody(req, false);

    if (this.discovery(url.pathname, res)) return;
    const route = this.route(url.pathname);
    if (!route) throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${url.pathname})`);
    const { r, namespace, name, subresource } = route;
    if (subresource !== undefined && (subresource !== 'status' || !r.statusSubresource)) {
      throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${subresource})`);
    }
    const selector = parseSelector(url.searchParams.get('labelSelector'), url.searchParams.get('fieldSelector'));

    if (method === 'GET' && name === undefined) {
      if (isWatch) return this.startWatch(req, res, r, namespace, selector, url.searchParams);
      return this.send(res, 200, this.list(r, namespace, selector));
    }
    if (name === undefined && method !== 'POST') throw new HttpError(405, 'MethodNotAllowed', `${method} needs a name`);
    if (namespace === undefined) throw new HttpError(404, 'NotFound', 'namespaced resource needs a namespace');
    switch (method) {
      case 'GET':
        return this.send(res, 200, this.mustGet(r, namespace, name ?? ''));
      case 'POST':
        if (name !== undefined) throw new HttpError(405, 'MethodNotAllowed', 'POST to a named resource');
        return this.send(res, 201, this.create(r, namespace, this.asObject(body)));
      case 'PUT':
        return this.send(res, 200, this.update(r, namespace, name ?? '', this.asObject(body), subresource === 'status'));
      case 'PATCH': {
        const current = this.mustGet(r, namespace, name ?? '');
        const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
        let patched: Json;
        if (type === 'application/merge-patch+json') patched = mergePatch(current, body);
        else if (type === 'application/json-patch+json') patched = jsonPatch(current, body);
        else if (type === 'application/strategic-merge-patch+json' && !r.custom) patched = mergePatch(current, body);
        else throw new HttpError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json${r.custom ? '' : ', application/strategic-merge-patch+json'}`);
        const next = this.asObject(patched);
        // A patch checks resourceVersion only when the patch itself sets one.
        const patchRv = isObject(body) && isObject(body.metadata) ? body.metadata.resourceVersion : undefined;
        if (patchRv === undefined) next.metadata.resourceVersion = current.metadata.resourceVersion ?? null;
        return this.send(res, 200, this.update(r, namespace, name ?? '', next, subresource === 'status'));
      }
      case 'DELETE':
        return this.send(res, 200, this.remove(r, namespace, name ?? '', body));
      default:
        throw new HttpError(405, 'MethodNotAllowed', `method ${method} not allowed`);
    }
  }

  private async readBody(req: IncomingMessage, optional: boolean): Promise<Json> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    if (text.trim() === '') {
      if (optional) return null;
      throw new HttpError(400, 'BadRequest', 'the request body is empty');
    }
    try {
      return JSON.parse(text) as Json;
    } catch {
      throw new HttpError(400, 'BadRequest', 'the request body is not valid JSON');
    }
  }

  private asObject(body: Json): KubeObject {
    if (!isObject(body)) throw new HttpError(400, 'BadRequest', 'the request body must be an object');
    if (!isObject(body.metadata)) body.metadata = {};
    return body as KubeObject;
  }

  private discovery(path: string, res: ServerResponse): boolean {
    const groups = [...new Set(RESOURCES.filter((r) => r.group).map((r) => r.group))];
    if (path === '/version') {
      this.send(res, 200, { major: '1', minor: '31', gitVersion: 'v1.31.0-tollgate-fake', platform: 'linux/amd64' });
      return true;
    }
    if (path === '/api') {
      this.send(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
      return true;
    }
    if (path === '/apis') {
      this.send(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: groups.map((g) => {
          const version = RESOURCES.find((r) => r.group === g)?.version ?? 'v1';
          const gv = { groupVersion: `${g}/${version}`, version };
          return { name: g, versions: [gv], preferredVersion: gv };
        }),
      });
      return true;
    }
    const m = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(path);
    if (!m) return false;
    const group = m[2] ?? '';
    const version = m[1] ?? m[3] ?? '';
    const rs = RESOURCES.filter((r) => r.group === group && r.version === version);
    if (rs.length === 0) return false;
    const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
    const resources: Json[] = [];
    for (const r of rs) {
      resources.push({ name: r.plural, singularName: r.kind.toLowerCase(), namespaced: true, kind: r.kind, verbs });
      if (r.statusSubresource) resources.push({ name: `${r.plural}/status`, singularName: '', namespaced: true, kind: r.kind, verbs: ['get', 'patch', 'update'] });
    }
    this.send(res, 200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources });
    return true;
  }

  private route(path: string): { r: ResourceType; namespace?: string; name?: string; subresource?: string } | undefined {
    const m = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))(?:\/watch)?(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/.exec(path);
    if (!m) return undefined;
    const group = m[2] ?? '';
    const version = m[1] ?? m[3] ?? '';
    const r = RESOURCES.find((x) => x.group === group && x.version === version && x.plural === m[5]);
    if (!r) return undefined;
    return { r, namespace: m[4], name: m[6], subresource: m[7] };
  }

  private bucket(r: ResourceType): Map<string, KubeObject> {
    let b = this.store.get(resourceId(r));
    if (!b) {
      b = new Map();
      this.store.set(resourceId(r), b);
    }
    return b;
  }

  private notFound(r: ResourceType, name: string): HttpError {
    return new HttpError(404, 'NotFound', `${r.plural}${r.group ? `.${r.group}` : ''} "${name}" not found`, {
      name,
      group: r.group,
      kind: r.plural,
    });
  }

  private mustGet(r: ResourceType, namespace: string, name: string): KubeObject {
    const obj = this.bucket(r).get(`${namespace}/${name}`);
    if (!obj) throw this.notFound(r, name);
    return clone(obj);
  }

  private list(r: ResourceType, namespace: string | undefined, selector: Selector): JsonObject {
    const items = [...this.bucket(r).values()]
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .filter((o) => matches(o, selector))
      .sort((a, b) => String(a.metadata.name).localeCompare(String(b.metadata.name)))
      .map(clone);
    return { apiVersion: apiVersionOf(r), kind: `${r.kind}List`, metadata: { resourceVersion: String(this.rv) }, items };
  }

  private record(r: ResourceType, type: WatchEvent['type'], obj: KubeObject): void {
    const event: WatchEvent = { rv: this.rv, type, resource: resourceId(r), object: clone(obj) };
    this.history.push(event);
    for (const w of this.watchers) this.deliver(w, event);
  }

  private deliver(w: Watcher, event: WatchEvent): void {
    if (w.resource !== event.resource) return;
    if (w.namespace !== undefined && event.object.metadata.namespace !== w.namespace) return;
    if (!matches(event.object, w.selector)) return;
    w.res.write(`${JSON.stringify({ type: event.type, object: event.object })}\n`);
  }

  private writeBookmark(w: Watcher): void {
    const object = { kind: w.r.kind, apiVersion: apiVersionOf(w.r), metadata: { resourceVersion: String(this.rv) } };
    w.res.write(`${JSON.stringify({ type: 'BOOKMARK', object })}\n`);
  }

  private startWatch(
    req: IncomingMessage,
    res: ServerResponse,
    r: ResourceType,
    namespace: string | undefined,
    selector: Selector,
    params: URLSearchParams,
  ): void {
    const rvParam = params.get('resourceVersion') ?? '';
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    const watcher: Watcher = {
      resource: resourceId(r),
      namespace,
      selector,
      res,
      r,
      bookmarks: params.get('allowWatchBookmarks') === 'true',
    };
    if (rvParam === '' || rvParam === '0') {
      // "Any" version: start with synthetic ADDED events for the current state.
      for (const obj of [...this.bucket(r).values()]) {
        if ((namespace === undefined || obj.metadata.namespace === namespace) && matches(obj, selector)) {
          res.write(`${JSON.stringify({ type: 'ADDED', object: obj })}\n`);
        }
      }
    } else {
      const from = Number(rvParam);
      if (!Number.isInteger(from) || from < this.compactedRv) {
        this.expiredWatches += 1;
        // As the real server: a 200 stream carrying one ERROR event with a 410 Status, then the end.
        const status = this.statusBody(new HttpError(410, 'Expired', `too old resource version: ${rvParam} (${this.compactedRv})`));
        res.end(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
        return;
      }
      for (const event of this.history) if (event.rv > from) this.deliver(watcher, event);
    }
    if (watcher.bookmarks) this.writeBookmark(watcher);
    this.watchers.add(watcher);
    const timeoutSeconds = Number(params.get('timeoutSeconds') ?? '0');
    const timer = timeoutSeconds > 0 ? setTimeout(() => res.end(), timeoutSeconds * 1000) : undefined;
    const cleanup = (): void => {
      if (timer) clearTimeout(timer);
      this.watchers.delete(watcher);
    };
    req.on('close', cleanup);
    res.on('close', cleanup);
  }

  private create(r: ResourceType, namespace: string, obj: KubeObject): KubeObject {
    const meta = obj.metadata;
    if (meta.namespace !== undefined && meta.namespace !== null && meta.namespace !== namespace) {
      throw new HttpError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
    }
    let name = typeof meta.name === 'string' ? meta.name : '';
    if (!name && typeof meta.generateName === 'string') name = `${meta.generateName}${randomUUID().slice(0, 5)}`;
    if (!name) throw new HttpError(422, 'Invalid', `${r.kind} is invalid: metadata.name: Required value: name or generateName is required`);
    const bucket = this.bucket(r);
    if (bucket.has(`${namespace}/${name}`)) {
      throw new HttpError(409, 'AlreadyExists', `${r.plural}${r.group ? `.${r.group}` : ''} "${name}" already exists`, { name, group: r.group, kind: r.plural });
    }
    const stored: KubeObject = {
      ...clone(obj),
      apiVersion: apiVersionOf(r),
      kind: r.kind,
      metadata: {
        ...clone(meta),
        name,
        namespace,
        uid: randomUUID(),
        resourceVersion: String(this.rv + 1),
        creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      },
    };
    if (r.generation) stored.metadata.generation = 1;
    if (r.statusSubresource) delete stored.status;
    this.admit(r, stored);
    if (r.kind === 'Secret') this.foldStringData(stored);
    this.rv += 1;
    bucket.set(`${namespace}/${name}`, stored);
    this.record(r, 'ADDED', stored);
    return clone(stored);
  }

  private foldStringData(secret: KubeObject): void {
    if (isObject(secret.stringData)) {
      const data = isObject(secret.data) ? secret.data : {};
      for (const [k, v] of Object.entries(secret.stringData)) data[k] = Buffer.from(String(v)).toString('base64');
      secret.data = data;
      delete secret.stringData;
    }
  }

  private update(r: ResourceType, namespace: string, name: string, obj: KubeObject, status: boolean): KubeObject {
    const bucket = this.bucket(r);
    const current = bucket.get(`${namespace}/${name}`);
    if (!current) throw this.notFound(r, name);
    if (obj.metadata.name !== undefined && obj.metadata.name !== name) {
      throw new HttpError(400, 'BadRequest', 'the name of the object does not match the name on the URL');
    }
    const sentRv = obj.metadata.resourceVersion;
    if (sentRv !== undefined && sentRv !== null && sentRv !== '' && sentRv !== current.metadata.resourceVersion) {
      throw new HttpError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${r.plural}${r.group ? `.${r.group}` : ''} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { name, group: r.group, kind: r.plural },
      );
    }
    let next: KubeObject;
    if (status) {
      // The status subresource takes status only; spec and metadata stay as stored.
      next = clone(current);
      if (obj.status === undefined) delete next.status;
      else next.status = clone(obj.status);
    } else {
      next = { ...clone(obj), apiVersion: apiVersionOf(r), kind: r.kind };
      // Server-owned metadata survives whatever the client sent.
      next.metadata = {
        ...clone(obj.metadata),
        name,
        namespace,
        uid: current.metadata.uid ?? null,
        creationTimestamp: current.metadata.creationTimestamp ?? null,
      };
      if (r.statusSubresource) {
        if (current.status === undefined) delete next.status;
        else next.status = clone(current.status);
      }
      if (r.kind === 'Secret') this.foldStringData(next);
      this.admit(r, next);
      if (r.generation) {
        const gen = Number(current.metadata.generation ?? 1);
        next.metadata.generation = deepEqual(specPart(current), specPart(next)) ? gen : gen + 1;
      }
    }
    next.metadata.resourceVersion = current.metadata.resourceVersion ?? null;
    if (deepEqual(current, next)) return clone(current); // a no-op write does not bump resourceVersion
    this.rv += 1;
    next.metadata.resourceVersion = String(this.rv);
    bucket.set(`${namespace}/${name}`, next);
    this.record(r, 'MODIFIED', next);
    return clone(next);
  }

  private remove(r: ResourceType, namespace: string, name: string, body: Json): KubeObject {
    const bucket = this.bucket(r);
    const current = bucket.get(`${namespace}/${name}`);
    if (!current) throw this.notFound(r, name);
    const pre = isObject(body) && isObject(body.preconditions) ? body.preconditions : undefined;
    if (pre?.resourceVersion !== undefined && pre.resourceVersion !== current.metadata.resourceVersion) {
      throw new HttpError(409, 'Conflict', `Precondition failed: ResourceVersion in precondition: ${String(pre.resourceVersion)}, ResourceVersion in object meta: ${String(current.metadata.resourceVersion)}`);
    }
    if (pre?.uid !== undefined && pre.uid !== current.metadata.uid) {
      throw new HttpError(409, 'Conflict', 'Precondition failed: UID in precondition does not match');
    }
    bucket.delete(`${namespace}/${name}`);
    this.rv += 1;
    const deleted = clone(current);
    deleted.metadata.resourceVersion = String(this.rv);
    this.record(r, 'DELETED', deleted);
    return deleted;
  }

  private statusBody(err: HttpError): JsonObject {
    const body: JsonObject = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: err.message,
      reason: err.reason,
      code: err.code,
    };
    if (err.details) body.details = err.details;
    return body;
  }

  private sendStatus(res: ServerResponse, err: HttpError): void {
    if (res.headersSent) {
      res.end();
      return;
    }
    this.send(res, err.code, this.statusBody(err));
  }

  private send(res: ServerResponse, code: number, body: Json): void {
    const text = JSON.stringify(body);
    res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

export async function startFakeKubeApiServer(): Promise<FakeKubeApiServer> {
  const server = new FakeKubeApiServer();
  await server.start();
  return server;
}
