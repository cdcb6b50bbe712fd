import { describe, expect, it } from 'vitest';
import { buildSnapshot, DEFAULT_CREATED_UNIX, type CatalogInput } from '../../src/catalog/build-snapshot.js';
import { validateCatalogObject } from '../../src/catalog/manifest.js';
import type { ModelCatalogSpec } from '../../src/catalog/types.js';
import { exampleCatalog } from './catalog-fixtures.js';

function exampleInput(source = 'examples/catalog.yaml'): CatalogInput {
  const r = validateCatalogObject(exampleCatalog(), source);
  if (!r.ok) throw new Error('example catalog invalid');
  return { source, spec: r.catalog.spec };
}

describe('buildSnapshot', () => {
  it('builds the example catalog with exact micro-USD prices', () => {
    const snap = buildSnapshot([exampleInput()], 7, 1_700_000_000_000);
    expect(snap.generation).toBe(7);
    expect(snap.builtAt).toBe(1_700_000_000_000);
    expect(snap.models.map((m) => [m.id, m.pricing.input, m.pricing.output])).toEqual([
      ['outlaw-1-xploded', 300_000, 1_000_000],
      ['glm-5.3-xploded', 2_500_000, 4_500_000],
      ['glm-5.3-flash-xploded', 400_000, 1_600_000],
      ['mimo-v2.6-flash-xploded', 1_000_000, 3_000_000],
      ['qwen3.8-27b-xploded', 300_000, 2_400_000],
    ]);
    const qwen = snap.byId.get('qwen3.8-27b-xploded')!;
    expect(qwen).toMatchObject({
      displayName: 'Qwen3.8 27B Xploded',
      kind: 'Uncensored',
      contextWindow: 512_000,
      contextDisplay: '512K',
      supportsTools: true,
      supportsVision: true,
      supportsReasoning: true,
      abliterated: false,
      defaultMaxOutputTokens: 16384,
      created: DEFAULT_CREATED_UNIX,
      source: 'examples/catalog.yaml',
    });
    expect(qwen.pricing.display).toEqual({ input: '0.30', output: '2.40' });
    expect(qwen.pricing.cacheRead).toBeUndefined();
    expect(snap.byId.get('outlaw-1-xploded')?.supportsReasoning).toBe(false);
  });

  it('converts the cache prices to micros per class', () => {
    const input = exampleInput();
    const m = input.spec.models[0]!;
    m.pricing = { input: '3', output: '15', cacheRead: '0.30', cacheWrite5m: '3.75', cacheWrite1h: '6' };
    const model = buildSnapshot([input], 1).models[0]!;
    expect(model.pricing).toMatchObject({ input: 3_000_000, output: 15_000_000, cacheRead: 300_000, cacheWrite5m: 3_750_000, cacheWrite1h: 6_000_000 });
    expect(model.pricing.display).toEqual({ input: '3', output: '15', cacheRead: '0.30', cacheWrite5m: '3.75', cacheWrite1h: '6' });
  });

  it('fills upstream defaults', () => {
    const up = buildSnapshot([exampleInput()], 1).models[0]!.upstreams[0]!;
    expect(up).toEqual({
      name: 'simulator',
      baseUrl: 'http://127.0.0.1:8099/v1',
      format: 'openai',
      upstreamModel: 'sim-outlaw-1-xploded',
      credentialsHeader: 'authorization',
      weight: 1,
      timeouts: { connectMs: 5000, firstByteMs: 120_000, idleMs: 120_000 },
      healthy: true,
    });
    expect(DEFAULT_CREATED_UNIX).toBe(Date.parse('2026-01-01T00:00:00Z') / 1000);
  });

  it('keeps given values, optional prices, aliases and health', () => {
    const input = exampleInput('ns/default');
    const m = input.spec.models[1]!;
    m.pricing.cachedInput = '0.125';
    m.pricing.reasoning = '5';
    m.aliases = ['glm-5.3', 'glm'];
    m.created = '2026-03-04';
    m.upstreams.push({
      name: 'anthropic-compat',
      baseUrl: 'https://127.0.0.1:8443',
      format: 'anthropic',
      model: 'glm-5.3',
      credentialsSecretRef: { name: 'glm', key: 'api-key' },
      weight: 0,
      timeouts: { firstByteMs: 30_000 },
    });
    input.upstreamHealthy = (id, name) => !(id === 'glm-5.3-xploded' && name === 'simulator');
    const snap = buildSnapshot([input], 2);
    const glm = snap.byId.get('glm-5.3-xploded')!;
    expect(snap.byId.get('glm')).toBe(glm);
    expect(snap.byId.get('glm-5.3')).toBe(glm);
    expect(snap.byId.size).toBe(7);
    expect(glm.aliases).toEqual(['glm-5.3', 'glm']);
    // `cachedInput` is the older name of `cacheRead`: one price, shown under the new name.
    expect(glm.pricing).toMatchObject({ cacheRead: 125_000, reasoning: 5_000_000 });
    expect(glm.pricing.display).toEqual({ input: '2.50', output: '4.50', cacheRead: '0.125', reasoning: '5' });
    expect(glm.created).toBe(Date.parse('2026-03-04T00:00:00Z') / 1000);
    expect(glm.upstreams.map((u) => u.healthy)).toEqual([false, true]);
    expect(glm.upstreams[1]).toMatchObject({
      credentialsHeader: 'x-api-key',
      credentialsSecretRef: { name: 'glm', key: 'api-key' },
      weight: 0,
      timeouts: { connectMs: 5000, firstByteMs: 30_000, idleMs: 120_000 },
    });
  });

  it('reads date-times with offsets', () => {
    const input = exampleInput();
    input.spec.models[0]!.created = '2026-02-01T12:00:00+02:00';
    expect(buildSnapshot([input], 1).models[0]!.created).toBe(Date.parse('2026-02-01T10:00:00Z') / 1000);
  });

  it('merges catalogs in order and refuses an id defined twice', () => {
    const extra: ModelCatalogSpec = { models: [{ ...exampleInput().spec.models[0]!, id: 'outlaw-2-xploded' }] };
    const snap = buildSnapshot([exampleInput('ns/a'), { source: 'ns/b', spec: extra }], 1);
    expect(snap.models.map((m) => m.source)).toEqual(['ns/a', 'ns/a', 'ns/a', 'ns/a', 'ns/a', 'ns/b']);
    expect(() => buildSnapshot([exampleInput('ns/a'), exampleInput('ns/b')], 1)).toThrow(
      /ns\/b: \/spec\/models\/0\/id: model id "outlaw-1-xploded" is already defined by ns\/a/,
    );
  });

  it('is immutable', () => {
    const snap = buildSnapshot([exampleInput()], 1);
    const model = snap.models[0]!;
    expect(Object.isFrozen(snap)).toBe(true);
    expect(Object.isFrozen(snap.models)).toBe(true);
    expect(Object.isFrozen(model)).toBe(true);
    expect(Object.isFrozen(model.pricing)).toBe(true);
    expect(Object.isFrozen(model.pricing.display)).toBe(true);
    expect(Object.isFrozen(model.aliases)).toBe(true);
    expect(Object.isFrozen(model.upstreams)).toBe(true);
    expect(Object.isFrozen(model.upstreams[0])).toBe(true);
    expect(Object.isFrozen(model.upstreams[0]!.timeouts)).toBe(true);
    const map = snap.byId as Map<string, unknown>;
    expect(() => map.set('x', model)).toThrow(/immutable/);
    expect(() => map.delete('outlaw-1-xploded')).toThrow(/immutable/);
    expect(() => map.clear()).toThrow(/immutable/);
    expect(snap.byId.get('outlaw-1-xploded')).toBe(model);
  });

  it('does not share state with the spec it was built from', () => {
    const input = exampleInput();
    const snap = buildSnapshot([input], 1);
    input.spec.models[0]!.pricing.input = '9.99';
    input.spec.models[0]!.upstreams[0]!.baseUrl = 'http://127.0.0.1:1/v1';
    expect(snap.models[0]!.pricing.display.input).toBe('0.30');
    expect(snap.models[0]!.upstreams[0]!.baseUrl).toBe('http://127.0.0.1:8099/v1');
  });
});
