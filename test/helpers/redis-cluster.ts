// A real Redis Cluster on loopback for tests: six redis-server processes in cluster mode (three masters,
// each with one replica), joined by redis-cli --cluster create, each in a temp folder of its own.
// Started in a few seconds (bounded), stopped and removed after.
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { spawnRedisServer, stopRedisChild } from './redis-server.js';

const run = promisify(execFile);

/** Longest the whole cluster may take to come up. */
const START_BOUND_MS = 20_000;

export interface ClusterServer {
  port: number;
  /** SIGKILL, as a crash. */
  kill(): Promise<void>;
}

export interface RedisClusterProcess {
  /** host:port of every node, comma-separated (REDIS_CLUSTER_NODES). */
  nodes: string;
  servers: ClusterServer[];
  /** Runs redis-cli against one node and returns its output. */
  cli(port: number, ...args: string[]): Promise<string>;
  /** The port of the master serving `slot` now, and of its replicas, from CLUSTER SHARDS-like output. */
  roles(): Promise<Array<{ port: number; role: 'master' | 'slave'; masterPort?: number }>>;
  stop(): Promise<void>;
}

function listen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (port + 10000) is free too. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await listen(port)) && (await listen(port + 10_000))) {
      taken.add(port);
      taken.add(port + 10_000);
      return port;
    }
  }
  throw new Error('no free port pair for a cluster node');
}

function startNode(port: number, dir: string): Promise<ChildProcess> {
  return spawnRedisServer([
    '--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
    '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000',
    '--appendonly', 'no', '--save', '',
  ]);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function startRedisCluster(): Promise<RedisClusterProcess> {
  const started = Date.now();
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < 6; i++) ports.push(await freeClusterPort(taken));
  const dirs = ports.map(() => mkdtempSync(join(tmpdir(), 'tollgate-cluster-')));
  const children: ChildProcess[] = [];
  const cli = async (port: number, ...args: string[]): Promise<string> =>
    (await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 10_000 })).stdout;
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((c) => stopRedisChild(c, 'SIGKILL')));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  };
  try {
    for (const [i, port] of ports.entries()) children.push(await startNode(port, dirs[i] as string));
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], {
      timeout: START_BOUND_MS,
    });
    // Every node must agree the cluster is whole (all slots served) before a client is let at it.
    for (;;) {
      const states = await Promise.all(ports.map((p) => cli(p, 'cluster', 'info')));
      if (states.every((s) => s.includes('cluster_state:ok'))) break;
      if (Date.now() - started > START_BOUND_MS) throw new Error(`cluster not ok after ${START_BOUND_MS} ms`);
      await sleep(100);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const roles = async (): Promise<Array<{ port: number; role: 'master' | 'slave'; masterPort?: number }>> => {
    const alive = ports.filter((_, i) => children[i]?.exitCode === null && children[i]?.signalCode === null);
    const out = await cli(alive[0] as number, 'cluster', 'nodes');
    const byId = new Map<string, number>();
    const lines = out.trim().split('\n').map((l) => l.split(' '));
    for (const f of lines) byId.set(f[0] as string, Number((f[1] as string).split(':')[1]?.split('@')[0]));
    return lines
      .filter((f) => !(f[2] as string).includes('fail'))
      .map((f) => {
        const port = byId.get(f[0] as string) as number;
        if ((f[2] as string).includes('master')) return { port, role: 'master' as const };
        return { port, role: 'slave' as const, masterPort: byId.get(f[3] as string) as number };
      });
  };
  return {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    servers: ports.map((port, i) => ({ port, kill: () => stopRedisChild(children[i] as ChildProcess, 'SIGKILL') })),
    cli,
    roles,
    stop,
  };
}
