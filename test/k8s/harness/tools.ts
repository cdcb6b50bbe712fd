// The real tools the Kubernetes tests drive: helm, etcd, kube-apiserver and promtool, built from
// tools/go.mod into tools/bin by `make tools` (tools/build.sh, which reuses a machine-level cache).
// In CI (CI=true) tools that are not built fail the run loudly; elsewhere the first test file that
// needs them runs tools/build.sh (a no-op when the cache holds this tools/go.mod's build).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..', '..');
const TOOLS = join(ROOT, 'tools');
export type Tool = 'helm' | 'etcd' | 'kube-apiserver' | 'promtool';

let ready = false;

function buildScript(args: string[]): { ok: boolean; output: string } {
  try {
    const output = execFileSync(join(TOOLS, 'build.sh'), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60 * 60_000 });
    return { ok: true, output };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` || e.message };
  }
}

/** Makes sure the tools of this tools/go.mod are in tools/bin; throws (CI) or builds them (elsewhere). */
export function ensureTools(): void {
  if (ready) return;
  if (process.env.CI === 'true') {
    const check = buildScript(['--check']);
    if (!check.ok) {
      throw new Error(`The Kubernetes tests need helm, etcd, kube-apiserver and promtool from tools/go.mod and CI did not build them: ${check.output.trim()}. Run \`make tools\` before \`npm test\` (.ci/run does).`);
    }
  } else {
    const build = buildScript([]);
    if (!build.ok) throw new Error(`\`make tools\` (tools/build.sh) failed; run it by hand to see why:\n${build.output}`);
  }
  ready = true;
}

export function toolPath(tool: Tool): string {
  ensureTools();
  return join(TOOLS, 'bin', tool);
}

/** The prometheus-operator CRDs (servicemonitors, prometheusrules) that tools/build.sh puts beside the tools. */
export function monitoringCrdPath(plural: 'servicemonitors' | 'prometheusrules'): string {
  ensureTools();
  return join(TOOLS, 'bin', 'crds', `monitoring.coreos.com_${plural}.yaml`);
}

/** How long a k8s test file's set-up may take: starting etcd and kube-apiserver (and, in the cluster
 *  test, helm install and a first Lease) on a loaded CI machine; outside CI also a cold build of the
 *  tools, which takes many minutes. */
export const TOOLS_TIMEOUT_MS = process.env.CI === 'true' ? 300_000 : 60 * 60_000;
