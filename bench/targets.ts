// Forks benchmark targets (bench/serve.ts) as child processes and talks to them over IPC. Also reads a
// process's memory and file descriptors from /proc, so figures come from the measured process itself.
import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { ServeMessage, ServeSpec } from './serve.js';

export interface Target {
  url: string;
  /** Every listener of the target (several for a multi-port simulator). */
  urls: string[];
  key: string | undefined;
  pid: number;
  /** Heap figures from inside the process, after a full GC. */
  memory(): Promise<Extract<ServeMessage, { type: 'memory' }>>;
  stop(): Promise<void>;
  /** Kills at once; for the watchdog, when an orderly stop may itself hang. */
  kill(): void;
  /** Starts the target's own CPU profiler; `stopProfile` returns the profile taken since. */
  startProfile(): void;
  stopProfile(): Promise<object>;
  /** A gateway started with journalSwitch: turns its journal on or off, resolved once done, with its GC time since its first switch and the moment on its monotonic clock. */
  switchJournal(on: boolean): Promise<{ gcMs: { minor: number; major: number }; atUs: number }>;
}

export interface ProcStats {
  /** Resident set (VmRSS) and its peak (VmHWM), bytes. */
  rss: number;
  rssPeak: number;
  openFds: number;
  /** The soft RLIMIT_NOFILE of the process. */
  fdLimit: number;
}

/** Linux only: the stats of process `pid` as the kernel sees them. */
export function procStats(pid: number | 'self'): ProcStats {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  const limits = readFileSync(`/proc/${pid}/limits`, 'utf8');
  const fdLimit = Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1] ?? NaN);
  return { rss: kb('VmRSS'), rssPeak: kb('VmHWM'), openFds: readdirSync(`/proc/${pid}/fd`).length, fdLimit };
}

/** The user and system CPU seconds process `pid` has used (clock ticks are 1/100 s on Linux). */
export function cpuTimes(pid: number): { user: number; system: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

/** User plus system CPU seconds process `pid` has used. */
export function cpuSeconds(pid: number): number {
  const t = cpuTimes(pid);
  return t.user + t.system;
}

/**
 * The processes whose command line (NUL-separated arguments, or a retitled process's title) `match`
 * takes; with `from: 'comm'`, whose executable name (which a new title leaves as it was).
 */
export function pidsWhere(match: (cmdline: string) => boolean, from: 'cmdline' | 'comm' = 'cmdline'): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (match(readFileSync(`/proc/${entry}/${from}`, 'utf8'))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** What a target process runs: bench/serve.ts under tsx, or its build (bench/build.ts). */
export interface TargetEntry {
  path: string;
  execArgv: string[];
  /** The node binary to run it on (default: this process's). */
  execPath?: string;
}

/**
 * The V8 flags the image runs the gateway with (the Dockerfile's `gateway` command; a test keeps the
 * two the same), so the bench's gateways are sized as production's are.
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

export const SOURCE_ENTRY: TargetEntry = { path: new URL('./serve.ts', import.meta.url).pathname, execArgv: ['--import', 'tsx'] };

export function builtEntry(servePath: string): TargetEntry {
  return { path: servePath, execArgv: [] };
}

export async function startTarget(spec: ServeSpec, extraNodeArgs: string[] = [], entry: TargetEntry = SOURCE_ENTRY): Promise<Target> {
  const child: ChildProcess = fork(entry.path, [], {
    env: { ...process.env, BENCH_SERVE_SPEC: JSON.stringify(spec) },
    execArgv: [...entry.execArgv, '--expose-gc', ...(spec.role === 'gateway' ? GATEWAY_NODE_FLAGS : []), ...extraNodeArgs],
    ...(entry.execPath === undefined ? {} : { execPath: entry.execPath }),
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ready = await new Promise<Extract<ServeMessage, { type: 'ready' }>>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${spec.role} did not start within 30 s`));
    }, 30_000);
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
  /**
   * Sends `request` and resolves with the first answer of `type` that `accept` takes (bounded: a process
   * busy with thousands of sockets still answers well within it).
   */
  const ask = <K extends ServeMessage['type']>(
    request: string,
    what: string,
    type: K,
    accept: (m: Extract<ServeMessage, { type: K }>) => boolean = () => true,
  ): Promise<Extract<ServeMessage, { type: K }>> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${spec.role} did not ${what} within 30 s`)), 30_000);
      const onMessage = (m: ServeMessage): void => {
        const answer = m as Extract<ServeMessage, { type: K }>;
        if (m.type === type && accept(answer)) {
          clearTimeout(timer);
          child.off('message', onMessage);
          resolve(answer);
        }
      };
      child.on('message', onMessage);
      child.send(request);
    });
  return {
    url: ready.url,
    urls: ready.urls,
    key: ready.key,
    pid: child.pid ?? 0,
    memory: () => ask('memory', 'report its memory', 'memory'),
    startProfile: () => child.send('profile-start'),
    stopProfile: async () => (await ask('profile-stop', 'send its profile', 'profile')).profile,
    switchJournal: async (on) => await ask(on ? 'journal-on' : 'journal-off', 'switch its journal', 'journal', (m) => m.on === on),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      if (child.connected) child.send('stop');
      else child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
