// Automatic top-up passes in child processes (auto-top-up-pass-child.ts), like two gateways each running
// the pass: a test asks each for one pass and reads how many charges it made.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface PassProcess {
  /** Runs one pass in the child; the number of charges it made. */
  pass(): Promise<number>;
  close(): Promise<void>;
}

export async function startPassProcess(env: { databaseUrl: string; stripeUrl: string; webhookSecret: string }): Promise<PassProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', new URL('./auto-top-up-pass-child.ts', import.meta.url).pathname], {
    env: { ...process.env, TOLLGATE_TEST_DATABASE_URL: env.databaseUrl, STRIPE_API_BASE: env.stripeUrl, STRIPE_WEBHOOK_SECRET: env.webhookSecret },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const waiting: Array<(line: string) => void> = [];
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  lines.on('line', (line) => waiting.shift()?.(line));
  const next = (what: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the pass process did not answer: ${what}`)), 30_000);
      waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  const ready = await next('start');
  if (!ready.includes('"ready"')) throw new Error(`the pass process said ${ready}`);
  return {
    async pass() {
      const answer = next('pass');
      child.stdin?.write('pass\n');
      const r = JSON.parse(await answer) as { charged?: number; error?: string };
      if (r.error !== undefined) throw new Error(`pass failed in the child: ${r.error}`);
      return r.charged ?? 0;
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.stdin?.end();
      await exited;
    },
  };
}
