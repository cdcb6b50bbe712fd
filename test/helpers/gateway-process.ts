// A gateway in a child process (test/helpers/gateway-child.ts), for tests that kill it, pause its
// Redis or watch it shut down: started with the given environment, its URL read from its first line.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface GatewayProcess {
  url: string;
  child: ChildProcess;
  /** Everything the child wrote to stdout after its URL line (its JSON log lines). */
  output: string[];
  /** The child's resident set, and its heap in use plus memory outside the heap, right after a full collection. */
  memoryAfterGc(): Promise<{ rss: number; kept: number; outsideHeap: number }>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<ChildProcess>();

export async function startGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  // --expose-gc: a leak check can ask the child for a full collection (see gateway-child.ts).
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', new URL('./gateway-child.ts', import.meta.url).pathname], {
    env: { ...process.env, TOLLGATE_REAPER_INTERVAL_MS: '60000', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  const output: string[] = [];
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('child gateway did not start')), 20_000);
    lines.on('line', (line) => {
      if (line.startsWith('{"url"')) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { url: string }).url);
      } else output.push(line);
    });
    child.once('exit', (c) => reject(new Error(`child gateway exited with ${c}`)));
  });
  return {
    url,
    child,
    output,
    async memoryAfterGc() {
      const seen = output.length;
      child.kill('SIGUSR2');
      for (const until = Date.now() + 10_000; Date.now() < until; await new Promise((r) => setTimeout(r, 20))) {
        const line = output.slice(seen).find((l) => l.startsWith('{"afterGc"'));
        if (line !== undefined) return (JSON.parse(line) as { afterGc: { rss: number; kept: number; outsideHeap: number } }).afterGc;
      }
      throw new Error('the child gateway did not report its memory after a collection');
    },
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      // Already gone (exited, or killed by a signal): its 'exit' has fired and will not again.
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill(signal);
      return exited;
    },
  };
}

/** Kills every child still running (an afterAll hook's job, so a failed test leaves none behind). */
export function killGatewayProcesses(): void {
  for (const c of running) c.kill('SIGKILL');
}
