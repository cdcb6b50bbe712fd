// Bound counters and histograms must expose exactly what prom-client's own metrics would for the
// same observations: prom-client is the reference, our classes only make recording cheaper.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { BoundCounter, BoundHistogram } from '../../src/telemetry/bound-metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

describe('bound metrics', () => {
  it('histogram exposition equals prom-client Histogram for the same observations', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c"q'), fc.constantFrom('x', 'y'), fc.double({ min: 0, max: 100, noNaN: true })), {
          maxLength: 60,
        }),
        async (observations) => {
          const ours = new Registry();
          const ref = new Registry();
          const h = new BoundHistogram('h_seconds', 'help', ['model', 'upstream'], BUCKETS, ours);
          const r = new Histogram({ name: 'h_seconds', help: 'help', labelNames: ['model', 'upstream'], buckets: BUCKETS, registers: [ref] });
          for (const [m, u, v] of observations) {
            h.bind(m, u).observe(v);
            r.labels(m, u).observe(v);
          }
          const sortLines = (s: string): string[] => s.split('\n').sort();
          expect(sortLines(await ours.metrics())).toEqual(sortLines(await ref.metrics()));
        },
      ),
      { numRuns: 50 },
    );
  });

  it('counter exposition equals prom-client Counter; bound children are reused', async () => {
    const ours = new Registry();
    const ref = new Registry();
    const c = new BoundCounter('c_total', 'help', ['kind'], ours);
    const r = new Counter({ name: 'c_total', help: 'help', labelNames: ['kind'], registers: [ref] });
    expect(c.bind('input')).toBe(c.bind('input'));
    c.bind('input').inc(5);
    c.bind('output').inc();
    r.labels('input').inc(5);
    r.labels('output').inc();
    expect(await ours.metrics()).toBe(await ref.metrics());
    const json = await ours.getMetricsAsJSON();
    expect(json[0]!.values).toEqual([
      { value: 5, labels: { kind: 'input' } },
      { value: 1, labels: { kind: 'output' } },
    ]);
    await ours.resetMetrics();
    expect((await ours.getMetricsAsJSON())[0]!.values.map((v) => v.value)).toEqual([0, 0]);
  });

  it('refuses a wrong number of label values and a label named le', () => {
    const reg = new Registry();
    const c = new BoundCounter('x_total', 'help', ['a', 'b'], reg);
    expect(() => c.bind('only-one')).toThrow(/expected 2 label values/);
    expect(() => new BoundHistogram('y', 'help', ['le'], [1], reg)).toThrow(/reserved/);
    expect(() => new BoundCounter('x_total', 'help', [], reg)).toThrow(/already been registered/);
  });
});
