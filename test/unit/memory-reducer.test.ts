// The idle memory reduction (src/runtime/memory-reducer.ts): its decision interval by interval, and the
// collection it runs, on this process's real V8 heap.
import { getHeapStatistics } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { MEMORY_REDUCER_POLICY, MemoryReducer, collectAndReleaseMemory } from '../../src/runtime/memory-reducer.js';

const MiB = 1024 * 1024;

/** A reducer over a resident set the test sets, counting the collections it asks for. */
function reducerOver(start: number) {
  const state = { rss: start, collections: 0, afterCollection: start - 30 * MiB };
  const reducer = new MemoryReducer(MEMORY_REDUCER_POLICY, () => {
    state.collections += 1;
    state.rss = state.afterCollection;
  }, () => state.rss);
  return { state, reducer };
}

describe('the idle memory reducer decides', () => {
  it('to give back what the start grew at the first idle interval, and says what it gave', () => {
    const { state, reducer } = reducerOver(122 * MiB);
    const reduction = reducer.check(0.002);
    expect(state.collections).toBe(1);
    expect(reduction).toMatchObject({ rssBeforeBytes: 122 * MiB, rssAfterBytes: 92 * MiB });
    expect(reduction?.pauseMs).toBeGreaterThanOrEqual(0);
  });

  it('never to collect under load, however much the process has grown', () => {
    const { state, reducer } = reducerOver(400 * MiB);
    for (const utilization of [0.9, 0.05, MEMORY_REDUCER_POLICY.idleUtilization]) expect(reducer.check(utilization)).toBeUndefined();
    expect(state.collections).toBe(0);
  });

  it('once an idle period: again only after the process grew by the policy’s margin, and went idle again', () => {
    const { state, reducer } = reducerOver(122 * MiB);
    reducer.check(0);
    expect(state.collections).toBe(1);
    // Idle intervals after it (probes, timers) with a little growth: nothing more to give back.
    state.rss += MEMORY_REDUCER_POLICY.minGrowthBytes - MiB;
    for (let i = 0; i < 5; i++) expect(reducer.check(0.001)).toBeUndefined();
    // A burst of load grows the young generation; while it lasts, nothing; once idle, one collection.
    state.rss = 250 * MiB;
    state.afterCollection = 95 * MiB;
    expect(reducer.check(0.8)).toBeUndefined();
    expect(reducer.check(0.003)).toMatchObject({ rssBeforeBytes: 250 * MiB, rssAfterBytes: 95 * MiB });
    expect(reducer.check(0.003)).toBeUndefined();
    expect(state.collections).toBe(2);
  });
});

describe('the collection the reducer runs', () => {
  it('gives freed heap pages back to the system and leaves `gc` unexposed', () => {
    // 40 MB of objects kept, then dropped: the heap grew for them and keeps the pages after a collection.
    let kept: number[][] | undefined = Array.from({ length: 40 }, () => Array.from({ length: 128 * 1024 }, (_, i) => i + 0.5));
    const grown = getHeapStatistics().total_physical_size;
    expect(kept.length).toBe(40);
    kept = undefined;
    collectAndReleaseMemory();
    const after = getHeapStatistics().total_physical_size;
    expect(grown - after).toBeGreaterThan(20 * MiB);
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
