// Forks benchmark targets (bench/serve.ts) as child processes and talks to them over IPC.
import { fork, type ChildProcess } from 'node:child_process';
import type { ServeMessage, ServeSpec } from './serve.js';

export interface Target {
  url: string;
  key: string | undefined;
  pid: number;
  memory(): Promise<Extract<ServeMessage, { type: 'memory' }>>;
  stop(): Promise<void>;
}

const SERVE = new URL('./serve.ts', import.meta.url).pathname;

export async function startTarget(spec: ServeSpec, extraNodeArgs: string[] = []): Promise<Target> {
  const child: ChildProcess = fork(SERVE, [], {
    env: { ...process.env, BENCH_SERVE_SPEC: JSON.stringify(spec) },
    execArgv: ['--import', 'tsx', '--expose-gc', ...extraNodeArgs],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ready = await new Promise<Extract<ServeMessage, { type: 'ready' }>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${spec.role} did not start within 30 s`)), 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${spec.role} exited with code ${code} before it was ready`));
    });
    child.on('message', (m: ServeMessage) => {
      if (m.type === 'ready') {
        clearTimeout(timer);
        resolve(m);
      }
    });
  });
  child.removeAllListeners('exit');
  return {
    url: ready.url,
    key: ready.key,
    pid: child.pid ?? 0,
    memory: () =>
      new Promise((resolve) => {
        const onMessage = (m: ServeMessage): void => {
          if (m.type === 'memory') {
            child.off('message', onMessage);
            resolve(m);
          }
        };
        child.on('message', onMessage);
        child.send('memory');
      }),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.send('stop');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
