// Starts a throwaway redis-server on a free loopback port, so a fresh machine behaves like this one.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisProcess {
  url: string;
  port: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface RedisServerOptions {
  /** Keep an append-only file (fsync always), so a killed server restarts with every write. */
  appendOnly?: boolean;
  /** Restart on this port and in this folder (a server started before and stopped or killed). */
  port?: number;
  dir?: string;
  /** Start as a replica of the server on this loopback port. */
  replicaOf?: number;
}

export interface OwnRedisProcess extends RedisProcess {
  dir: string;
  /** The server's process id (benches read its CPU time). */
  pid: number;
  /** SIGKILL: no shutdown save, as a crash. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: the server holds its connections but answers nothing. */
  pause(): void;
  resume(): void;
}

/** Runs redis-server with these arguments and resolves once it accepts connections (bounded). */
export function spawnRedisServer(args: readonly string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`redis-server ${args.join(' ')} did not start: ${out}`)), 10_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run redis-server (is it installed?): ${err.message}`));
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
  });
}

/** Signals a server (waking it first if it is paused) and waits for it to exit. */
export async function stopRedisChild(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGCONT');
  child.kill(signal);
  await exited;
}

export async function startRedisServer(opts: RedisServerOptions = {}): Promise<OwnRedisProcess> {
  const port = opts.port ?? (await freePort());
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'tollgate-redis-'));
  const persistence = opts.appendOnly === true ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'];
  const replica = opts.replicaOf === undefined ? [] : ['--replicaof', '127.0.0.1', String(opts.replicaOf)];
  const child = await spawnRedisServer(['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence, '--dir', dir, ...replica]);
  const exit = (signal: NodeJS.Signals): Promise<void> => stopRedisChild(child, signal);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    pid: child.pid ?? -1,
    kill: () => exit('SIGKILL'),
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    stop: async () => {
      await exit('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A TCP forwarder on a loopback port, standing for the address clients are given (a Sentinel-managed or
 * cloud endpoint): `switchTo` points new connections at another server and cuts the open ones, as a
 * failover does.
 */
export interface RedisEndpoint {
  url: string;
  port: number;
  switchTo(port: number): void;
  close(): Promise<void>;
}

export async function startRedisEndpoint(targetPort: number): Promise<RedisEndpoint> {
  let target = targetPort;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    open.add(client);
    open.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : 0);
    });
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    switchTo(p) {
      target = p;
      for (const s of open) s.destroy();
      open.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
