// A real Kubernetes control plane on loopback: etcd and kube-apiserver (built from tools/go.mod), with
// certificates made here by the openssl CLI, RBAC authorization, service-account signing keys, and a
// kubeconfig for an admin in system:masters. No scheduler, controller-manager or kubelet: objects are
// stored and validated by the real server, nothing runs them (tests act as controllers where needed).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { toolPath } from './tools.js';

const run = promisify(execFile);

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

interface Pki {
  ca: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
  saKey: string;
  saPub: string;
}

/** A CA, the server's certificate (loopback names), an admin client certificate and the SA key pair. */
async function makePki(dir: string): Promise<Pki> {
  const p = (name: string): string => join(dir, name);
  const ssl = (...args: string[]) => run('openssl', args);
  await ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=tollgate-test-ca', '-keyout', p('ca.key'), '-out', p('ca.crt'),
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  writeFileSync(p('server.ext'), [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth',
    'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc',
    '',
  ].join('\n'));
  writeFileSync(p('client.ext'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');
  await ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=kube-apiserver', '-keyout', p('server.key'), '-out', p('server.csr'));
  await ssl('x509', '-req', '-in', p('server.csr'), '-CA', p('ca.crt'), '-CAkey', p('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', p('server.ext'), '-out', p('server.crt'));
  // system:masters: the admin the tests (and helm) act as; the operator impersonates its ServiceAccount.
  await ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/O=system:masters/CN=tollgate-test-admin', '-keyout', p('admin.key'), '-out', p('admin.csr'));
  await ssl('x509', '-req', '-in', p('admin.csr'), '-CA', p('ca.crt'), '-CAkey', p('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', p('client.ext'), '-out', p('admin.crt'));
  await ssl('genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', p('sa.key'));
  await ssl('pkey', '-in', p('sa.key'), '-pubout', '-out', p('sa.pub'));
  return {
    ca: p('ca.crt'),
    caKey: p('ca.key'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    adminCert: p('admin.crt'),
    adminKey: p('admin.key'),
    saKey: p('sa.key'),
    saPub: p('sa.pub'),
  };
}

export interface ControlPlane {
  /** https://127.0.0.1:<port> */
  server: string;
  dir: string;
  /** The admin kubeconfig file (system:masters). */
  kubeconfigPath: string;
  /** A kubeconfig file whose user impersonates `as` (e.g. system:serviceaccount:ns:name). */
  impersonatingKubeconfig(as: string, name: string): string;
  /** A KubeConfig object loaded from the admin kubeconfig, optionally defaulting to a namespace. */
  kubeConfig(namespace?: string): KubeConfig;
  /** Stops kube-apiserver only (etcd keeps the data), for tests of clients riding out an outage. */
  stopApiServer(): Promise<void>;
  /** Starts kube-apiserver again on the same address with the same data. */
  startApiServer(): Promise<void>;
  stop(): Promise<void>;
  /** The API server's log (its stderr), for failure messages. */
  log(): string;
}

async function httpsStatus(url: string, pki: Pki): Promise<number> {
  return new Promise((resolve) => {
    const req = request(url, { ca: readFileSync(pki.ca), cert: readFileSync(pki.adminCert), key: readFileSync(pki.adminKey), timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

const alive = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of alive) child.kill('SIGKILL');
});

function spawnTool(command: string, args: string[], sink: string[]): ChildProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  alive.add(child);
  child.once('exit', () => alive.delete(child));
  const keep = (chunk: Buffer): void => {
    sink.push(chunk.toString());
    if (sink.length > 400) sink.splice(0, sink.length - 400);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return child;
}

/** Starts etcd and kube-apiserver; resolves once /readyz answers 200 (RBAC bootstrap included). */
export async function startControlPlane(): Promise<ControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-k8s-'));
  const pki = await makePki(dir);
  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdLog: string[] = [];
  const apiLog: string[] = [];
  // --unsafe-no-fsync: throwaway data, and fsync on a shared 2-core machine is what makes etcd slow.
  const etcd = spawnTool(toolPath('etcd'), [
    '--name=test',
    `--data-dir=${join(dir, 'etcd')}`,
    `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
    `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
    `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-cluster=test=http://127.0.0.1:${peerPort}`,
    '--unsafe-no-fsync',
    '--log-level=warn',
  ], etcdLog);
  const server = `https://127.0.0.1:${apiPort}`;
  mkdirSync(join(dir, 'apiserver-certs'));
  const apiArgs = [
    `--etcd-servers=http://127.0.0.1:${etcdPort}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${apiPort}`,
    `--cert-dir=${join(dir, 'apiserver-certs')}`,
    `--tls-cert-file=${pki.serverCert}`,
    `--tls-private-key-file=${pki.serverKey}`,
    `--client-ca-file=${pki.ca}`,
    '--authorization-mode=RBAC',
    `--service-account-key-file=${pki.saPub}`,
    `--service-account-signing-key-file=${pki.saKey}`,
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    '--service-cluster-ip-range=10.0.0.0/24',
    // Nothing runs pods here, and no controller-manager creates namespaces' default ServiceAccount.
    '--disable-admission-plugins=ServiceAccount',
    // The endpoint reconciler refuses loopback addresses; nothing here routes to the kubernetes Service.
    '--endpoint-reconciler-type=none',
    // Fewer start-up hooks and goroutines on a small machine; no test is about request fairness.
    '--enable-priority-and-fairness=false',
    '--v=1',
  ];
  let api: ChildProcess | undefined;

  const startApiServer = async (): Promise<void> => {
    api = spawnTool(toolPath('kube-apiserver'), apiArgs, apiLog);
    const deadline = Date.now() + 90_000;
    while ((await httpsStatus(`${server}/readyz`, pki)) !== 200) {
      if (api.exitCode !== null) throw new Error(`kube-apiserver exited with ${api.exitCode}:\n${apiLog.join('').slice(-4000)}\netcd:\n${etcdLog.join('').slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`kube-apiserver not ready within 90 s:\n${apiLog.join('').slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };
  try {
    await startApiServer();
  } catch (err) {
    await stopChild(api);
    await stopChild(etcd);
    throw err;
  }

  const kubeconfigFor = (user: Record<string, string>): string =>
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'test', cluster: { server, 'certificate-authority': pki.ca } }],
      users: [{ name: 'test', user: { 'client-certificate': pki.adminCert, 'client-key': pki.adminKey, ...user } }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: 'test' } }],
      'current-context': 'test',
    });
  const kubeconfigPath = join(dir, 'admin.kubeconfig');
  writeFileSync(kubeconfigPath, kubeconfigFor({}), { mode: 0o600 });

  return {
    server,
    dir,
    kubeconfigPath,
    impersonatingKubeconfig(as, name) {
      const path = join(dir, `${name}.kubeconfig`);
      writeFileSync(path, kubeconfigFor({ as }), { mode: 0o600 });
      return path;
    },
    kubeConfig(namespace) {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      if (namespace) kc.contexts = kc.contexts.map((c) => ({ ...c, namespace }));
      return kc;
    },
    stopApiServer: () => stopChild(api),
    startApiServer,
    async stop() {
      await stopChild(api);
      await stopChild(etcd);
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => apiLog.join(''),
  };
}
