// Folders import one way: no two folders of src/ import each other (issue 39). Module cycles are already
// refused by the lint (.dependency-cruiser.cjs); this reads the same graph at the level of folders, where
// two folders that import each other (formats and translate, relay and translate, until the internal
// representation got a folder of its own) are one tangled unit. The pairs still tangled are listed by
// name: a new pair fails, and so does a listed pair that is gone (take it off the list).
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

/** Pairs that still import each other, sorted within and between pairs: the money layer's three folders. */
const STILL_TANGLED: ReadonlyArray<readonly [string, string]> = [
  ['accounts', 'billing'],
  ['accounts', 'record'],
  ['billing', 'record'],
];

function folderOf(path: string): string | undefined {
  const m = /^src\/([^/]+)\//.exec(path);
  return m?.[1];
}

describe('folders of src/ import one way', () => {
  it('no two folders import each other, but for the pairs listed', async () => {
    const result = await cruise(['src'], { tsPreCompilationDeps: true, doNotFollow: { path: 'node_modules' }, exclude: { path: '^src/dashboard/assets/' } }, undefined, { tsConfig: { fileName: 'tsconfig.json' } });
    const output = result.output as ICruiseResult;
    const edges = new Set<string>();
    for (const module of output.modules) {
      const from = folderOf(module.source);
      if (from === undefined) continue;
      for (const dependency of module.dependencies) {
        const to = folderOf(dependency.resolved);
        if (to !== undefined && to !== from) edges.add(`${from} ${to}`);
      }
    }
    expect(edges.size).toBeGreaterThan(20);
    const tangled: Array<[string, string]> = [];
    for (const edge of edges) {
      const [a = '', b = ''] = edge.split(' ');
      if (a < b && edges.has(`${b} ${a}`)) tangled.push([a, b]);
    }
    tangled.sort((x, y) => `${x[0]} ${x[1]}`.localeCompare(`${y[0]} ${y[1]}`));
    expect(tangled).toEqual(STILL_TANGLED);
  });
});
