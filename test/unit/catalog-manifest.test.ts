import { describe, expect, it } from 'vitest';
import {
  findDuplicateModelIds,
  formatCatalogErrors,
  parseCatalogManifests,
  validateCatalogObject,
  type CatalogError,
} from '../../src/catalog/manifest.js';
import { expandEnv } from '../../src/catalog/env-expand.js';
import type { ModelCatalogResource, ModelSpec } from '../../src/catalog/types.js';
import { EXAMPLE_CATALOG_TEXT, exampleCatalog } from './catalog-fixtures.js';

const SRC = 'test.yaml';

function model(c: ModelCatalogResource, i: number): ModelSpec {
  const m = c.spec.models[i];
  if (!m) throw new Error(`no model ${i}`);
  return m;
}

function errorsOf(c: unknown): CatalogError[] {
  const r = validateCatalogObject(c, SRC);
  if (r.ok) throw new Error('expected the catalog to be rejected');
  return r.errors;
}

describe('the example catalog', () => {
  it('validates, with the five catalogue models', () => {
    const r = validateCatalogObject(exampleCatalog(), 'examples/catalog.yaml');
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.catalog.metadata.name).toBe('default');
    expect(r.catalog.spec.models.map((m) => m.id)).toEqual([
      'outlaw-1-xploded',
      'glm-5.3-xploded',
      'glm-5.3-flash-xploded',
      'mimo-v2.6-flash-xploded',
      'qwen3.8-27b-xploded',
    ]);
    const byId = new Map(r.catalog.spec.models.map((m) => [m.id, m]));
    expect(byId.get('outlaw-1-xploded')?.capabilities).toEqual({ tools: true, vision: true, reasoning: false });
    expect(byId.get('glm-5.3-xploded')?.capabilities).toEqual({ tools: true, vision: false, reasoning: true });
    expect(byId.get('qwen3.8-27b-xploded')?.context).toEqual({ tokens: 512_000, display: '512K' });
    for (const m of r.catalog.spec.models) {
      expect(m.abliterated).toBe(m.kind === 'Abliterated');
      expect(m.defaultMaxOutputTokens).toBe(16384);
      // Qwen is the example of a Gemini-API upstream (the bare origin, the model in the path).
      const gemini = m.id === 'qwen3.8-27b-xploded';
      expect(m.upstreams).toEqual([
        { name: 'simulator', format: gemini ? 'gemini' : 'openai', baseUrl: gemini ? 'http://127.0.0.1:8099' : 'http://127.0.0.1:8099/v1', model: `sim-${m.id}` },
      ]);
    }
  });

  it('parses from YAML text (after env expansion) as one valid document', () => {
    const results = parseCatalogManifests(expandEnv(EXAMPLE_CATALOG_TEXT, {}).text, 'examples/catalog.yaml');
    expect(results).toHaveLength(1);
    expect(results[0]?.ok).toBe(true);
  });
});

interface BadCase {
  name: string;
  mutate: (c: ModelCatalogResource) => void;
  /** Exactly the paths reported. */
  paths: string[];
  message: RegExp;
}

const bad: BadCase[] = [
  {
    name: 'missing required field',
    mutate: (c) => delete (model(c, 0) as Partial<ModelSpec>).displayName,
    paths: ['/spec/models/0/displayName'],
    message: /required field is missing/,
  },
  {
    name: 'bad kind enum',
    mutate: (c) => ((model(c, 1) as { kind: string }).kind = 'Unfiltered'),
    paths: ['/spec/models/1/kind'],
    message: /must be one of "Abliterated", "Uncensored" \(got "Unfiltered"\)/,
  },
  {
    name: 'bad wire format enum',
    mutate: (c) => ((model(c, 0).upstreams[0] as { format: string }).format = 'cohere'),
    paths: ['/spec/models/0/upstreams/0/format'],
    message: /must be one of "openai", "anthropic", "gemini" \(got "cohere"\)/,
  },
  {
    name: 'price with a currency sign',
    mutate: (c) => (model(c, 0).pricing.input = '$0.30'),
    paths: ['/spec/models/0/pricing/input'],
    message: /decimal USD amount.*\(got "\$0\.30"\)/,
  },
  {
    name: 'price with 7 decimals',
    mutate: (c) => (model(c, 1).pricing.output = '4.5000001'),
    paths: ['/spec/models/1/pricing/output'],
    message: /at most 6 decimals/,
  },
  {
    name: 'price above 9999',
    mutate: (c) => (model(c, 2).pricing.cachedInput = '10000'),
    paths: ['/spec/models/2/pricing/cachedInput'],
    message: /at most 9999/,
  },
  {
    name: 'cache write price with a sign',
    mutate: (c) => (model(c, 0).pricing.cacheWrite1h = '-6'),
    paths: ['/spec/models/0/pricing/cacheWrite1h'],
    message: /no sign/,
  },
  {
    name: 'cache-read price under both its names',
    mutate: (c) => Object.assign(model(c, 1).pricing, { cachedInput: '0.25', cacheRead: '0.25' }),
    paths: ['/spec/models/1/pricing/cachedInput'],
    message: /cachedInput is the older name of pricing.cacheRead; give only cacheRead/,
  },
  {
    name: 'price as a number',
    mutate: (c) => ((model(c, 0).pricing as { input: unknown }).input = 0.3),
    paths: ['/spec/models/0/pricing/input'],
    message: /must be string \(got number\)/,
  },
  {
    name: 'zero context',
    mutate: (c) => (model(c, 0).context.tokens = 0),
    paths: ['/spec/models/0/context/tokens'],
    message: /must be >= 1/,
  },
  {
    name: 'negative context',
    mutate: (c) => (model(c, 3).context.tokens = -1000),
    paths: ['/spec/models/3/context/tokens'],
    message: /must be >= 1/,
  },
  {
    name: 'context above 10M',
    mutate: (c) => (model(c, 3).context.tokens = 10_000_001),
    paths: ['/spec/models/3/context/tokens'],
    message: /must be <= 10000000/,
  },
  {
    name: 'duplicate model id',
    mutate: (c) => (model(c, 3).id = 'glm-5.3-xploded'),
    paths: ['/spec/models/3/id'],
    message: /model ids must be unique within a catalog: "glm-5.3-xploded" is already the id of \/spec\/models\/1/,
  },
  {
    name: 'duplicate upstream name',
    mutate: (c) => model(c, 0).upstreams.push({ ...model(c, 0).upstreams[0]!, baseUrl: 'http://127.0.0.1:9/v1' }),
    paths: ['/spec/models/0/upstreams/1/name'],
    message: /upstream names must be unique within a model/,
  },
  {
    name: 'no upstream',
    mutate: (c) => (model(c, 4).upstreams = []),
    paths: ['/spec/models/4/upstreams'],
    message: /fewer than 1 items/,
  },
  {
    name: 'abliterated does not match kind',
    mutate: (c) => (model(c, 1).abliterated = true),
    paths: ['/spec/models/1/abliterated'],
    message: /abliterated must be true exactly when kind is Abliterated \(kind is Uncensored, so abliterated must be false\)/,
  },
  {
    name: 'tools false',
    mutate: (c) => ((model(c, 2).capabilities as { tools: boolean }).tools = false),
    paths: ['/spec/models/2/capabilities/tools'],
    message: /every listed model accepts tool calls/,
  },
  {
    name: 'unknown field (typo)',
    mutate: (c) => {
      const m = model(c, 0) as unknown as Record<string, unknown>;
      m.pricng = m.pricing;
      delete m.pricing;
    },
    paths: ['/spec/models/0/pricng', '/spec/models/0/pricing'],
    message: /unknown field "pricng" \(did you mean "pricing"\?\)/,
  },
  {
    name: 'baseUrl not http(s)',
    mutate: (c) => (model(c, 0).upstreams[0]!.baseUrl = 'ftp://127.0.0.1/v1'),
    paths: ['/spec/models/0/upstreams/0/baseUrl'],
    message: /must be an http:\/\/ or https:\/\/ URL/,
  },
  {
    name: 'defaultMaxOutputTokens above the context',
    mutate: (c) => {
      model(c, 4).context.tokens = 8192;
      model(c, 4).context.display = '8K';
    },
    paths: ['/spec/models/4/defaultMaxOutputTokens'],
    message: /defaultMaxOutputTokens must not exceed context.tokens \(16384 > 8192\)/,
  },
  {
    name: 'alias colliding with a model id',
    mutate: (c) => (model(c, 0).aliases = ['glm-5.3-flash-xploded']),
    paths: ['/spec/models/0/aliases/0'],
    message: /an alias must not equal a model id of the same catalog: "glm-5.3-flash-xploded" is the id of \/spec\/models\/2/,
  },
  {
    name: 'alias shared by two models',
    mutate: (c) => {
      model(c, 0).aliases = ['outlaw'];
      model(c, 1).aliases = ['glm', 'outlaw'];
    },
    paths: ['/spec/models/1/aliases/1'],
    message: /an alias must belong to one model only/,
  },
  {
    name: 'alias repeated in one model',
    mutate: (c) => (model(c, 0).aliases = ['outlaw', 'outlaw']),
    paths: ['/spec/models/0/aliases/1'],
    message: /duplicate entry/,
  },
  {
    name: 'bad model id',
    mutate: (c) => (model(c, 0).id = 'Outlaw 1'),
    paths: ['/spec/models/0/id'],
    message: /must be a model id/,
  },
  {
    name: 'weight out of range',
    mutate: (c) => (model(c, 0).upstreams[0]!.weight = 1001),
    paths: ['/spec/models/0/upstreams/0/weight'],
    message: /must be <= 1000/,
  },
  {
    name: 'zero timeout',
    mutate: (c) => (model(c, 0).upstreams[0]!.timeouts = { connectMs: 0 }),
    paths: ['/spec/models/0/upstreams/0/timeouts/connectMs'],
    message: /must be >= 1/,
  },
  {
    name: 'bad credentials header',
    mutate: (c) => ((model(c, 0).upstreams[0] as { credentialsHeader?: string }).credentialsHeader = 'x-token'),
    paths: ['/spec/models/0/upstreams/0/credentialsHeader'],
    message: /must be one of "authorization", "x-api-key"/,
  },
  {
    name: 'secret reference without a key',
    mutate: (c) => ((model(c, 0).upstreams[0] as { credentialsSecretRef?: unknown }).credentialsSecretRef = { name: 'upstream' }),
    paths: ['/spec/models/0/upstreams/0/credentialsSecretRef/key'],
    message: /required field is missing/,
  },
  {
    name: 'no models',
    mutate: (c) => (c.spec.models = []),
    paths: ['/spec/models'],
    message: /fewer than 1 items/,
  },
  {
    name: 'wrong apiVersion',
    mutate: (c) => ((c as { apiVersion: string }).apiVersion = 'tollgate.dev/v1'),
    paths: ['/apiVersion'],
    message: /must be one of "tollgate.dev\/v1alpha1"/,
  },
  {
    name: 'missing metadata.name',
    mutate: (c) => delete (c.metadata as { name?: string }).name,
    paths: ['/metadata/name'],
    message: /required field is missing/,
  },
];

describe('bad catalogs are rejected at the right path', () => {
  it('has at least twelve distinct cases', () => {
    expect(new Set(bad.map((b) => b.name)).size).toBeGreaterThanOrEqual(12);
  });

  it.each(bad)('$name', ({ mutate, paths, message }) => {
    const c = exampleCatalog();
    mutate(c);
    const errors = errorsOf(c);
    expect(errors.map((e) => e.path).sort()).toEqual([...paths].sort());
    expect(errors.every((e) => e.source === SRC)).toBe(true);
    expect(errors.some((e) => message.test(e.message))).toBe(true);
  });

  it('never echoes the value of a field that looks like a secret', () => {
    const c = exampleCatalog();
    (model(c, 0).upstreams[0] as unknown as Record<string, unknown>).apiKey = 'sk-live-very-secret-value';
    const errors = errorsOf(c);
    expect(errors.map((e) => e.path)).toEqual(['/spec/models/0/upstreams/0/apiKey']);
    expect(errors[0]?.message).toMatch(/unknown field "apiKey"/);
    expect(JSON.stringify(errors)).not.toContain('very-secret');
  });

  it('reports every problem of a document at once', () => {
    const c = exampleCatalog();
    model(c, 0).pricing.input = '0.1234567';
    model(c, 4).context.tokens = 0;
    expect(errorsOf(c).map((e) => e.path).sort()).toEqual(['/spec/models/0/pricing/input', '/spec/models/4/context/tokens']);
  });

  it('rejects values that are not objects', () => {
    expect(errorsOf(null)[0]).toMatchObject({ path: '', message: 'must be object (got null)' });
    expect(errorsOf('ModelCatalog')[0]?.message).toBe('must be object (got string)');
  });

  it('accepts status from the operator (Kubernetes objects carry it)', () => {
    const c = exampleCatalog();
    c.status = {
      observedGeneration: 3,
      conditions: [{ type: 'Ready', status: 'True', reason: 'AllHealthy', message: '5/5', lastTransitionTime: '2026-01-01T00:00:00Z' }],
      models: [{ id: 'outlaw-1-xploded', ready: true, upstreams: [{ name: 'simulator', healthy: true, latencyMs: 3 }] }],
      modelCount: 5,
      ready: '5/5',
    };
    expect(validateCatalogObject(c, SRC).ok).toBe(true);
  });
});

describe('parseCatalogManifests', () => {
  it('gives YAML syntax errors with line and column', () => {
    const results = parseCatalogManifests('apiVersion: tollgate.dev/v1alpha1\nkind: [ModelCatalog\nspec: {}\n', SRC);
    expect(results).toHaveLength(1);
    const r = results[0]!;
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]?.message).toMatch(/^YAML syntax error at line \d+, column \d+: /);
    expect(r.errors[0]?.line).toBeGreaterThan(0);
  });

  it('points schema errors at their line in the text', () => {
    const text = expandEnv(EXAMPLE_CATALOG_TEXT, {}).text.replace('input: "2.50"', 'input: "2.5000001"');
    const lineNo = text.split('\n').findIndex((l) => l.includes('2.5000001')) + 1;
    const [r] = parseCatalogManifests(text, SRC);
    expect(r?.ok).toBe(false);
    if (!r || r.ok) return;
    expect(r.errors).toEqual([expect.objectContaining({ path: '/spec/models/1/pricing/input', line: lineNo })]);
    expect(formatCatalogErrors(r.errors)).toBe(`${SRC}:${lineNo}: /spec/models/1/pricing/input: ${r.errors[0]!.message}`);
  });

  it('reads several documents and skips empty ones', () => {
    const text = expandEnv(EXAMPLE_CATALOG_TEXT, {}).text;
    const results = parseCatalogManifests(`---\n${text}\n---\n---\n${text.replace('name: default', 'name: Bad_Name')}`, SRC);
    expect(results.map((r) => r.ok)).toEqual([true, false]);
    const second = results[1]!;
    if (second.ok) return;
    expect(second.errors.map((e) => e.path)).toEqual(['/metadata/name']);
  });
});

describe('findDuplicateModelIds', () => {
  it('finds ids and aliases defined by more than one catalog, first definition wins', () => {
    const a = exampleCatalog().spec;
    const b = exampleCatalog().spec;
    b.models = [model({ spec: b } as ModelCatalogResource, 4)];
    b.models[0]!.id = 'qwen-alt';
    b.models[0]!.aliases = ['outlaw-1-xploded'];
    const dups = findDuplicateModelIds([
      { source: 'ns/a', spec: a },
      { source: 'ns/b', spec: b },
    ]);
    expect(dups).toEqual([
      expect.objectContaining({
        id: 'outlaw-1-xploded',
        source: 'ns/b',
        path: '/spec/models/0/aliases/0',
        firstSource: 'ns/a',
        firstPath: '/spec/models/0/id',
      }),
    ]);
    expect(dups[0]?.message).toMatch(/already defined by ns\/a/);
    expect(findDuplicateModelIds([{ source: 'ns/a', spec: a }])).toEqual([]);
  });
});
