// A peer gateway as the bench runs it: one process (and whatever workers it forks) on a loopback port,
// ready once its health path answers, measured by the CPU of its whole process tree.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * What a failed install or build step says, in a line or two: from its stderr (and stdout), the lines
 * `keep` takes, else its message; "timed out" when the step was killed for its timeout.
 */
export function stepFailure(err: unknown, keep: (line: string) => boolean, lines = 2): string {
  const e = err as { stderr?: string; stdout?: string; killed?: boolean; message?: string };
  if (e.killed === true) return 'timed out';
  const kept = `${e.stderr ?? ''}\n${e.stdout ?? ''}`.split('\n').filter((l) => l.trim() !== '' && keep(l));
  return (kept.slice(0, lines).join('; ') || (e.message ?? String(err)).split('\n')[0] || '').trim().slice(0, 300);
}

export interface RunningPeer {
  url: string;
  /** The peer's main process. */
  pid: number;
  /** The main process and every descendant (worker processes, an engine it forks). */
  pids(): number[];
  stop(): Promise<void>;
  kill(): void;
}

/** Parent pid of every live process, read from /proc/<pid>/stat. */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command name may hold spaces and parentheses; the fields after its closing one are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(entry), ppid);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** `root` and all its descendants alive now. */
export function processTree(root: number): number[] {
  const byParent = new Map<number, number[]>();
  for (const [pid, ppid] of parents()) byParent.set(ppid, [...(byParent.get(ppid) ?? []), pid]);
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    out.push(pid);
    queue.push(...(byParent.get(pid) ?? []));
  }
  return out;
}

export interface PeerProcessSpec {
  name: string;
  command: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The peer's URL and the path that answers once it serves. */
  url: string;
  readyPath: string;
  /** Seconds to wait for it; a Python proxy with a database takes a while. */
  readySec: number;
}

/** Starts the process and waits until `readyPath` answers (any status); throws with its last output if it exits or never answers. */
export async function startPeerProcess(spec: PeerProcessSpec): Promise<RunningPeer> {
  const child: ChildProcess = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, stdio: ['ignore', 'pipe', 'pipe'], detached: false });
  let output = '';
  const keep = (c: Buffer): void => {
    output = (output + c.toString()).slice(-3000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const pid = child.pid ?? 0;
  // Kills the whole tree: a Python proxy's workers would otherwise outlive their parent.
  const kill = (): void => {
    for (const p of processTree(pid).reverse()) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  const deadline = Date.now() + spec.readySec * 1000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${spec.name} exited (${child.exitCode ?? child.signalCode}): ${output.trim().split('\n').slice(-6).join(' | ')}`);
    }
    try {
      const res = await fetch(spec.url + spec.readyPath, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      break;
    } catch {
      if (Date.now() > deadline) {
        kill();
        throw new Error(`${spec.name} did not answer within ${spec.readySec} s: ${output.trim().split('\n').slice(-6).join(' | ')}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return {
    url: spec.url,
    pid,
    pids: () => processTree(pid),
    kill,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(kill, 5_000);
      await exited;
      clearTimeout(timer);
      // Workers that did not follow their parent.
      kill();
    },
  };
}
