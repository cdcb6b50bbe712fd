import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PRICE_PATTERN } from '../../src/catalog/price.js';
import { UPSTREAM_FORMAT_NAMES } from '../../src/formats/index.js';
import { CATALOG_CRD_PATH, CEL_CHECKS, catalogOpenApiSchema, collectCrdCelRules } from '../../src/catalog/schema.js';

type Node = Record<string, unknown>;
const crd = parse(readFileSync(CATALOG_CRD_PATH, 'utf8')) as {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: Node;
    versions: { name: string; served: boolean; storage: boolean; subresources: Node; additionalPrinterColumns: Node[]; schema: { openAPIV3Schema: Node } }[];
  };
};
const v1alpha1 = crd.spec.versions.find((v) => v.name === 'v1alpha1')!;
const spec = (v1alpha1.schema.openAPIV3Schema.properties as Node).spec as Node;

/** Every schema node with its dotted path. */
function nodes(node: Node, path = ''): [string, Node][] {
  const out: [string, Node][] = [[path, node]];
  for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Node>)) {
    out.push(...nodes(child, path ? `${path}.${name}` : name));
  }
  if (node.items) out.push(...nodes(node.items as Node, `${path}[]`));
  return out;
}
function at(path: string): Node {
  const found = nodes(v1alpha1.schema.openAPIV3Schema).find(([p]) => p === path);
  if (!found) throw new Error(`no schema node ${path}`);
  return found[1];
}

describe('crds/modelcatalog.yaml', () => {
  it('is the file next to the project root that schema.ts loaded', () => {
    expect(CATALOG_CRD_PATH).toBe(fileURLToPath(new URL('../../crds/modelcatalog.yaml', import.meta.url)));
    // The CRD's schema, with the upstream formats of the gateway's format table as the only formats.
    const expected = structuredClone(v1alpha1.schema.openAPIV3Schema) as Node;
    const models = ((expected.properties as Record<string, Node>).spec!.properties as Record<string, Node>).models!;
    const upstreams = ((models.items as Node).properties as Record<string, Node>).upstreams!;
    ((upstreams.items as Node).properties as Record<string, Node>).format!.enum = [...UPSTREAM_FORMAT_NAMES];
    expect(catalogOpenApiSchema).toEqual(expected);
  });

  it('declares the resource', () => {
    expect(crd.apiVersion).toBe('apiextensions.k8s.io/v1');
    expect(crd.kind).toBe('CustomResourceDefinition');
    expect(crd.metadata.name).toBe('modelcatalogs.tollgate.dev');
    expect(crd.spec.group).toBe('tollgate.dev');
    expect(crd.spec.scope).toBe('Namespaced');
    expect(crd.spec.names).toMatchObject({ kind: 'ModelCatalog', plural: 'modelcatalogs', singular: 'modelcatalog', shortNames: ['mcat'] });
    expect(crd.spec.versions).toHaveLength(1);
    expect(v1alpha1).toMatchObject({ served: true, storage: true, subresources: { status: {} } });
    expect(v1alpha1.additionalPrinterColumns.map((c) => [c.name, c.jsonPath])).toEqual([
      ['Models', '.status.modelCount'],
      ['Ready', '.status.ready'],
      ['Age', '.metadata.creationTimestamp'],
    ]);
  });

  it('has a structural schema the API server accepts', () => {
    for (const [path, node] of nodes(v1alpha1.schema.openAPIV3Schema)) {
      expect(typeof node.type, `${path} has a type`).toBe('string');
      // Structural schemas forbid these; strictness for files comes from schema.ts instead.
      expect(node.additionalProperties, `${path} additionalProperties`).toBeUndefined();
      expect(node.uniqueItems, `${path} uniqueItems`).toBeUndefined();
    }
    // CEL cost estimation needs bounds on every list and string under spec.
    for (const [path, node] of nodes(spec, 'spec')) {
      if (node.type === 'array') expect(node.maxItems, `${path} maxItems`).toBeTypeOf('number');
      if (node.type === 'string' && !node.enum) expect(node.maxLength, `${path} maxLength`).toBeTypeOf('number');
    }
  });

  it('states the catalogue rules', () => {
    expect(at('spec.models[].id').pattern).toBe('^[a-z0-9][a-z0-9._-]{0,127}$');
    for (const p of ['input', 'output', 'cachedInput', 'reasoning']) {
      expect(at(`spec.models[].pricing.${p}`).pattern).toBe(PRICE_PATTERN.source);
    }
    expect(PRICE_PATTERN.source).toBe('^(0|[1-9][0-9]{0,3})(\\.[0-9]{1,6})?$');
    expect(at('spec.models[].capabilities.tools').enum).toEqual([true]);
    expect(at('spec.models[].kind').enum).toEqual(['Abliterated', 'Uncensored']);
    // Open in the CRD (a new format needs no new CRD); the gateway's schema takes the names from its format table.
    expect(at('spec.models[].upstreams[].format').enum).toBeUndefined();
    expect(at('spec.models[].upstreams[].format').pattern).toBe('^[a-z][a-z0-9-]{0,31}$');
    expect(at('spec.models[].upstreams[].credentialsHeader').enum).toEqual(['authorization', 'x-api-key']);
    expect(at('spec.models[].upstreams[].baseUrl').pattern).toBe('^https?://');
    expect(at('spec.models[].context.tokens')).toMatchObject({ minimum: 1, maximum: 10_000_000 });
    expect(at('spec.models[].defaultMaxOutputTokens')).toMatchObject({ minimum: 1, maximum: 1_000_000 });
    expect(at('spec.models[].upstreams[].weight')).toMatchObject({ minimum: 0, maximum: 1000 });
    for (const t of ['connectMs', 'firstByteMs', 'idleMs']) {
      expect(at(`spec.models[].upstreams[].timeouts.${t}`)).toMatchObject({ minimum: 1, maximum: 3_600_000 });
    }
    expect(at('spec.models[].upstreams').minItems).toBe(1);
  });

  it('has no field that can carry a secret value: credentials are Secret references only', () => {
    const sensitive = /secret|password|passwd|token|api.?key|credential|bearer|auth/i;
    const allowed = new Set([
      'spec.models[].context.tokens',
      'spec.models[].defaultMaxOutputTokens',
      'spec.models[].upstreams[].credentialsSecretRef',
      'spec.models[].upstreams[].credentialsHeader',
    ]);
    const flagged = nodes(spec, 'spec')
      .map(([p]) => p)
      .filter((p) => sensitive.test(p.split('.').at(-1) ?? '') && !allowed.has(p));
    expect(flagged).toEqual([]);
    const ref = at('spec.models[].upstreams[].credentialsSecretRef');
    expect(Object.keys(ref.properties as Node).sort()).toEqual(['key', 'name']);
    expect(at('spec.models[].upstreams[].credentialsHeader').enum).toBeDefined();
    expect(ref['x-kubernetes-preserve-unknown-fields']).toBeUndefined();
  });
});

describe('CEL rules and their TypeScript checks', () => {
  it('match one to one by rule text and place', () => {
    const inCrd = collectCrdCelRules().map((r) => `${r.at} :: ${r.rule}`).sort();
    const inTs = CEL_CHECKS.map((c) => `${c.at} :: ${c.rule}`).sort();
    expect(inCrd.length).toBeGreaterThanOrEqual(7);
    expect(inTs).toEqual(inCrd);
    expect(new Set(inTs).size).toBe(inTs.length);
  });

  it('quote each rule in a comment next to its check', () => {
    const source = readFileSync(fileURLToPath(new URL('../../src/catalog/schema.ts', import.meta.url)), 'utf8');
    for (const c of CEL_CHECKS) expect(source).toContain(`// CEL: ${c.rule}\n`);
  });

  it('every CRD rule has a message and names the field it is about', () => {
    for (const r of collectCrdCelRules()) {
      expect(r.message.length).toBeGreaterThan(10);
      expect(r.fieldPath).toMatch(/^\.[a-zA-Z]+$/);
    }
  });
});
