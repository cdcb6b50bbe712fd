// Operator entry point. Configuration from the environment:
//   KUBECONFIG          kubeconfig file (else in-cluster service account, else ~/.kube/config)
//   WATCH_NAMESPACE     namespace to reconcile ('' = all namespaces; default: the pod's namespace)
//   POD_NAMESPACE       namespace of the leader-election Lease (default: WATCH_NAMESPACE or 'default')
//   POD_NAME            identity in the Lease (default: hostname)
//   LEASE_NAME          Lease name (default tollgate-operator)
//   PROBE_INTERVAL_MS   upstream probe interval (default 30000)
//   PROBE_TIMEOUT_MS    per-probe timeout (default 5000)
//   HEALTH_PORT         /healthz and /readyz (default 8081)
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { startOperator } from './controller.js';

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return value;
}

function podNamespace(): string | undefined {
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim();
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault(); // KUBECONFIG, then in-cluster, then ~/.kube/config
  const ownNamespace = process.env.POD_NAMESPACE || podNamespace() || 'default';
  const watchNamespace = process.env.WATCH_NAMESPACE ?? ownNamespace;
  const operator = await startOperator({
    kubeConfig,
    watchNamespace,
    leaseNamespace: ownNamespace,
    leaseName: process.env.LEASE_NAME || 'tollgate-operator',
    identity: process.env.POD_NAME || hostname(),
    probeIntervalMs: intFromEnv('PROBE_INTERVAL_MS', 30_000),
    probeTimeoutMs: intFromEnv('PROBE_TIMEOUT_MS', 5_000),
    healthPort: intFromEnv('HEALTH_PORT', 8081),
  });
  console.log(
    JSON.stringify({ level: 'info', message: 'tollgate operator started', watchNamespace: watchNamespace || '(all)', healthPort: operator.healthPort }),
  );
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    console.log(JSON.stringify({ level: 'info', message: `received ${signal}; releasing the lease and stopping` }));
    operator.stop({ release: true }).then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(JSON.stringify({ level: 'error', message: 'shutdown failed', error: String(err) }));
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  console.error(JSON.stringify({ level: 'error', message: 'operator failed to start', error: err instanceof Error ? err.message : String(err) }));
  process.exit(1);
});
