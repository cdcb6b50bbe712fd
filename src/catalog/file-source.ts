// The catalog from a YAML file (outside Kubernetes). The file is watched: a valid edit swaps in a new
// snapshot, a bad edit is reported and the last good snapshot keeps serving. Nothing is logged here;
// the caller decides what to do with errors.
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { buildSnapshot, type CatalogInput } from './build-snapshot.js';
import { expandEnv } from './env-expand.js';
import { findDuplicateModelIds, formatCatalogErrors, parseCatalogManifests, type CatalogError } from './manifest.js';
import type { CatalogSnapshot, CatalogSource } from './snapshot.js';

export interface FileCatalogSourceOptions {
  /** Called when a changed file is invalid (the previous snapshot stays in use). */
  onError?: (errors: CatalogError[]) => void;
  /** Called after every swap to a new snapshot (as are listeners added with source.onSwap). */
  onSwap?: (snapshot: CatalogSnapshot) => void;
  /** Environment for `${VAR}` / `${VAR:-default}` expansion; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Quiet period after the last change event before reloading; default 100 ms. */
  debounceMs?: number;
}

/** The first load of a catalog failed; `errors` says where and why. */
export class CatalogLoadError extends Error {
  readonly errors: CatalogError[];
  constructor(errors: CatalogError[]) {
    super(`invalid model catalog:\n${formatCatalogErrors(errors)}`);
    this.name = 'CatalogLoadError';
    this.errors = errors;
  }
}

export type CatalogTextResult = { ok: true; catalogs: CatalogInput[] } | { ok: false; errors: CatalogError[] };

/** Expands, parses and validates catalog file text: every ModelCatalog document in it, or the errors. */
export function loadCatalogText(text: string, path: string, env: NodeJS.ProcessEnv): CatalogTextResult {
  const expanded = expandEnv(text, env);
  if (expanded.missing.length > 0) {
    return {
      ok: false,
      errors: expanded.missing.map((m) => ({
        source: path,
        path: '',
        line: m.line,
        message: `environment variable ${m.name} is not set and has no default (write \${${m.name}:-default})`,
      })),
    };
  }
  const results = parseCatalogManifests(expanded.text, path);
  const errors = results.flatMap((r) => (r.ok ? [] : r.errors));
  if (errors.length > 0) return { ok: false, errors };
  if (results.length === 0) {
    return { ok: false, errors: [{ source: path, path: '', message: 'the file holds no ModelCatalog document' }] };
  }
  const catalogs = results.map((r): CatalogInput => {
    if (!r.ok) throw new Error('unreachable: errors were returned above');
    const source = results.length === 1 ? path : `${path} (${r.catalog.metadata.name})`;
    return { source, spec: r.catalog.spec };
  });
  const dups = findDuplicateModelIds(catalogs);
  if (dups.length > 0) return { ok: false, errors: dups.map(({ source, path: p, message }) => ({ source, path: p, message })) };
  return { ok: true, catalogs };
}

async function readCatalogFile(path: string, env: NodeJS.ProcessEnv): Promise<CatalogTextResult & { text?: string }> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return { ok: false, errors: [{ source: path, path: '', message: `cannot read the catalog file (${code})` }] };
  }
  return { ...loadCatalogText(text, path, env), text };
}

/**
 * Loads the catalog file and keeps following it. Rejects with a CatalogLoadError when the first load
 * is invalid (the message names the file, the path in the document and the reason).
 */
export async function createFileCatalogSource(path: string, opts: FileCatalogSourceOptions = {}): Promise<CatalogSource> {
  const file = resolve(path);
  const env = opts.env ?? process.env;
  const debounceMs = opts.debounceMs ?? 100;

  const first = await readCatalogFile(path, env);
  if (!first.ok) throw new CatalogLoadError(first.errors);
  let current = buildSnapshot(first.catalogs, 1);
  let lastText = first.text;

  const listeners = new Set<(snapshot: CatalogSnapshot) => void>();
  if (opts.onSwap) listeners.add(opts.onSwap);
  const report = (errors: CatalogError[]): void => opts.onError?.(errors);

  const reload = async (): Promise<void> => {
    const next = await readCatalogFile(path, env);
    // Editors fire several events per save; identical text needs no new snapshot (or a repeated report).
    if (next.text !== undefined && next.text === lastText) return;
    if (next.text !== undefined) lastText = next.text;
    if (!next.ok) {
      report(next.errors);
      return;
    }
    let snapshot: CatalogSnapshot;
    try {
      snapshot = buildSnapshot(next.catalogs, current.generation + 1);
    } catch (err) {
      report([{ source: path, path: '', message: (err as Error).message }]);
      return;
    }
    current = snapshot;
    for (const listener of listeners) {
      try {
        listener(snapshot);
      } catch (err) {
        report([{ source: path, path: '', message: `a snapshot listener failed: ${(err as Error).message}` }]);
      }
    }
  };

  // Watch the directory, not the file: editors and ConfigMap updates replace the file by rename,
  // which would leave a watch on the old inode deaf.
  let timer: NodeJS.Timeout | undefined;
  let loading: Promise<void> = Promise.resolve();
  let closed = false;
  const watcher: FSWatcher = watch(dirname(file), (_event, filename) => {
    if (closed || (filename !== null && filename !== basename(file))) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      loading = loading.then(reload).catch((err: unknown) => {
        report([{ source: path, path: '', message: `reloading the catalog failed: ${(err as Error).message}` }]);
      });
    }, debounceMs);
  });
  watcher.on('error', (err) => report([{ source: path, path: '', message: `watching the catalog file failed: ${err.message}` }]));

  return {
    current: () => current,
    onSwap(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      watcher.close();
      await loading;
    },
  };
}
