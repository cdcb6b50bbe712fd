// helm (tools/bin/helm) as a child process, with its config, cache and data in a throwaway directory.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { ROOT, toolPath } from './tools.js';

export const CHART = join(ROOT, 'charts', 'tollgate');
export const PRODUCTION_VALUES = join(CHART, 'values-production.yaml');

const home = mkdtempSync(join(tmpdir(), 'tollgate-helm-'));

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function helm(args: string[], options: { kubeconfig?: string; timeoutMs?: number } = {}): Promise<HelmResult> {
  return new Promise((resolve) => {
    execFile(
      toolPath('helm'),
      args,
      {
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: home,
          HELM_CONFIG_HOME: join(home, 'config'),
          HELM_CACHE_HOME: join(home, 'cache'),
          HELM_DATA_HOME: join(home, 'data'),
          ...(options.kubeconfig ? { KUBECONFIG: options.kubeconfig } : {}),
        },
        timeout: options.timeoutMs ?? 120_000,
        maxBuffer: 64 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A values file in a throwaway directory (helm reads overrides from files; null deletes a default). */
export function valuesFile(values: Record<string, unknown>): string {
  const path = join(mkdtempSync(join(home, 'values-')), 'values.yaml');
  writeFileSync(path, stringify(values, { nullStr: 'null' }));
  return path;
}

export interface KubeDoc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

/** `helm template` of the chart; throws with helm's message when it refuses. */
export async function render(valueFiles: string[], extra: string[] = []): Promise<KubeDoc[]> {
  const result = await helm(['template', 'tollgate', CHART, '--namespace', 'tollgate', ...valueFiles.flatMap((f) => ['-f', f]), ...extra]);
  if (result.code !== 0) throw new Error(`helm template failed (${result.code}): ${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJSON() as KubeDoc | null)
    .filter((d): d is KubeDoc => d !== null);
}

export function find(docs: KubeDoc[], kind: string, name: string): KubeDoc {
  const doc = docs.find((d) => d.kind === kind && d.metadata.name === name);
  if (!doc) throw new Error(`no ${kind} ${name} among ${docs.map((d) => `${d.kind}/${d.metadata.name}`).join(', ')}`);
  return doc;
}
