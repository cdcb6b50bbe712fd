// Upstream credentials outside Kubernetes. A Secret reference {name, key} resolves from the
// environment (TOLLGATE_SECRET_<NAME>_<KEY>) or from a Kubernetes-style mounted directory
// (<TOLLGATE_SECRETS_DIR>/<name>/<key>), so the same catalog works locally and in a pod.
// Values are never logged, and never put in an error message.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { SecretReference, SecretResolver } from './snapshot.js';

export interface EnvSecretResolverOptions {
  /** Default process.env (read at each resolve, so a changed variable is seen). */
  env?: NodeJS.ProcessEnv;
  /** Overrides env.TOLLGATE_SECRETS_DIR. */
  secretsDir?: string;
  /** How long a file value is trusted before its mtime is checked again; default 2000 ms. */
  cacheMs?: number;
  /** Clock, for tests. */
  now?: () => number;
}

/** `TOLLGATE_SECRET_<NAME>_<KEY>`: upper-cased, every non-alphanumeric becomes `_`. */
export function secretEnvName(ref: SecretReference): string {
  const part = (s: string): string => s.toUpperCase().replace(/[^A-Z0-9]/g, '_');
  return `TOLLGATE_SECRET_${part(ref.name)}_${part(ref.key)}`;
}

// Names and keys as Kubernetes allows them; anything else (e.g. "..", "/") never reaches the filesystem.
const SAFE_SEGMENT = /^[-._a-zA-Z0-9]+$/;

interface CachedFile {
  value: string | undefined;
  /** mtime, size and inode: a rotated or rewritten file changes at least one of them. */
  stamp: string;
  checkedAt: number;
}

/**
 * Resolves Secret references from the environment first (an explicit override), then from the
 * mounted secrets directory when one is configured. Mounted files are re-read when they change
 * (Kubernetes rotates them by swapping a symlink), at most once per cacheMs.
 */
export function createEnvSecretResolver(opts: EnvSecretResolverOptions = {}): SecretResolver {
  const env = opts.env ?? process.env;
  const cacheMs = opts.cacheMs ?? 2_000;
  const now = opts.now ?? Date.now;
  const cache = new Map<string, CachedFile>();

  const fromFile = (dir: string, ref: SecretReference): string | undefined => {
    if (!SAFE_SEGMENT.test(ref.name) || !SAFE_SEGMENT.test(ref.key) || ref.name === '..' || ref.key === '..') {
      return undefined;
    }
    const file = join(dir, ref.name, ref.key);
    const cached = cache.get(file);
    const t = now();
    if (cached && t - cached.checkedAt < cacheMs) return cached.value;
    let stamp: string;
    try {
      const st = statSync(file);
      stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch {
      cache.set(file, { value: undefined, stamp: '', checkedAt: t });
      return undefined;
    }
    if (cached && cached.stamp === stamp && cached.value !== undefined) {
      cached.checkedAt = t;
      return cached.value;
    }
    let value: string | undefined;
    try {
      // A trailing newline (echo > file) would corrupt an auth header; inner whitespace is kept.
      value = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch {
      value = undefined;
    }
    cache.set(file, { value, stamp, checkedAt: t });
    return value;
  };

  return {
    resolve(ref) {
      const fromEnv = env[secretEnvName(ref)];
      if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
      const dir = opts.secretsDir ?? env.TOLLGATE_SECRETS_DIR;
      return dir ? fromFile(dir, ref) : undefined;
    },
  };
}
