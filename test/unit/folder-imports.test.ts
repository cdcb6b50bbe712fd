// Folders import one way: no two folders of src/ import each other (issue 39). Module cycles are already
// refused by the lint (.dependency-cruiser.cjs); this reads the same graph at the level of folders, where
// two folders that import each other (formats and translate, relay and translate, until the internal
// representation got a folder of its own; accounts, billing and record, until each module sat in the
// folder whose job it is) are one tangled unit. No pair is left, and a new one fails.
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

function folderOf(path: string): string | undefined {
  const m = /^src\/([^/]+)\//.exec(path);
  return m?.[1];
}

describe('folders of src/ import one way', () => {
  it('no two folders import each other', async () => {
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
    expect(tangled).toEqual([]);
  });
});
