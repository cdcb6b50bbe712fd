// What a fresh machine relies on before anything is cached: tools/build.sh must resolve its versions,
// stamps and cache key with an empty Go module cache, an empty tools cache and no network (it once read
// a module's folder that only a download creates, and `make tools` died at once on a new machine), and
// the runtime must be the Node LTS that .node-version, engines and the image name.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const empty = mkdtempSync(join(tmpdir(), 'tollgate-fresh-'));
afterAll(() => rmSync(empty, { recursive: true, force: true }));

function resolve(env: NodeJS.ProcessEnv): Map<string, string> {
  const out = execFileSync('bash', [join(ROOT, 'tools', 'build.sh'), '--resolve'], { env, encoding: 'utf8' });
  return new Map(out.trim().split('\n').map((line) => {
    const at = line.indexOf(' ');
    return [line.slice(0, at), line.slice(at + 1)] as [string, string];
  }));
}

describe('tools/build.sh on a fresh machine', () => {
  const freshEnv: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: join(empty, 'home'),
    GOMODCACHE: join(empty, 'gomodcache'),
    GOPATH: join(empty, 'gopath'),
    GOCACHE: join(empty, 'gocache'),
    TOLLGATE_TOOLS_CACHE: join(empty, 'tools-cache'),
    // No module proxy at all: resolving must not need a download.
    GOPROXY: 'off',
    GOFLAGS: '-mod=mod',
  };

  it('resolves versions, stamps and the cache key with empty caches and no module proxy, writing nothing', () => {
    const fresh = resolve(freshEnv);
    expect(fresh.get('kubernetes')).toMatch(/^v1\.\d+\.\d+$/);
    expect(fresh.get('helm')).toMatch(/^v3\.\d+\.\d+$/);
    expect(fresh.get('prometheus')).toMatch(/^3\.\d+\.\d+$/);
    expect(fresh.get('hash')).toMatch(/^[0-9a-f]{16}$/);
    expect(fresh.get('cache')).toBe(join(empty, 'tools-cache', fresh.get('hash') ?? ''));
    // Nothing downloaded, nothing created: only the resolve step ran.
    expect(readdirSync(empty)).toEqual([]);
  });

  it('gives the same cache key as on a machine with its caches, so a built set is found again', () => {
    const fresh = resolve(freshEnv);
    const warm = resolve(process.env);
    expect(fresh.get('hash')).toBe(warm.get('hash'));
    expect(fresh.get('prometheus')).toBe(warm.get('prometheus'));
  });

  it("derives Prometheus's release from its module version as its VERSION file states it", () => {
    // v0.316.0 is 3.16.0. The module's own VERSION file is read when the module cache holds it (after
    // `make tools`, as in CI); offline and uncached there is nothing to compare with.
    let dir = '';
    try {
      const info = execFileSync('go', ['mod', 'download', '-json', 'github.com/prometheus/prometheus'], {
        cwd: join(ROOT, 'tools'),
        env: { ...process.env, GOPROXY: 'off', GOFLAGS: '-mod=mod' },
        encoding: 'utf8',
      });
      dir = (JSON.parse(info) as { Dir?: string }).Dir ?? '';
    } catch {
      dir = '';
    }
    const derived = resolve(freshEnv).get('prometheus');
    if (dir === '') {
      expect(derived).toMatch(/^3\.\d+\.\d+$/);
      return;
    }
    expect(derived).toBe(readFileSync(join(dir, 'VERSION'), 'utf8').trim());
  });
});

describe('the runtime is the Node LTS the project names', () => {
  const wanted = readFileSync(join(ROOT, '.node-version'), 'utf8').trim();
  const wantedMajor = Number(wanted.split('.')[0]);

  it('runs this suite on it', () => {
    expect(wantedMajor).toBeGreaterThanOrEqual(24);
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(wantedMajor);
  });

  it('names it in engines and in every stage of the image', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toMatch(new RegExp(`^>=${wantedMajor}\\.`));
    const stages = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').match(/^FROM \S+/gm) ?? [];
    expect(stages.length).toBe(3);
    for (const stage of stages) expect(stage).toMatch(new RegExp(`^FROM node:${wantedMajor}-`));
  });
});
