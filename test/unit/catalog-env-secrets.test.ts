import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEnvSecretResolver, secretEnvName } from '../../src/catalog/env-secrets.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-secrets-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('env secret resolver', () => {
  it('names the variable by upper-casing and replacing non-alphanumerics', () => {
    expect(secretEnvName({ name: 'glm-upstream.v2', key: 'api-key' })).toBe('TOLLGATE_SECRET_GLM_UPSTREAM_V2_API_KEY');
  });

  it('resolves from the environment', () => {
    const r = createEnvSecretResolver({ env: { TOLLGATE_SECRET_OPENROUTER_API_KEY: 'sk-or-123' } });
    expect(r.resolve({ name: 'openrouter', key: 'api-key' })).toBe('sk-or-123');
    expect(r.resolve({ name: 'openrouter', key: 'other' })).toBeUndefined();
  });

  it('resolves from a mounted directory, env first', () => {
    mkdirSync(join(dir, 'vllm'));
    writeFileSync(join(dir, 'vllm', 'token'), 'file-value\n');
    const env: NodeJS.ProcessEnv = { TOLLGATE_SECRETS_DIR: dir };
    const r = createEnvSecretResolver({ env });
    expect(r.resolve({ name: 'vllm', key: 'token' })).toBe('file-value');
    env.TOLLGATE_SECRET_VLLM_TOKEN = 'env-value';
    expect(r.resolve({ name: 'vllm', key: 'token' })).toBe('env-value');
    expect(r.resolve({ name: 'missing', key: 'token' })).toBeUndefined();
  });

  it('never reads outside the secrets directory', () => {
    writeFileSync(join(dir, 'outside'), 'nope');
    mkdirSync(join(dir, 'mount'));
    const r = createEnvSecretResolver({ secretsDir: join(dir, 'mount'), env: {} });
    expect(r.resolve({ name: '..', key: 'outside' })).toBeUndefined();
    expect(r.resolve({ name: 'a/../..', key: 'outside' })).toBeUndefined();
  });

  it('re-reads a rotated file once the cache expires', () => {
    let now = 1_000;
    const data1 = join(dir, '..2026_01');
    const data2 = join(dir, '..2026_02');
    mkdirSync(data1);
    mkdirSync(data2);
    writeFileSync(join(data1, 'key'), 'old-secret');
    writeFileSync(join(data2, 'key'), 'new-secret');
    // Kubernetes-style: <dir>/<name> is a symlink that is swapped on rotation.
    symlinkSync(data1, join(dir, 'up'));
    const r = createEnvSecretResolver({ secretsDir: dir, env: {}, cacheMs: 1000, now: () => now });
    expect(r.resolve({ name: 'up', key: 'key' })).toBe('old-secret');
    symlinkSync(data2, join(dir, 'up.tmp'));
    renameSync(join(dir, 'up.tmp'), join(dir, 'up'));
    now += 500;
    expect(r.resolve({ name: 'up', key: 'key' })).toBe('old-secret');
    now += 600;
    expect(r.resolve({ name: 'up', key: 'key' })).toBe('new-secret');
  });
});
