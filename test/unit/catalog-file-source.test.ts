import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CatalogLoadError, createFileCatalogSource } from '../../src/catalog/file-source.js';
import type { CatalogError } from '../../src/catalog/manifest.js';
import type { CatalogSnapshot, CatalogSource } from '../../src/catalog/snapshot.js';
import { EXAMPLE_CATALOG_TEXT } from './catalog-fixtures.js';

const ENV = { TOLLGATE_SIMULATOR_URL: 'http://127.0.0.1:4567' };

let dir: string;
let file: string;
let source: CatalogSource | undefined;
let swaps: CatalogSnapshot[];
let errors: CatalogError[][];
let waiters: (() => void)[];

function notify(): void {
  for (const w of waiters.splice(0)) w();
}

/** Resolves when `cond` holds after a swap or an error report; fails after a timeout. */
async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`timed out waiting for ${what}`);
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, left);
      waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

async function open(env: NodeJS.ProcessEnv = ENV): Promise<CatalogSource> {
  source = await createFileCatalogSource(file, {
    env,
    debounceMs: 20,
    onSwap: (s) => {
      swaps.push(s);
      notify();
    },
    onError: (e) => {
      errors.push(e);
      notify();
    },
  });
  return source;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-catalog-'));
  file = join(dir, 'catalog.yaml');
  writeFileSync(file, EXAMPLE_CATALOG_TEXT);
  swaps = [];
  errors = [];
  waiters = [];
});

afterEach(async () => {
  await source?.close();
  source = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe('createFileCatalogSource', () => {
  it('loads the file, expanding ${VAR:-default} from the environment', async () => {
    const s = await open();
    const snap = s.current();
    expect(snap.generation).toBe(1);
    expect(snap.models).toHaveLength(5);
    expect(snap.models[0]?.upstreams[0]?.baseUrl).toBe('http://127.0.0.1:4567/v1');
    expect(snap.models[0]?.source).toBe(file);
    await s.close();
    source = await createFileCatalogSource(file, { env: {} });
    expect(source.current().models[0]?.upstreams[0]?.baseUrl).toBe('http://127.0.0.1:8099/v1');
  });

  it('fails at start on an invalid file, naming the file, the path and the reason', async () => {
    writeFileSync(file, EXAMPLE_CATALOG_TEXT.replace('output: "4.50"', 'output: "4.5000001"'));
    const err = await createFileCatalogSource(file, { env: ENV }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CatalogLoadError);
    const message = (err as Error).message;
    expect(message).toContain(file);
    expect(message).toContain('/spec/models/1/pricing/output');
    expect(message).toMatch(/at most 6 decimals/);
    expect((err as CatalogLoadError).errors).toHaveLength(1);
  });

  it('fails at start on a missing file, on an unset variable without default, and on an empty file', async () => {
    await expect(createFileCatalogSource(join(dir, 'nope.yaml'))).rejects.toThrow(/nope\.yaml.*cannot read the catalog file \(ENOENT\)/);
    writeFileSync(file, EXAMPLE_CATALOG_TEXT.replace('${TOLLGATE_SIMULATOR_URL:-http://127.0.0.1:8099}', '${SIM_URL}'));
    await expect(createFileCatalogSource(file, { env: {} })).rejects.toThrow(/environment variable SIM_URL is not set/);
    writeFileSync(file, '# nothing here\n');
    await expect(createFileCatalogSource(file, { env: {} })).rejects.toThrow(/holds no ModelCatalog document/);
  });

  it('swaps to a new snapshot on a valid edit', async () => {
    const s = await open();
    const seen: number[] = [];
    const unsubscribe = s.onSwap((snap) => seen.push(snap.generation));
    writeFileSync(file, EXAMPLE_CATALOG_TEXT.replace('input: "2.50"', 'input: "2.75"'));
    await until(() => swaps.length === 1, 'a swap');
    expect(s.current().generation).toBe(2);
    expect(s.current()).toBe(swaps[0]);
    expect(s.current().byId.get('glm-5.3-xploded')?.pricing.input).toBe(2_750_000);
    expect(seen).toEqual([2]);
    unsubscribe();
    writeFileSync(file, EXAMPLE_CATALOG_TEXT.replace('input: "2.50"', 'input: "3"'));
    await until(() => swaps.length === 2, 'a second swap');
    expect(s.current().generation).toBe(3);
    expect(seen).toEqual([2]);
    expect(errors).toEqual([]);
  });

  it('keeps the last good snapshot on a bad edit and reports file, path and reason', async () => {
    const s = await open();
    const good = s.current();
    writeFileSync(file, EXAMPLE_CATALOG_TEXT.replace('tools: true', 'tools: false'));
    await until(() => errors.length === 1, 'an error report');
    expect(s.current()).toBe(good);
    expect(errors[0]).toEqual([
      expect.objectContaining({
        source: file,
        path: '/spec/models/0/capabilities/tools',
        message: expect.stringMatching(/every listed model accepts tool calls/) as unknown as string,
      }),
    ]);
    // A YAML syntax error is also survived.
    writeFileSync(file, 'spec: [unclosed\n');
    await until(() => errors.length === 2, 'a syntax error report');
    expect(errors[1]?.[0]?.message).toMatch(/YAML syntax error at line \d+, column \d+/);
    expect(s.current()).toBe(good);
    // And a fix afterwards swaps again.
    writeFileSync(file, EXAMPLE_CATALOG_TEXT.replace('output: "1.00"', 'output: "1.10"'));
    await until(() => swaps.length === 1, 'a swap after the fix');
    expect(s.current().generation).toBe(2);
    expect(s.current().models[0]?.pricing.output).toBe(1_100_000);
  });

  it('follows a file replaced by rename (how editors and ConfigMaps update)', async () => {
    const s = await open();
    for (const [n, price] of [
      [1, '0.31'],
      [2, '0.32'],
    ] as const) {
      const tmp = join(dir, `.catalog.yaml.tmp${n}`);
      writeFileSync(tmp, EXAMPLE_CATALOG_TEXT.replace('input: "0.30"', `input: "${price}"`));
      renameSync(tmp, file);
      await until(() => swaps.length === n, `swap ${n}`);
      expect(s.current().models[0]?.pricing.display.input).toBe(price);
    }
    expect(s.current().generation).toBe(3);
  });

  it('ignores other files in the directory and stops after close()', async () => {
    const s = await open();
    writeFileSync(join(dir, 'other.yaml'), 'not: a catalog');
    await new Promise((r) => setTimeout(r, 150));
    expect(swaps).toEqual([]);
    expect(errors).toEqual([]);
    await s.close();
    writeFileSync(file, EXAMPLE_CATALOG_TEXT.replace('input: "0.30"', 'input: "0.35"'));
    await new Promise((r) => setTimeout(r, 150));
    expect(swaps).toEqual([]);
    expect(s.current().generation).toBe(1);
  });

  it('rejects the same id in two documents of one file', async () => {
    writeFileSync(file, `${EXAMPLE_CATALOG_TEXT}\n---\n${EXAMPLE_CATALOG_TEXT.replace('name: default', 'name: second')}`);
    const err = (await createFileCatalogSource(file, { env: {} }).catch((e: unknown) => e)) as CatalogLoadError;
    expect(err).toBeInstanceOf(CatalogLoadError);
    expect(err.errors[0]).toMatchObject({ source: `${file} (second)`, path: '/spec/models/0/id' });
    expect(err.errors[0]?.message).toMatch(/already defined by .* \(default\)/);
  });
});
