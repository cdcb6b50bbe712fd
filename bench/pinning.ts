// A gateway on a core of its own: what production gives a gateway pod (its own CPU) and what a two-core
// bench machine otherwise cannot, where the load generator, the simulator, Redis and PostgreSQL would
// take turns on the gateway's core. Linux's taskset (util-linux) sets each process's CPU affinity.
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';

function setAffinity(cpuList: string, pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      // -a: every thread (libuv's pool, V8's helpers), not just the main one.
      execFileSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' });
    } catch {
      // gone meanwhile (a PostgreSQL backend the pool closed)
    }
  }
}

/** Whether the gateway can have a core to itself here: two cores or more, and taskset. */
export function canPin(): boolean {
  if (cpus().length < 2) return false;
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Linux's scheduling class for these processes (util-linux chrt): 'idle' runs only when nothing else wants the CPU. */
function setPolicy(policy: 'idle' | 'other', pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      execFileSync('chrt', ['-a', `--${policy}`, '-p', '0', String(pid)], { stdio: 'ignore' });
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * Core 0 for the gateway; every other core for the rest (a process started since is not moved).
 * `offMachine` also go to the other cores, at idle priority: the processes that production runs on
 * machines of their own (PostgreSQL), which there take no CPU from the gateway's Redis, upstream or
 * clients. Here they use only what the others leave idle.
 */
export function pinGateway(gatewayPid: number, rest: readonly number[], offMachine: readonly number[] = []): void {
  setAffinity('0', [gatewayPid]);
  setAffinity(`1-${cpus().length - 1}`, [...rest, ...offMachine]);
  setPolicy('idle', offMachine);
}

/** Every core, at normal priority, for these processes again. */
export function unpin(pids: readonly number[]): void {
  setAffinity(`0-${cpus().length - 1}`, pids);
  setPolicy('other', pids);
}
